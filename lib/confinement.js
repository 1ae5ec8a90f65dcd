// runConfinedCommand: one command inside the engine's confinement (spec:
// confined-command-runner.md). It adds no confinement logic of its own: the bwrap argv comes from
// lib/bwrap.js (commandArgv, stageArgv), the launch and the process lifecycle from lib/launch.js
// (spawnLauncher: pidfd, reaping, SIGKILL of the bwrap monitor ends the whole pid namespace), the
// posture from lib/posture.js, the exact exit from the stage's status record (lib/collect.js
// parseStatus) and the seccomp policy is native.seccompFilter('command'). A network allowlist is
// lib/egress (grammar, proxy, env, binds, forwarder argv: see the contract in lib/egress/index.js)
// with the confined-forwarder bridge; this module only stages and wires them.
//
// Decisions the spec leaves open (documented in README.md):
// - Output beyond a cap is discarded while the pipe keeps draining; exceeding a cap does not stop
//   the command (`truncated` says it happened).
// - stderrTail is the end of the delivered stderr, at most STDERR_TAIL_BYTES bytes, as UTF-8.
// - stdin is closed: the command reads end-of-file.
// - Core dumps are disabled (RLIMIT_CORE 0). Optional rlimits (cpuSeconds, maxDescriptors,
//   fileSizeBytes in multiples of 512, maxProcesses) are applied soft = hard by the stage, and its
//   measured report is checked against the request; a mismatch ends the tree (SIGKILL).
// - A root caller's command runs as host uid 65534. Its mounts are staged as idmapped clones
//   (host uid 0 <-> 65534) so that it reads and writes root's files as root's and what it creates
//   is root-owned on the host; an rw mount whose directory is not owned by uid 0 cannot work
//   through that map (its owner is unmapped: nothing could be created in it) and is refused with
//   confinement.mount-owner-unmapped. Inside an rw mount, entries owned by other uids are
//   unmapped too: the kernel refuses writes to them (EACCES) whatever their mode; they stay
//   readable through their "other" bits. A filesystem that cannot be idmapped (proc, sysfs...)
//   is refused with confinement.mount-not-idmappable (the launch fails before anything runs).
import { commandLifecycle } from './command-lifecycle.js';
import diagnostics from 'node:diagnostics_channel';
import { constants as fsConstants, accessSync, realpathSync, statSync } from 'node:fs';
import path from 'node:path';
import { commandArgv, stageArgv } from './bwrap.js';
import { parseStatus } from './collect.js';
import { ConfinementError } from './errors.js';
import { defaultForwarderPath, egressBinds, entryKey, FORWARDER_PORT, forwarderArgv, parseAllowlist, startEgress } from './egress/index.js';
import { bwrapPath, stagePath } from './host.js';
import { runCommandDarwin } from './darwin/confinement.js';
import { spawnLauncher, STAGING_DIR } from './launch.js';
import { commandFilter, confinementPosture, existingSystemDirs, stageBind } from './posture.js';
import { signalName } from './signals.js';

export { ConfinementError, FORWARDER_PORT };

/** diagnostics_channel name of the command runner's start-up stages. */
export const COMMAND_CHANNEL = 'confined:command';
/** The start-up stages published on COMMAND_CHANNEL, in order. */
export const COMMAND_STAGES = Object.freeze(['admitted', 'spawned', 'running', 'exited', 'settled']);
/** Default maxStdoutBytes and maxStderrBytes: 1 MiB. */
export const DEFAULT_MAX_OUTPUT_BYTES = 1024 * 1024;
/** Most bytes of stderr kept for `stderrTail`. */
export const STDERR_TAIL_BYTES = 4096;
/** PATH the command gets unless `env` sets one. */
export const DEFAULT_COMMAND_PATH = '/usr/bin:/bin';

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
// The stage takes at most 255 environment entries (native/exe/stage.c), PATH and the six proxy
// variables included.
const MAX_ENV_ENTRIES = 240;
// A root caller's launch stages every mount and the stage (native/spawn.h SPAWN_MAX_MOUNTS 128).
export const MAX_MOUNTS = 100;
// setTimeout's largest delay.
const MAX_WALL_TIMEOUT_MS = 2 ** 31 - 1;
const LIMIT_KEYS = [
  'wallTimeoutMs',
  'maxStdoutBytes',
  'maxStderrBytes',
  'cpuSeconds',
  'maxDescriptors',
  'fileSizeBytes',
  'maxProcesses',
];

