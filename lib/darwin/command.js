// runConfinedCommand on macOS: maps the runner's options (already validated by the shared
// option checks) to a Seatbelt profile request, or refuses with a precise reason where
// Seatbelt cannot give the option's guarantee. The profile itself is built natively
// (native/profile_seatbelt.c, command policy); this file only decides the mapping.
//
// What the mapping gives, option by option:
//   mounts ro   readable (and executable), writes denied, even inside an earlier rw mount;
//   mounts rw   readable and writable; a later mount wins over an earlier one, as bind
//               mounts shadow in order on Linux;
//   network     'off': no network at all. Linux leaves a private loopback interface;
//               macOS has no per-process loopback (127.0.0.1 is the host's), so 'off' is
//               stricter here: processes of the command cannot talk to each other over TCP
//               either. { allowlist }: outbound TCP to the egress proxy's loopback port
//               only; the proxy enforces the allowlist as on Linux;
//   env, cwd    set by the launch (env -i, spawn cwd), not by the profile.
// Not expressible, documented in README: ending the whole tree (no pid namespace: the
// runner signals the process group, and a process that leaves it with setsid() escapes).

import { buildSeatbeltProfile } from './profile.js';

function refusal(code, reason) {
  return Object.freeze({ ok: false, code, reason });
}

/**
 * options: { mounts: [{ path, mode }], network: 'off' | { allowlist, ... } }; proxyPort:
 * the loopback TCP port of the egress proxy the runner started (required with an
 * allowlist, ignored otherwise).
 * Returns { ok: true, request, posture } where request is the argument of
 * native.seatbeltProfile, or { ok: false, code, reason }.
 * The caller must pass mount paths that are already real paths (fs.realpathSync.native):
 * a non-canonical spelling would not match and would only deny, but an 'ro' rule given a
 * symlink spelling would fail to protect the real directory inside an 'rw' mount.
 */
export function commandSeatbeltRequest(options, proxyPort = 0) {
  const mounts = options?.mounts ?? [];
  if (!Array.isArray(mounts)) return refusal('confinement.refused', 'mounts must be an array');
  const out = [];
  for (const m of mounts) {
    if (typeof m?.path !== 'string' || !m.path.startsWith('/')) {
      return refusal('confinement.mount-not-absolute', `mount path ${String(m?.path)} is not absolute`);
    }
    if (m.mode !== 'ro' && m.mode !== 'rw') {
      return refusal('confinement.refused', `mount ${m.path}: mode must be 'ro' or 'rw'`);
    }
    out.push(Object.freeze({ path: m.path, mode: m.mode }));
  }
  const network = options?.network ?? 'off';
  let port = 0;
  let networkPosture;
  if (network === 'off') {
    networkPosture = 'network off: no network at all (macOS has no private loopback)';
  } else if (network !== null && typeof network === 'object' && Array.isArray(network.allowlist)) {
    if (!Number.isInteger(proxyPort) || proxyPort < 1 || proxyPort > 65535) {
      return refusal(
        'confinement.refused',
        'a network allowlist needs the egress proxy listening on a loopback TCP port; none was given',
      );
    }
    port = proxyPort;
    networkPosture = `network: outbound TCP to localhost:${port} (the egress proxy) only`;
  } else {
    return refusal('confinement.refused', "network must be 'off' or { allowlist }");
  }
  const request = Object.freeze({ policy: 'command', mounts: Object.freeze(out), proxyPort: port });
  const posture = Object.freeze({
    enforced: true,
    backend: 'seatbelt',
    reason:
      `sandbox-exec with a (deny default) profile; ${networkPosture}; ` +
      'the process tree is ended through its process group (no pid namespace on macOS)',
  });
  return Object.freeze({ ok: true, request, posture });
}

/**
 * commandSeatbeltRequest, then the profile: { ok: true, profile, posture } or
 * { ok: false, code, reason } where the builder's own refusal (a path that is not
 * normalised, too many mounts) becomes confinement.refused with its reason.
 */
export function commandSeatbeltProfile(options, proxyPort = 0) {
  const plan = commandSeatbeltRequest(options, proxyPort);
  if (!plan.ok) return plan;
  const profile = buildSeatbeltProfile(plan.request);
  if (!profile.ok) return refusal('confinement.refused', `seatbelt profile: ${profile.reason}`);
  return Object.freeze({ ok: true, profile, posture: plan.posture });
}
