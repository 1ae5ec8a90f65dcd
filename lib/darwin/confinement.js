// runConfinedCommand on macOS: the command runs under sandbox-exec with the Seatbelt command
// policy (lib/darwin/command.js maps the options, native/profile_seatbelt.c builds the text),
// launched as /bin/dash -c COMMAND_LAUNCH_SCRIPT confined-command <cpu|-> <fds|-> <blocks|->
// /usr/bin/env -i <env> /usr/bin/sandbox-exec -p <profile> -D... <command> <args>, with
// env {}, stdio [ignore, pipe, pipe, pipe] (fd 3: the limit report). dash, env and
// sandbox-exec exec in place, so the ChildProcess is the command itself and its exit status
// is exact. lib/confinement.js validates the options (its validateShape) and calls
// runCommandDarwin with them; the handle and the result have the shapes of
// types/confinement.d.ts.
//
// How the tree is ended (there is no pid namespace on macOS): the command is spawned
// detached, i.e. in a new session and process group whose id is its pid, and a stop, a
// timeout or an abort sends SIGKILL to that process group, only while the command (the
// group's leader) is unreaped, so the group id cannot have been reused. What escapes:
//   - any descendant that left the group: setsid() (a new session) or setpgid() into
//     another group; Seatbelt has no operation that forbids either;
//   - descendants still running after the command itself exited normally: the leader is
//     reaped by then, so the group is no longer signalled (its id could be reused once the
//     group is empty, and whether it is cannot be known without a race). Their output
//     pipes keep the handle from seeing 'close'; it settles CLOSE_GRACE_MS after the exit.
// Linux ends all of these with the pid namespace.
//
// Limits: a dash stage (lib/darwin/launch.js COMMAND_LAUNCH_SCRIPT) sets cpuSeconds,
// maxDescriptors and fileSizeBytes soft = hard where given and core size 0 always, and
// reports them on fd 3 in the Linux stage's format; the report is checked as on Linux
// (a mismatch ends the group with SIGKILL) and fd 3 is closed before the command runs.
//
// Refused on macOS with a precise reason (confinement.refused) rather than half-applied:
//   - a root caller: nothing drops privileges before sandbox-exec (Linux runs uid 65534);
//   - limits.maxProcesses: RLIMIT_NPROC on macOS counts every process of the user, not of
//     the command, so it cannot bound the command's tree;
//   - network { allowlist } without the egress proxy's loopback port (context.proxyPort):
//     confinement.allowlist-not-supported, as on Linux.
import { commandLifecycle } from '../command-lifecycle.js';
import { spawn as childSpawn } from 'node:child_process';
import diagnostics from 'node:diagnostics_channel';
import fs from 'node:fs';
import path from 'node:path';
import { ConfinementError } from '../errors.js';
import { commandSeatbeltProfile } from './command.js';
import { TOOL_PATHS, checkTools, commandLaunchArgv } from './launch.js';

/** Same values as lib/confinement.js (tested equal); not imported, to keep that module free
 * to import this one. */
export const DARWIN_COMMAND_CHANNEL = 'confined:command';
export const DARWIN_DEFAULT_COMMAND_PATH = '/usr/bin:/bin';
export const DARWIN_STDERR_TAIL_BYTES = 4096;

/** Directories whose programs the command profile lets a command read and execute. */
export const DARWIN_COMMAND_SYSTEM_DIRS = Object.freeze(['/usr', '/bin', '/sbin']);

const channel = diagnostics.channel(DARWIN_COMMAND_CHANNEL);

function refuse(code, message) {
  return new ConfinementError(code, message);
}

function realDeps() {
  return {
    platform: process.platform,
    geteuid: () => process.geteuid(),
    lstat: fs.lstatSync,
    stat: fs.statSync,
    realpath: fs.realpathSync.native,
    access: fs.accessSync,
    spawn: childSpawn,
    killGroup: (pgid, sig) => process.kill(-pgid, sig),
  };
}

/**
 * The command runner's posture on macOS: enforced when env and sandbox-exec pass checkTools
 * (root-owned regular files, not group/other-writable, directories above included).
 */
export function darwinCommandPosture(deps = {}) {
  const d = { ...realDeps(), ...deps };
  if (d.platform !== 'darwin') {
    return Object.freeze({ enforced: false, backend: 'seatbelt', reason: `platform ${d.platform} is not darwin` });
  }
  const tools = checkTools(d.lstat, [TOOL_PATHS.env, TOOL_PATHS.sandboxExec]);
  if (!tools.ok) {
    return Object.freeze({ enforced: false, backend: 'seatbelt', reason: `host tools refused: ${tools.problems.join('; ')}` });
  }
  return Object.freeze({ enforced: true, backend: 'seatbelt', reason: null });
}

