// The executor's run backend on macOS: from a materialised namespace to the collected facts.
// lib/executor.js keeps the order of decision (validation, pins, root, slot, materialise)
// and shapes the result; this file builds the Seatbelt launch, re-verifies the namespace,
// spawns, and collects through lib/collect.js collect(), exactly as on Linux.
//
// Launch chain (spec "Confined launch"): node's child_process.spawn of
//   /bin/dash -c LAUNCH_SCRIPT confined-launch <cpu> <descriptors>
//     /usr/bin/env -i LC_ALL=C TZ=UTC HOME=<ns>/home TMPDIR=<ns>/home OPENSSL_CONF=/dev/null
//     /usr/bin/sandbox-exec -p <profile text> -D NAME=value...
//     <node> --import data:text/javascript,<preload> <ns>/program/<entry> <args...>
// with env {}, cwd <ns>/input, stdio [pipe, pipe, pipe, pipe] (0 stdin, 1 stdout, 2 stderr,
// 3 control), detached false. dash, env and sandbox-exec each exec in place, so the
// ChildProcess is node itself: its exit status is the program's own (no 128+n wrapper) and
// SIGKILL through it kills node. There is no process tree: the profile denies process-fork.
//
// The control channel carries the dash script's eight limit lines (`limit cpu soft N` ...,
// the Linux stage's format) then the preload's `sf-confined/1 admitted`, so collect() and
// parseControl() are shared. There is no status channel on macOS (no stage reaps the
// program): DarwinProcess.status is a stream that ends empty, so parseStatus() finds nothing
// and the exit comes from the ChildProcess (`exit` of the outcome); resource usage is not
// reported (resources: null).
import { spawn as childSpawn } from 'node:child_process';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { collect } from '../collect.js';
import { executorLaunchArgv } from './launch.js';
import { buildSeatbeltProfile, executorProfileRequest } from './profile.js';
import { instantiateDarwinPreload, preloadImportUrl } from './profile-identity.js';

/**
 * Adapts a ChildProcess to what lib/collect.js collect() uses of lib/launch.js's
 * LauncherProcess: pid, stdout, stderr, control, status, onExit, kill, writeStdinAndClose,
 * closeStdin, unref, reaped, exit ({ code, signal } with the signal's name).
 */
export class DarwinProcess {
  #child;
  #callbacks = [];