const channel = diagnostics.channel(COMMAND_CHANNEL);

function refuse(code, message) {
  return new ConfinementError(code, message);
}

function hasNul(s) {
  return s.includes('\0');
}

function isPlainObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** Shape checks, pure (nothing on disk is read). Returns the normalised options. */
function validateShape(options) {
  if (!isPlainObject(options)) throw refuse('confinement.option-invalid', 'options must be an object');
  const { command } = options;
  if (typeof command !== 'string' || command === '' || hasNul(command))
    throw refuse('confinement.option-invalid', 'command must be a non-empty string without NUL');
  const args = options.args ?? [];
  if (!Array.isArray(args) || !args.every((a) => typeof a === 'string' && !hasNul(a)))
    throw refuse('confinement.option-invalid', 'args must be an array of strings without NUL');

  const mounts = options.mounts ?? [];
  if (!Array.isArray(mounts)) throw refuse('confinement.option-invalid', 'mounts must be an array');
  if (mounts.length > MAX_MOUNTS) throw refuse('confinement.option-invalid', `at most ${MAX_MOUNTS} mounts`);
  const normalMounts = mounts.map((m, i) => {
    if (!isPlainObject(m) || typeof m.path !== 'string' || hasNul(m.path))
      throw refuse('confinement.option-invalid', `mounts[${i}] must be { path, mode }`);
    if (m.mode !== 'ro' && m.mode !== 'rw')
      throw refuse('confinement.option-invalid', `mounts[${i}].mode must be 'ro' or 'rw'`);
    if (!path.isAbsolute(m.path))
      throw refuse('confinement.mount-not-absolute', `mounts[${i}].path ${JSON.stringify(m.path)} is not absolute`);
    return Object.freeze({ path: m.path, mode: m.mode });
  });

  let cwd = options.cwd ?? process.cwd();
  if (typeof cwd !== 'string' || cwd === '' || hasNul(cwd))
    throw refuse('confinement.option-invalid', 'cwd must be a non-empty string without NUL');
  cwd = path.resolve(cwd);

  const env = options.env ?? {};
  if (!isPlainObject(env)) throw refuse('confinement.option-invalid', 'env must be an object');
  const entries = Object.entries(env);
  for (const [name, value] of entries) {
    if (!ENV_NAME.test(name))
      throw refuse('confinement.env-name-invalid', `env name ${JSON.stringify(name)} is not a valid variable name`);
    if (typeof value !== 'string' || hasNul(value))
      throw refuse('confinement.option-invalid', `env.${name} must be a string without NUL`);
  }
  if (entries.length > MAX_ENV_ENTRIES)
    throw refuse('confinement.option-invalid', `env has more than ${MAX_ENV_ENTRIES} entries`);

  const network = options.network ?? 'off';
  let allowlist = null;
  let egress = null;
  if (network !== 'off') {
    if (!isPlainObject(network) || !('allowlist' in network))
      throw refuse('confinement.option-invalid', "network must be 'off' or { allowlist }");
    const { forwarderPath, onDenied, violations } = network;
    if (forwarderPath !== undefined && (typeof forwarderPath !== 'string' || !path.isAbsolute(forwarderPath) || hasNul(forwarderPath)))
      throw refuse('confinement.option-invalid', 'network.forwarderPath must be an absolute path');
    if (onDenied !== undefined && typeof onDenied !== 'function')
      throw refuse('confinement.option-invalid', 'network.onDenied must be a function');
    if (violations !== undefined && typeof violations !== 'function')
      throw refuse('confinement.option-invalid', 'network.violations must be a function');
    // lib/egress/allowlist.js: throws ConfinementError proxy.job-allowlist.<reason>.
    allowlist = parseAllowlist(network.allowlist);
    egress = { forwarderPath: forwarderPath ?? null, onDenied, violations };
  }

  const limits = options.limits ?? {};
  if (!isPlainObject(limits)) throw refuse('confinement.option-invalid', 'limits must be an object');
  for (const key of Object.keys(limits))
    if (!LIMIT_KEYS.includes(key)) throw refuse('confinement.limit-invalid', `limits.${key} is not a known limit`);
  for (const key of LIMIT_KEYS) {
    const v = limits[key];
    if (v === undefined) continue;
    if (!Number.isSafeInteger(v) || v <= 0)
      throw refuse('confinement.limit-invalid', `limits.${key} must be a positive integer`);
  }
  if (limits.wallTimeoutMs !== undefined && limits.wallTimeoutMs > MAX_WALL_TIMEOUT_MS)
    throw refuse('confinement.limit-invalid', `limits.wallTimeoutMs must be at most ${MAX_WALL_TIMEOUT_MS}`);
  if (limits.fileSizeBytes !== undefined && limits.fileSizeBytes % 512 !== 0)
    throw refuse('confinement.limit-invalid', 'limits.fileSizeBytes must be a multiple of 512');
  const applied = Object.freeze({
    wallTimeoutMs: limits.wallTimeoutMs ?? null,
    maxStdoutBytes: limits.maxStdoutBytes ?? DEFAULT_MAX_OUTPUT_BYTES,
    maxStderrBytes: limits.maxStderrBytes ?? DEFAULT_MAX_OUTPUT_BYTES,
    cpuSeconds: limits.cpuSeconds ?? null,
    maxDescriptors: limits.maxDescriptors ?? null,
    fileSizeBytes: limits.fileSizeBytes ?? null,
    maxProcesses: limits.maxProcesses ?? null,
  });

  const { signal, securityEventEmitter, recordAdmission } = options;
  if (signal !== undefined && !(signal instanceof AbortSignal))
    throw refuse('confinement.option-invalid', 'signal must be an AbortSignal');
  if (securityEventEmitter !== undefined && (securityEventEmitter === null || typeof securityEventEmitter.emit !== 'function'))
    throw refuse('confinement.option-invalid', 'securityEventEmitter must have an emit method');
  if (recordAdmission !== undefined && typeof recordAdmission !== 'function')
    throw refuse('confinement.option-invalid', 'recordAdmission must be a function');

  return {
    command,
    args: Object.freeze([...args]),
    mounts: Object.freeze(normalMounts),
    cwd,
    env: { ...env },
    network: allowlist === null ? 'off' : 'allowlist',
    allowlist,
    egress,
    limits: applied,
    signal,
    securityEventEmitter,
    recordAdmission,
  };
}

