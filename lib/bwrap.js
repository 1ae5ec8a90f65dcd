// The one bwrap invocation builder of the Linux backend, used by the executor and the command
// runner. Everything fixed here is part of the profile (lib/profile.js hashes BWRAP_TEMPLATE);
// what varies per run is only paths, and the instantiated argv is hashed per run.
import path from 'node:path';

/**
 * Namespaces and process posture, identical for both APIs:
 * - user, pid, net (only loopback), ipc, uts and cgroup namespaces;
 * - --disable-userns: the sandbox cannot create further user namespaces (seccomp also denies
 *   unshare/clone with namespace flags: two layers);
 * - --die-with-parent: the sandbox dies with the host process (SIGKILL to every process of
 *   the pid namespace, research section 6); --new-session: no terminal injection;
 * - --as-pid-1: our stage is pid 1 and reaps the program itself (exact exit status);
 * - --cap-drop ALL, --clearenv: no capability, no inherited environment.
 */
export const BWRAP_POSTURE = Object.freeze([
  '--unshare-user',
  '--unshare-pid',
  '--unshare-net',
  '--unshare-ipc',
  '--unshare-uts',
  '--unshare-cgroup',
  '--disable-userns',
  '--die-with-parent',
  '--new-session',
  '--as-pid-1',
  '--cap-drop',
  'ALL',
  '--clearenv',
  '--hostname',
  'confined',
]);

/** The executor's template, for the profile digest: posture, then these steps in order. */
export const BWRAP_TEMPLATE = Object.freeze({
  posture: BWRAP_POSTURE,
  executor: Object.freeze([
    'posture',
    '--ro-bind <runtime file or its staged clone> <file> (each file of the closure, /etc/ld.so.cache)',
    '--dir <parent> --symlink <target> <link> (each runtime alias)',
    '--proc /proc',
    '--dev-bind /dev/null /dev/null',
    '--ro-bind <part or its staged clone> <namespace>/<part> (program, input, home: ro, noexec)',
    '--chdir <namespace>/input',
    '--remount-ro /',
    '<stage> <cpu> <nofile> 0 0 - gate <canary> <host bwrap> 5 <environment> -- <node> <entry> <args>',
  ]),
  command: Object.freeze([
    'posture',
    '--ro-bind <system dir> <same> (/usr /bin /sbin /lib /lib64 /etc, those that exist)',
    '--bind|--ro-bind <mount or its staged clone> <same path> (each mount, in order)',
    '--ro-bind <stage or its staged clone> <stage>',
    '--proc /proc',
    '--dev /dev',
    '--remount-ro /dev',
    '--chdir <cwd>',
    '--remount-ro /',
    '<stage> <limits> close <n> <environment> -- <command> <args>',
  ]),
});

/** System directories bound read-only for commands (spec). */
export const SYSTEM_DIRS = Object.freeze(['/usr', '/bin', '/sbin', '/lib', '/lib64', '/etc']);

function limitArg(v) {
  return v === undefined || v === null ? '-' : String(v);
}

/**
 * The stage's own arguments (native/exe/stage.c). `gate` is { canary, hostTool } for the
 * executor's admission gate, or null: the control channel is closed before the exec.
 */
export function stageArgv(stage, { limits, gate = null, env, file, args }) {
  const envList = Object.entries(env).map(([k, v]) => `${k}=${v}`);
  return [
    stage,
    limitArg(limits.cpuSeconds),
    limitArg(limits.descriptors),
    limitArg(limits.coreBlocks),
    limitArg(limits.fileBlocks),
    limitArg(limits.processes),
    ...(gate ? ['gate', gate.canary, gate.hostTool] : ['close']),
    String(envList.length),
    ...envList,
    '--',
    file,
    ...args,
  ];
}

/**
 * Runtime closure binds: every file at its real path (bound from `source`, which is the file
 * itself or its staged clone), every alias recreated as a symlink.
 */
function runtimeArgs(runtime) {
  const out = [];
  for (const f of runtime.files) out.push('--ro-bind', f.source, f.target);
  const dirs = new Set();
  const aliases = [...runtime.aliases].sort((a, b) => a.link.length - b.link.length);
  for (const a of aliases) {
    const parent = path.dirname(a.link);
    if (parent !== '/' && !dirs.has(parent)) {
      dirs.add(parent);
      out.push('--dir', parent);
    }
    out.push('--symlink', a.target, a.link);
  }
  return out;
}

/**
 * The executor's bwrap argv (argv[0] included). `binds` are [{ source, target }] of staged
 * read-only noexec mounts; `stage` the stage argv from stageArgv.
 */
export function executorArgv({ bwrap, runtime, binds, cwd, stage }) {
  return [
    bwrap,
    ...BWRAP_POSTURE,
    ...runtimeArgs(runtime),
    '--proc',
    '/proc',
    '--dev-bind',
    '/dev/null',
    '/dev/null',
    ...binds.flatMap((b) => ['--ro-bind', b.source, b.target]),
    '--chdir',
    cwd,
    '--remount-ro',
    '/',
    ...stage,
  ];
}

/**
 * The command runner's bwrap argv. `mounts` are [{ source, target, mode: 'ro'|'rw' }];
 * `stageFile` is { source, target } of the stage executable (its staged clone for a root caller).
 */
export function commandArgv({ bwrap, systemDirs, mounts, stageFile, cwd, stage }) {
  return [
    bwrap,
    ...BWRAP_POSTURE,
    ...systemDirs.flatMap((d) => ['--ro-bind', d, d]),
    ...mounts.flatMap((m) => [m.mode === 'rw' ? '--bind' : '--ro-bind', m.source, m.target]),
    '--ro-bind',
    stageFile.source,
    stageFile.target,
    '--proc',
    '/proc',
    '--dev',
    '/dev',
    '--remount-ro',
    '/dev',
    '--chdir',
    cwd,
    '--remount-ro',
    '/',
    ...stage,
  ];
}