function isInside(child, parent) {
  return child === parent || parent === '/' || child.startsWith(parent + '/');
}

function executableFile(d, p) {
  try {
    if (!d.stat(p).isFile()) return false;
    d.access(p, fs.constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** Host checks: canonical existing mounts, cwd inside one, the command found and visible. */
function validateHostDarwin(opts, d) {
  opts.mounts.forEach((m, i) => {
    let real;
    try {
      real = d.realpath(m.path);
    } catch (err) {
      throw refuse('confinement.mount-missing', `mounts[${i}].path ${m.path} cannot be resolved: ${err.code ?? err.message}`);
    }
    if (real !== m.path) {
      throw refuse('confinement.mount-not-canonical', `mounts[${i}].path ${m.path} is not canonical (it resolves to ${real})`);
    }
    const st = d.stat(m.path);
    if (!st.isDirectory() && !st.isFile()) {
      throw refuse('confinement.mount-missing', `mounts[${i}].path ${m.path} is neither a directory nor a regular file`);
    }
  });
  if (!opts.mounts.some((m) => isInside(opts.cwd, m.path))) {
    throw refuse('confinement.cwd-not-mounted', `cwd ${opts.cwd} is not inside any mount`);
  }
  let file;
  if (opts.command.includes('/')) {
    if (!path.isAbsolute(opts.command)) {
      throw refuse('confinement.command-not-found', `command ${opts.command} is neither absolute nor a bare name`);
    }
    file = path.normalize(opts.command);
    if (!executableFile(d, file)) throw refuse('confinement.command-not-found', `command ${file} is not an executable file`);
  } else {
    file = DARWIN_DEFAULT_COMMAND_PATH.split(':')
      .map((dir) => path.join(dir, opts.command))
      .find((p) => executableFile(d, p));
    if (!file) {
      throw refuse('confinement.command-not-found', `command ${opts.command} is not on ${DARWIN_DEFAULT_COMMAND_PATH}`);
    }
  }
  const visible = [...DARWIN_COMMAND_SYSTEM_DIRS, ...opts.mounts.map((m) => m.path)];
  if (!visible.some((dir) => isInside(file, dir))) {
    throw refuse('confinement.command-not-mounted', `command ${file} is not inside a system directory or a mount`);
  }
  return file;
}

/** The limit macOS cannot apply: its reason, or null. */
function limitRefusal(limits) {
  if (limits.maxProcesses !== null) {
    return 'limits.maxProcesses cannot be enforced on macOS: RLIMIT_NPROC counts every process of the user, not of the command';
  }
  return null;
}

/** True when the stage's measured limits are what was asked for (unset ones are not checked),
 * as on Linux; a processes report is never expected on macOS. */
export function darwinCommandLimitsMatch(measured, l) {
  const eq = (pair, v) => pair !== undefined && pair.soft === v && pair.hard === v;
  if (!eq(measured.coreBlocks, 0)) return false;
  if (l.cpuSeconds !== null && !eq(measured.cpuSeconds, l.cpuSeconds)) return false;
  if (l.maxDescriptors !== null && !eq(measured.descriptors, l.maxDescriptors)) return false;
  if (l.fileSizeBytes !== null && !eq(measured.fileBlocks, l.fileSizeBytes / 512)) return false;
  return measured.processes === undefined;
}

/**
 * runConfinedCommand on macOS. `options` is the normalised options object of lib/confinement.js
 * validateShape: { command, args, mounts, cwd (absolute), env, network: 'off' | 'allowlist',
 * allowlist, limits (every key, null where unset), signal, securityEventEmitter,
 * recordAdmission }. `context`:
 *   admit(verdict, reasons, posture)  required: lib/confinement.js's admit bound to options
 *                                     (the sandbox:admission event and recordAdmission)
 *   proxyPort?  the egress proxy's loopback TCP port (required with an allowlist)
 *   proxyEnv?   environment entries that point the command at the proxy (added to env)
 *   posture?    overrides darwinCommandPosture() (tests)
 *   platform?, geteuid?, lstat?, stat?, realpath?, access?, spawn?, killGroup?  injections
 *
 * Rejects with ConfinementError before anything starts; resolves to the handle
 * { pid, stdout, stderr, confined: true, posture, wait(), stop() } (frozen).
 */
export async function runCommandDarwin(options, context = {}) {
  const opts = options;
  const d = { ...realDeps(), ...context };
  const admit = context.admit ?? (() => {});
  const refused = (code, message, posture) => {
    admit('refused', [code], posture);
    return refuse(code, message);
  };
  if (opts.signal?.aborted) throw refuse('confinement.aborted', 'the signal was already aborted');
  const posture = context.posture ?? darwinCommandPosture(d);
  if (opts.network === 'allowlist' && !posture.enforced) {
    throw refused('confinement.allowlist-requires-confinement', `an allowlist needs confinement: ${posture.reason}`, posture);
  }
  if (!posture.enforced) throw refused('confinement.refused', posture.reason, posture);
  if (d.geteuid() === 0) {
    throw refused(
      'confinement.refused',
      'a root caller is refused on macOS: nothing drops privileges before sandbox-exec (run as an unprivileged user)',
      posture,
    );
  }
  const limitProblem = limitRefusal(opts.limits);
  if (limitProblem) throw refused('confinement.refused', limitProblem, posture);
  const proxyPort = opts.network === 'allowlist' ? context.proxyPort : 0;
  if (opts.network === 'allowlist' && !(Number.isInteger(proxyPort) && proxyPort > 0)) {
    throw refused(
      'confinement.allowlist-not-supported',
      'a network allowlist on macOS needs the egress proxy listening on a loopback port; none was given',
      posture,
    );
  }
  let file;
  try {
    file = validateHostDarwin(opts, d);
  } catch (err) {
    if (err instanceof ConfinementError) admit('refused', [err.code], posture);
    throw err;
  }
  const plan = commandSeatbeltProfile({ mounts: opts.mounts, network: opts.network === 'allowlist' ? { allowlist: opts.allowlist } : 'off' }, proxyPort);
  if (!plan.ok) throw refused(plan.code, plan.reason, posture);
  const env = { ...opts.env, ...(opts.network === 'allowlist' ? context.proxyEnv ?? {} : {}) };
  if (!('PATH' in env)) env.PATH = DARWIN_DEFAULT_COMMAND_PATH;
  const l = opts.limits;
  const launchArgv = commandLaunchArgv({
    profile: plan.profile,
    command: file,
    args: [...opts.args],
    env,
    limits: {
      cpuSeconds: l.cpuSeconds,
      maxDescriptors: l.maxDescriptors,
      fileBlocks: l.fileSizeBytes === null ? null : l.fileSizeBytes / 512,
    },
  });
  if (opts.signal?.aborted) throw refused('confinement.aborted', 'the signal was aborted before launch', posture);
  admit('admitted', [], posture);
  return launchDarwin(opts, launchArgv, posture, d, admit);
}

function launchDarwin(opts, launchArgv, posture, d, admit) {
  return commandLifecycle(opts, posture, {
    channel,
    stderrTailBytes: DARWIN_STDERR_TAIL_BYTES,
    limitsMatch: darwinCommandLimitsMatch,
    spawn: () => darwinProcess(opts, launchArgv, posture, d, admit),
  });
}

/** The Seatbelt launch as commandLifecycle's backend (lib/command-lifecycle.js). */
function darwinProcess(opts, launchArgv, posture, d, admit) {
  const fail = (message) => {
    const e = refuse('confinement.launch-failed', message);
    admit('refused', [e.code], posture);
    return e;
  };
  let child;
  try {
    child = d.spawn(launchArgv.file, launchArgv.argv.slice(1), {
      argv0: launchArgv.argv[0],
      cwd: opts.cwd,
      env: {},
      stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
      // A new session and process group (setsid): the group is what a stop signals.
      detached: true,
    });
  } catch (err) {
    throw fail(`the launch failed (${err.code ?? 'spawn'}): ${err.message}`);
  }
  child.on('error', () => {});
  if (child.pid === undefined) {
    for (const s of child.stdio ?? []) s?.destroy?.();
    throw fail(`the launch failed: ${launchArgv.file} could not be executed`);
  }
  let reaped = false;
  child.once('exit', () => {
    reaped = true;
  });
  return {
    pid: child.pid,
    pipes: { stdout: child.stdio[1], stderr: child.stdio[2], control: child.stdio[3] },
    get reaped() {
      return reaped;
    },
    exited: () => reaped,
    // SIGKILL to the process group, only while its leader (the command) is unreaped.
    kill() {
      if (reaped || child.exitCode !== null || child.signalCode !== null) return false;
      try {
        d.killGroup(child.pid, 'SIGKILL');
        return true;
      } catch {
        return false;
      }
    },
    onExit: (cb) => child.once('exit', () => cb()),
    unref() {
      child.unref();
      for (const s of child.stdio.slice(1)) s?.unref?.();
    },
    exitOf: (killSent) =>
      reaped ? { code: child.exitCode, signal: child.signalCode } : { code: null, signal: killSent ? 'SIGKILL' : null },
  };
}