function isInside(child, parent) {
  return child === parent || parent === '/' || child.startsWith(parent + '/');
}

function executableFile(p) {
  try {
    if (!statSync(p).isFile()) return false;
    accessSync(p, fsConstants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** Checks against the host (only when confined). Returns { file, mountsInfo }. */
function validateHost(opts, asRoot) {
  const mountsInfo = opts.mounts.map((m, i) => {
    let real;
    try {
      real = realpathSync(m.path);
    } catch (err) {
      throw refuse('confinement.mount-missing', `mounts[${i}].path ${m.path} cannot be resolved: ${err.code ?? err.message}`);
    }
    if (real !== m.path)
      throw refuse('confinement.mount-not-canonical', `mounts[${i}].path ${m.path} is not canonical (it resolves to ${real})`);
    let st;
    try {
      st = statSync(m.path);
    } catch (err) {
      throw refuse('confinement.mount-missing', `mounts[${i}].path ${m.path} cannot be examined: ${err.code ?? err.message}`);
    }
    if (!st.isDirectory() && !st.isFile())
      throw refuse('confinement.mount-missing', `mounts[${i}].path ${m.path} is neither a directory nor a regular file`);
    if (asRoot && m.mode === 'rw' && st.uid !== 0)
      throw refuse(
        'confinement.mount-owner-unmapped',
        `mounts[${i}].path ${m.path} is owned by uid ${st.uid}: a root caller's command runs as uid 65534 through an idmap of uid 0 only, so it could not write there`,
      );
    return { isFile: st.isFile() };
  });
  if (!opts.mounts.some((m) => isInside(opts.cwd, m.path)))
    throw refuse('confinement.cwd-not-mounted', `cwd ${opts.cwd} is not inside any mount`);

  let file;
  if (opts.command.includes('/')) {
    if (!path.isAbsolute(opts.command))
      throw refuse('confinement.command-not-found', `command ${opts.command} is neither absolute nor a bare name`);
    file = path.normalize(opts.command);
    if (!executableFile(file)) throw refuse('confinement.command-not-found', `command ${file} is not an executable file`);
  } else {
    file = DEFAULT_COMMAND_PATH.split(':')
      .map((d) => path.join(d, opts.command))
      .find(executableFile);
    if (!file) throw refuse('confinement.command-not-found', `command ${opts.command} is not on ${DEFAULT_COMMAND_PATH}`);
  }
  let forwarder = null;
  if (opts.egress) {
    forwarder = opts.egress.forwarderPath ?? defaultForwarderPath();
    try {
      forwarder = realpathSync(forwarder);
    } catch {
      throw refuse('confinement.forwarder-not-found', `the forwarder bridge ${forwarder} does not exist`);
    }
    if (!executableFile(forwarder))
      throw refuse('confinement.forwarder-not-found', `the forwarder bridge ${forwarder} is not an executable file`);
  }
  const visible = [...existingSystemDirs(), ...opts.mounts.map((m) => m.path)];
  if (!visible.some((d) => isInside(file, d)))
    throw refuse('confinement.command-not-mounted', `command ${file} is not inside a system directory or a mount`);
  return { file, mountsInfo, forwarder };
}

function observe(opts, fn) {
  try {
    fn();
  } catch {
    // Observation only: an observer's failure changes nothing about the launch.
  }
}

function admit(opts, verdict, reasons, posture) {
  const at = new Date().toISOString();
  const event = Object.freeze({
    type: 'sandbox:admission',
    verdict,
    reasons: Object.freeze([...reasons]),
    posture,
    command: opts.command,
    at,
  });
  if (opts.securityEventEmitter) observe(opts, () => opts.securityEventEmitter.emit('sandbox:admission', event));
  if (opts.recordAdmission) {
    const record = Object.freeze({
      verdict,
      reasons: event.reasons,
      posture,
      command: opts.command,
      args: opts.args,
      cwd: opts.cwd,
      mounts: opts.mounts,
      envNames: Object.freeze(Object.keys(opts.env).sort()),
      network: opts.network,
      allowlist: Object.freeze(opts.allowlist ? opts.allowlist.map((e) => entryKey(e.host, e.port)) : []),
      limits: opts.limits,
      at,
    });
    observe(opts, () => opts.recordAdmission(record));
  }
}

/**
 * Runs one command inside the engine's confinement. Rejects with ConfinementError before
 * anything starts; otherwise resolves to the handle.
 */
export async function runConfinedCommand(options) {
  const opts = validateShape(options);
  const refused = (code, message, posture) => {
    admit(opts, 'refused', [code], posture);
    return refuse(code, message);
  };
  if (opts.signal?.aborted) throw refuse('confinement.aborted', 'the signal was already aborted');
  // macOS: the Seatbelt backend (lib/darwin/confinement.js) with its own posture. It refuses an
  // allowlist, since the egress proxy here listens on a Unix socket that Seatbelt's one-port
  // network rule cannot reach (confinement.allowlist-not-supported).
  if (process.platform === 'darwin')
    return runCommandDarwin(opts, { admit: (verdict, reasons, p) => admit(opts, verdict, reasons, p) });
  const posture = await confinementPosture();
  if (opts.network === 'allowlist' && !posture.enforced)
    throw refused('confinement.allowlist-requires-confinement', `an allowlist needs confinement: ${posture.reason}`, posture);
  if (!posture.enforced) throw refused('confinement.refused', posture.reason, posture);
  const asRoot = process.geteuid() === 0;
  let host;
  try {
    host = validateHost(opts, asRoot);
  } catch (err) {
    if (err instanceof ConfinementError) admit(opts, 'refused', [err.code], posture);
    throw err;
  }
  // The egress proxy (lib/egress): listening before anything is spawned; closed when the run
  // settles, whatever ended it, or here when the run does not start.
  let egress = null;
  if (opts.egress) {
    egress = startEgress({
      allowlist: opts.allowlist,
      command: opts.command,
      onDenied: opts.egress.onDenied,
      violations: opts.egress.violations,
      securityEventEmitter: opts.securityEventEmitter,
    });
    try {
      await egress.ready;
    } catch (err) {
      await egress.close();
      // startEgress rejects ready with ConfinementError confinement.proxy-not-ready only.
      admit(opts, 'refused', [err.code], posture);
      throw err;
    }
  }
  if (opts.signal?.aborted) {
    await egress?.close();
    throw refused('confinement.aborted', 'the signal was aborted before launch', posture);
  }
  admit(opts, 'admitted', [], posture);
  try {
    return launch(opts, host, posture, asRoot, egress);
  } catch (err) {
    await egress?.close();
    throw err;
  }
}

function launchPlan(opts, host, asRoot, egress) {
  const stage = stagePath();
  const stageMounts = [];
  const binds = opts.mounts.map((m, i) => {
    if (!asRoot) return { source: m.path, target: m.path, mode: m.mode };
    const staged = `${STAGING_DIR}/m${i}`;
    stageMounts.push({
      source: m.path,
      target: staged,
      readonly: m.mode === 'ro',
      noexec: false,
      isFile: host.mountsInfo[i].isFile,
    });
    return { source: staged, target: m.path, mode: m.mode };
  });
  const stageFile = stageBind(stage, asRoot);
  if (stageFile.mount) stageMounts.push(stageFile.mount);
  const env = { ...opts.env };
  if (!Object.hasOwn(env, 'PATH')) env.PATH = DEFAULT_COMMAND_PATH;
  let file = host.file;
  let args = opts.args;
  if (egress) {
    // The proxy's socket directory and the forwarder, each at its host path (egressBinds). A root
    // caller's launcher runs as 65534 and cannot reach them (the directory is 0700 root, under
    // the /tmp the staging tmpfs hides), so both are staged as idmapped clones (host uid 0 ->
    // 65534): the command sees the directory and the 0600 socket as its own, as it sees root's
    // other mounts. The forwarder alone may be executed.
    for (const [j, b] of egressBinds(egress.socketDir, host.forwarder).entries()) {
      if (!asRoot) {
        binds.push(b);
        continue;
      }
      const staged = `${STAGING_DIR}/e${j}`;
      const isForwarder = b.source === host.forwarder;
      stageMounts.push({ source: b.source, target: staged, readonly: b.mode === 'ro', noexec: !isForwarder, isFile: isForwarder });
      binds.push({ source: staged, target: b.target, mode: b.mode });
    }
    // The proxy variables point at the forwarder; they override the caller's env.
    Object.assign(env, egress.env);
    // The stage execs the forwarder, which listens, forks the command and exits with its exact
    // status (or its signal), so the stage's record is the command's.
    const [forwarder, ...prefix] = forwarderArgv(host.forwarder, egress.port, egress.socketPath);
    file = forwarder;
    args = [...prefix, host.file, ...opts.args];
  }
  const l = opts.limits;
  const bwrap = bwrapPath();
  const argv = commandArgv({
    bwrap,
    systemDirs: existingSystemDirs(),
    mounts: binds,
    stageFile: stageFile.bind,
    cwd: opts.cwd,
    stage: stageArgv(stage, {
      limits: {
        cpuSeconds: l.cpuSeconds,
        descriptors: l.maxDescriptors,
        coreBlocks: 0,
        fileBlocks: l.fileSizeBytes === null ? null : l.fileSizeBytes / 512,
        processes: l.maxProcesses,
      },
      env,
      file,
      args,
    }),
  });
  return {
    file: bwrap,
    argv,
    mounts: stageMounts,
    staging: stageMounts.length > 0 && asRoot ? STAGING_DIR : null,
    filter: commandFilter(),
  };
}

/** True when the stage's measured limits are what was asked for (unset ones are not checked). */
function limitsMatch(measured, l) {
  const eq = (pair, v) => pair !== undefined && pair.soft === v && pair.hard === v;
  if (!eq(measured.coreBlocks, 0)) return false;
  if (l.cpuSeconds !== null && !eq(measured.cpuSeconds, l.cpuSeconds)) return false;
  if (l.maxDescriptors !== null && !eq(measured.descriptors, l.maxDescriptors)) return false;
  if (l.fileSizeBytes !== null && !eq(measured.fileBlocks, l.fileSizeBytes / 512)) return false;
  if (l.maxProcesses !== null ? !eq(measured.processes, l.maxProcesses) : measured.processes !== undefined)
    return false;
  return true;
}

function launch(opts, host, posture, asRoot, egress) {
  const plan = launchPlan(opts, host, asRoot, egress);
  return commandLifecycle(opts, posture, {
    channel,
    stderrTailBytes: STDERR_TAIL_BYTES,
    limitsMatch,
    spawn: () => launcherProcess(opts, plan, posture, asRoot),
    // The proxy ends with the command, whatever ended it: every connection, the socket and its
    // directory, before wait() resolves.
    beforeResult: egress ? () => egress.close() : null,
  });
}

/** spawnLauncher's process as commandLifecycle's backend (lib/command-lifecycle.js). */
function launcherProcess(opts, plan, posture, asRoot) {
  let proc;
  try {
    proc = spawnLauncher(plan);
  } catch (err) {
    // A root caller's mounts are idmapped clones: a filesystem that does not support idmapped
    // mounts (proc, sysfs, some network or FUSE filesystems) fails the clone's setattr.
    const e =
      asRoot && (err.code === 'setattr' || err.code === 'open_tree')
        ? refuse('confinement.mount-not-idmappable', `a mount cannot be staged as an idmapped clone: ${err.message}`)
        : refuse('confinement.launch-failed', `the launch failed (${err.code ?? 'spawn'}): ${err.message}`);
    admit(opts, 'refused', [e.code], posture);
    throw e;
  }
  proc.closeStdin(); // the command reads end-of-file
  let statusText = '';
  proc.status.on('data', (chunk) => {
    if (statusText.length < 256) statusText += chunk.toString('latin1');
  });
  return {
    pid: proc.pid,
    pipes: { stdout: proc.stdout, stderr: proc.stderr, control: proc.control, status: proc.status },
    get reaped() {
      return proc.reaped;
    },
    // The stage's status record is the command's exit, even before bwrap is reaped.
    exited: () => proc.reaped || statusText.endsWith('\n'),
    // The launcher's death ends every process of the run (its pid namespace), at any moment.
    kill: () => proc.kill(),
    onExit: (cb) => proc.onExit(cb),
    unref: () => proc.unref(),
    exitOf(killSent) {
      const status = parseStatus(statusText);
      if (status) return status.exit;
      // The monitor died by our SIGKILL; pid 1 and every process of the namespace with it.
      if (killSent) return { code: null, signal: 'SIGKILL' };
      // bwrap itself failed before the stage ran: its own status.
      if (proc.exit) {
        return {
          code: proc.exit.code >= 0 ? proc.exit.code : null,
          signal: proc.exit.signal ? signalName(proc.exit.signal) : null,
        };
      }
      return { code: null, signal: null };
    },
  };
}
