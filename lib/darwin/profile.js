// The Seatbelt profile of either policy, built natively (native/profile_seatbelt.c): this
// wrapper only freezes the result. The text never contains a path; every path is one of
// `params`, passed to sandbox-exec as -D NAME=value. `instantiated` is
// "sha256:<hex>" over the text and the parameters, serialised as documented at the top
// of native/profile_seatbelt.c (length-prefixed fields, so it is unambiguous).
import { native } from '../native.js';

/**
 * request: { policy: 'executor', exec, runtimeFiles, program, input } or
 *          { policy: 'command', mounts: [{ path, mode }], proxyPort }.
 * Returns { ok: true, text, params: [{ name, value }], instantiated } or
 * { ok: false, error, reason } when the builder refuses the request. Throws TypeError for
 * values of the wrong type.
 */
export function buildSeatbeltProfile(request) {
  const r = native.seatbeltProfile(request);
  if (!r.ok) return Object.freeze({ ok: false, error: r.error, reason: r.reason });
  return Object.freeze({
    ok: true,
    text: r.text,
    params: Object.freeze(r.params.map((p) => Object.freeze({ name: p.name, value: p.value }))),
    instantiated: r.instantiated,
  });
}

/**
 * The executor profile built for a fixed reference request (placeholder paths, one
 * runtime file). Its `instantiated` digest covers the rule text *and* the SYSTEM_* and
 * DEV_* values, which are policy but travel as parameters: a profile digest
 * (confinedProfile) must include it, not the text alone, or a change to the system path
 * table would not change the digest.
 */
export function referenceExecutorProfile() {
  return buildSeatbeltProfile({
    policy: 'executor',
    exec: '/EXEC/node',
    runtimeFiles: ['/RUNTIME/library.dylib'],
    program: '/NAMESPACE/program',
    input: '/NAMESPACE/input',
  });
}

/**
 * The executor's profile request from a resolved closure (resolveClosure) and the two
 * snapshot directories (real paths). Runtime files: every library image, plus each alias
 * link that is a plain path (a symlink dyld opens; Seatbelt checks resolved paths, so the
 * target's literal is what grants the read, and the link's literal costs nothing). Alias
 * spellings with '..' are left out: they resolve to an image already listed.
 */
export function executorProfileRequest({ closure, program, input }) {
  if (!closure?.ok) throw new TypeError('executorProfileRequest needs a resolved closure');
  const runtimeFiles = [
    ...closure.images.filter((i) => i.role === 'library').map((i) => i.path),
    // The launch executes the real path, so a link to the executable is never opened.
    ...closure.aliases
      .filter((a) => a.target !== closure.executable)
      .map((a) => a.link)
      .filter((l) => !l.split('/').includes('..') && !l.split('/').includes('.')),
  ];
  return Object.freeze({
    policy: 'executor',
    exec: closure.executable,
    runtimeFiles: Object.freeze([...new Set(runtimeFiles)]),
    program,
    input,
  });
}