  constructor(child) {
    this.#child = child;
    this.pid = child.pid;
    this.stdout = child.stdio[1];
    this.stderr = child.stdio[2];
    this.control = child.stdio[3];
    // No status channel on macOS: a stream that ends empty (parseStatus finds nothing).
    this.status = new PassThrough();
    this.status.end();
    this.reaped = false;
    this.exit = null;
    // Spawn failures are detected synchronously (pid undefined); an EPIPE on stdin means the
    // reader is gone, which writeStdinAndClose reports. Neither may crash the host.
    child.on('error', () => {});
    child.stdio[0]?.on('error', () => {});
    child.once('exit', (code, signal) => {
      this.reaped = true;
      this.exit = Object.freeze({ code, signal });
      for (const cb of this.#callbacks.splice(0)) cb(this.exit);
    });
  }

  /** Calls cb({ code, signal }) once the process was reaped (node emitted 'exit'). */
  onExit(cb) {
    if (this.reaped) queueMicrotask(() => cb(this.exit));
    else this.#callbacks.push(cb);
  }

  /**
   * SIGKILL through the live ChildProcess, only while it is unreaped (exitCode and
   * signalCode both null); false otherwise. The pid is never a target after reaping, and
   * process.kill is never used.
   */
  kill() {
    const c = this.#child;
    if (this.reaped || c.exitCode !== null || c.signalCode !== null) return false;
    return c.kill('SIGKILL') === true;
  }

  /** Writes bytes to the program's stdin and closes it (at most once). */
  writeStdinAndClose(bytes) {
    const stdin = this.#child.stdio[0];
    if (!stdin || stdin.destroyed || stdin.writableEnded) return false;
    let ok = true;
    try {
      if (bytes && bytes.length) stdin.write(bytes);
    } catch {
      ok = false;
    }
    this.closeStdin();
    return ok;
  }

  closeStdin() {
    const stdin = this.#child.stdio[0];
    if (!stdin || stdin.destroyed || stdin.writableEnded) return;
    try {
      stdin.end();
    } catch {
      // already gone
    }
  }

  /** An abandoned process (unresolved) stops keeping the event loop alive. */
  unref() {
    this.#child.unref();
    for (const s of [this.stdout, this.stderr, this.control, this.#child.stdio[0]]) s?.unref?.();
  }
}

/**
 * The Seatbelt launch of one run, built without side effects: { ok: true, file, argv, cwd,
 * text, params, instantiated, preload } or { ok: false, reason } when the profile builder
 * refuses. `runtime` is the RuntimeIdentity of lib/darwin/runtime.js.
 */
export function planDarwinLaunch({ request, slot, runtime, profile, buildProfile = buildSeatbeltProfile }) {
  const nodePath = runtime.node.path;
  const libraries = runtime.files.filter((f) => f.role === 'library').map((f) => ({ path: f.path, role: 'library' }));
  const closure = { ok: true, executable: nodePath, images: libraries, aliases: runtime.aliases };
  const built = buildProfile(
    executorProfileRequest({ closure, program: path.join(slot, 'program'), input: path.join(slot, 'input') }),
  );
  if (!built.ok) return Object.freeze({ ok: false, reason: `seatbelt profile refused: ${built.reason}` });
  const home = path.join(slot, 'home');
  const preload = instantiateDarwinPreload(profile.parts.preload, path.join(slot, 'canary', 'canary'));
  const { file, argv } = executorLaunchArgv({
    profile: built,
    exec: nodePath,
    args: [
      '--import',
      preloadImportUrl(preload),
      path.join(slot, 'program', request.program.entry),
      ...request.program.args,
    ],
    env: { LC_ALL: 'C', TZ: 'UTC', HOME: home, TMPDIR: home, OPENSSL_CONF: '/dev/null' },
    cpuSeconds: request.cpuSeconds,
    maxDescriptors: request.maxDescriptors,
  });
  return Object.freeze({
    ok: true,
    file,
    argv,
    cwd: path.join(slot, 'input'),
    text: built.text,
    params: built.params,
    instantiated: built.instantiated,
    preload,
  });
}

function notStarted(reason, message, instantiated = null) {
  return Object.freeze({ started: false, reason, message, instantiated });
}

/**
 * Runs one admitted request on macOS. See the report / README for the contract; in short:
 *
 * context = {
 *   request,   the validated request (lib/validate.js validateRunRequest)
 *   slot,      the claimed, materialised namespace directory (real path); it must hold
 *              program/, input/, home/ and canary/canary (launch/ is not used: the preload
 *              is a data: URL)
 *   runtime,   the RuntimeIdentity just verified (verifyRuntimeDarwin(...).identity)
 *   profile,   the active darwin profile { parts, digest } (lib/darwin/profile-identity.js)
 *   signal,    the run's AbortSignal or undefined
 *   verify,    () => ({ ok, reason }): the pre-launch namespace check (namespace.verify of
 *              the manifest); called synchronously immediately before the spawn
 *   hooks?,    { onLaunched?({ pid, profile }), onAdmitted?() }, called synchronously
 *   spawn?,    child_process.spawn (injected by tests)
 *   buildProfile?, lib/darwin/profile.js buildSeatbeltProfile (injected by tests)
 *   patchLaunch?,  test seam: (plan) => plan, applied before the spawn
 * }
 *
 * Resolves to one of
 *   { started: false, reason: 'setup-failed' | 'snapshot-mismatch' | 'aborted', message,
 *     instantiated }  nothing was spawned; the caller decides the namespace's disposition
 *                      (snapshot-mismatch: quarantine; the others: remove);
 *   { started: true, proc, pid, facts, exit, resources: null, instantiated, text }
 *     facts is collect()'s raw facts (statusText is always ''); exit is { code, signal }
 *     of node itself once reaped, else null; pid is diagnostic only.
 * Everything up to and including the spawn is synchronous (no await between verify and
 * spawn, invariant 4).
 */
export function runDarwin(context) {
  const { request, slot, runtime, profile, signal, verify, hooks = {} } = context;
  const spawn = context.spawn ?? childSpawn;
  let plan;
  try {
    plan = planDarwinLaunch({ request, slot, runtime, profile, buildProfile: context.buildProfile });
  } catch (err) {
    return Promise.resolve(notStarted('setup-failed', `launch plan failed: ${err.message}`));
  }
  if (!plan.ok) return Promise.resolve(notStarted('setup-failed', plan.reason));
  if (context.patchLaunch) plan = context.patchLaunch(plan);

  // Invariant 4: verified immediately before the synchronous spawn.
  const verified = verify();
  if (!verified.ok) {
    return Promise.resolve(
      notStarted('snapshot-mismatch', `namespace changed before launch: ${verified.reason}`, plan.instantiated),
    );
  }
  if (signal?.aborted) {
    return Promise.resolve(notStarted('aborted', 'the signal was aborted before launch', plan.instantiated));
  }
  const startedAt = performance.now();
  let child;
  try {
    child = spawn(plan.file, plan.argv.slice(1), {
      argv0: plan.argv[0],
      cwd: plan.cwd,
      env: {},
      stdio: ['pipe', 'pipe', 'pipe', 'pipe'],
      detached: false,
    });
  } catch (err) {
    return Promise.resolve(notStarted('setup-failed', `spawn failed: ${err.message}`, plan.instantiated));
  }
  if (child.pid === undefined) {
    // ENOENT, EACCES...: node reports them asynchronously; nothing runs.
    child.on('error', () => {});
    for (const s of child.stdio ?? []) s?.destroy?.();
    return Promise.resolve(notStarted('setup-failed', `spawn failed: ${plan.file} could not be executed`, plan.instantiated));
  }
  const proc = new DarwinProcess(child);
  hooks.onLaunched?.({ pid: proc.pid, profile: plan.text });
  return collect(proc, {
    request,
    signal,
    startedAt,
    hooks: { onAdmitted: () => hooks.onAdmitted?.() },
  }).then((facts) =>
    Object.freeze({
      started: true,
      proc,
      pid: proc.pid,
      facts,
      exit: proc.reaped ? proc.exit : null,
      resources: null,
      instantiated: plan.instantiated,
      text: plan.text,
    }),
  );
}
