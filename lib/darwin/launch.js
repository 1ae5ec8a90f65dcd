// macOS launch: the host tools and the argv of a confined launch. Pure functions (the
// file system is reached through an injected lstat), unit-tested on Linux in
// test/darwin-launch.test.js; the real runs are in test/darwin-backend.test.js.
//
// Executor launch chain (spec "Confined launch"):
//   /bin/dash -c LAUNCH_SCRIPT confined-launch <cpu> <descriptors> \
//     /usr/bin/env -i NAME=value... \
//     /usr/bin/sandbox-exec -p <profile text> -D NAME=value... \
//     <node> <node args...>
// The script text is constant: the limits arrive as positional arguments, never in it.

/** The host tools, by absolute path (part of the profile digest). */
export const TOOL_PATHS = Object.freeze({
  dash: '/bin/dash',
  env: '/usr/bin/env',
  sandboxExec: '/usr/bin/sandbox-exec',
});

/**
 * Sets the four limits (CPU seconds and descriptors soft = hard, core and file size 0),
 * reports them on fd 3 as eight lines `limit <name> <soft|hard> <value>` in the order cpu,
 * descriptors, core, file (exactly the Linux stage's format, so lib/collect.js parseControl
 * reads both) (values in dash units: seconds, descriptors, 512-byte blocks,
 * or 'unlimited'), then replaces itself with the rest of its arguments. Any failure exits
 * 125 (the spec's refusal code) before anything is executed.
 */
export const LAUNCH_SCRIPT = [
  'ulimit -t "$1" && ulimit -n "$2" && ulimit -c 0 && ulimit -f 0 || exit 125',
  'shift 2 || exit 125',
  '{',
  "  printf 'limit cpu soft ' && ulimit -S -t && printf 'limit cpu hard ' && ulimit -H -t &&",
  "  printf 'limit descriptors soft ' && ulimit -S -n && printf 'limit descriptors hard ' && ulimit -H -n &&",
  "  printf 'limit core soft ' && ulimit -S -c && printf 'limit core hard ' && ulimit -H -c &&",
  "  printf 'limit file soft ' && ulimit -S -f && printf 'limit file hard ' && ulimit -H -f",
  '} >&3 || exit 125',
  'exec "$@"',
  'exit 125',
].join('\n');

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const PARAM_NAME = /^[A-Z][A-Z0-9_]*$/;

function directoriesAbove(p) {
  const out = ['/'];
  const parts = p.split('/').filter(Boolean);
  for (let i = 1; i < parts.length; i++) out.push(`/${parts.slice(0, i).join('/')}`);
  return out;
}

/**
 * Checks each tool and every directory above it: a tool must be a regular file (not a
 * symlink), owned by root, not group- or other-writable; each directory a directory (not
 * a symlink), owned by root, not group- or other-writable. `lstat(path)` is fs.lstatSync
 * or a stand-in returning { uid, mode, isFile(), isDirectory(), isSymbolicLink() } and
 * throwing for a missing path. Returns { ok, problems } (problems: one string each).
 */
export function checkTools(lstat, tools = Object.values(TOOL_PATHS)) {
  const problems = [];
  const seen = new Set();
  const check = (p, kind) => {
    if (seen.has(p)) return;
    seen.add(p);
    let st;
    try {
      st = lstat(p);
    } catch (err) {
      problems.push(`${p}: ${err.code ?? err.message}`);
      return;
    }
    if (st.isSymbolicLink()) {
      problems.push(`${p} is a symbolic link`);
      return;
    }
    if (kind === 'file' && !st.isFile()) problems.push(`${p} is not a regular file`);
    if (kind === 'dir' && !st.isDirectory()) problems.push(`${p} is not a directory`);
    if (st.uid !== 0) problems.push(`${p} is owned by uid ${st.uid}, not root`);
    if ((st.mode & 0o022) !== 0) {
      problems.push(`${p} is group- or other-writable (mode ${(st.mode & 0o7777).toString(8)})`);
    }
  };
  for (const tool of tools) {
    if (typeof tool !== 'string' || !tool.startsWith('/')) {
      problems.push(`${String(tool)} is not an absolute path`);
      continue;
    }
    for (const dir of directoriesAbove(tool)) check(dir, 'dir');
    check(tool, 'file');
  }
  return Object.freeze({ ok: problems.length === 0, problems: Object.freeze(problems) });
}

function checkParams(params) {
  if (!Array.isArray(params)) throw new TypeError('params must be an array');
  const out = [];
  for (const p of params) {
    if (!PARAM_NAME.test(p?.name ?? '')) throw new TypeError(`invalid parameter name ${p?.name}`);
    if (typeof p.value !== 'string' || p.value.includes('\0')) {
      throw new TypeError(`parameter ${p.name} must be a string without NUL`);
    }
    out.push('-D', `${p.name}=${p.value}`);
  }
  return out;
}

function envPairs(env) {
  const out = [];
  for (const [k, v] of Object.entries(env)) {
    if (!ENV_NAME.test(k)) throw new TypeError(`invalid environment name ${k}`);
    if (typeof v !== 'string' || v.includes('\0')) {
      throw new TypeError(`environment value of ${k} must be a string without NUL`);
    }
    out.push(`${k}=${v}`);
  }
  return out;
}

function sandboxArgv(profile, exec, args) {
  if (typeof profile?.text !== 'string' || profile.text.includes('\0')) {
    throw new TypeError('profile.text must be a string without NUL');
  }
  if (typeof exec !== 'string' || !exec.startsWith('/')) {
    throw new TypeError('exec must be an absolute path');
  }
  if (!Array.isArray(args) || args.some((a) => typeof a !== 'string' || a.includes('\0'))) {
    throw new TypeError('args must be strings without NUL');
  }
  // exec is absolute, so sandbox-exec cannot read it as an option.
  return [TOOL_PATHS.sandboxExec, '-p', profile.text, ...checkParams(profile.params), exec, ...args];
}

/**
 * The executor's launch: returns { file, argv } for spawn(file, argv.slice(1), { argv0 })
 * style use (argv[0] is file). `profile` is { text, params } from seatbeltProfile();
 * `env` the exact environment of invariant 11; `exec` the pinned node; `args` its
 * arguments (preload and entry). cpuSeconds and maxDescriptors are positive integers.
 */
export function executorLaunchArgv({ profile, exec, args, env, cpuSeconds, maxDescriptors }) {
  for (const [name, v] of [
    ['cpuSeconds', cpuSeconds],
    ['maxDescriptors', maxDescriptors],
  ]) {
    if (!Number.isSafeInteger(v) || v < 1) throw new TypeError(`${name} must be a positive integer`);
  }
  const argv = [
    TOOL_PATHS.dash,
    '-c',
    LAUNCH_SCRIPT,
    'confined-launch',
    String(cpuSeconds),
    String(maxDescriptors),
    TOOL_PATHS.env,
    '-i',
    ...envPairs(env),
    ...sandboxArgv(profile, exec, args),
  ];
  return Object.freeze({ file: TOOL_PATHS.dash, argv: Object.freeze(argv) });
}

/**
 * The command runner's limit stage: CPU seconds, descriptors and file size (512-byte blocks)
 * soft = hard where given ('-' leaves a limit as inherited), core size always 0 (as on
 * Linux: no core dumps); reports the four limits on fd 3 in the Linux stage's format (eight
 * lines `limit <name> <soft|hard> <value>`, lib/collect.js parseLimitReport), closes fd 3 so
 * the command never holds it, then replaces itself with the rest of its arguments. Any
 * failure exits 125 before anything is executed.
 */
export const COMMAND_LAUNCH_SCRIPT = [
  'case "$1" in -) ;; *) ulimit -t "$1" || exit 125 ;; esac',
  'case "$2" in -) ;; *) ulimit -n "$2" || exit 125 ;; esac',
  'ulimit -c 0 || exit 125',
  'case "$3" in -) ;; *) ulimit -f "$3" || exit 125 ;; esac',
  'shift 3 || exit 125',
  '{',
  "  printf 'limit cpu soft ' && ulimit -S -t && printf 'limit cpu hard ' && ulimit -H -t &&",
  "  printf 'limit descriptors soft ' && ulimit -S -n && printf 'limit descriptors hard ' && ulimit -H -n &&",
  "  printf 'limit core soft ' && ulimit -S -c && printf 'limit core hard ' && ulimit -H -c &&",
  "  printf 'limit file soft ' && ulimit -S -f && printf 'limit file hard ' && ulimit -H -f",
  '} >&3 || exit 125',
  'exec 3>&- || exit 125',
  'exec "$@"',
  'exit 125',
].join('\n');

function optionalLimit(name, v) {
  if (v === null || v === undefined) return '-';
  if (!Number.isSafeInteger(v) || v < 1) throw new TypeError(`${name} must be a positive integer or null`);
  return String(v);
}

/**
 * The command runner's launch: the dash limit stage (COMMAND_LAUNCH_SCRIPT), env -i with the
 * command's environment, then sandbox-exec. `limits` = { cpuSeconds, maxDescriptors,
 * fileBlocks }, each a positive integer or null (not set). The caller maps fd 3 to a pipe for
 * the limit report and spawns it in a new process group (detached) so that the whole group
 * can be signalled; see README for what macOS cannot guarantee about a tree without a pid
 * namespace.
 */
export function commandLaunchArgv({ profile, command, args, env, limits = {} }) {
  const argv = [
    TOOL_PATHS.dash,
    '-c',
    COMMAND_LAUNCH_SCRIPT,
    'confined-command',
    optionalLimit('cpuSeconds', limits.cpuSeconds),
    optionalLimit('maxDescriptors', limits.maxDescriptors),
    optionalLimit('fileBlocks', limits.fileBlocks),
    TOOL_PATHS.env,
    '-i',
    ...envPairs(env),
    ...sandboxArgv(profile, command, args),
  ];
  return Object.freeze({ file: TOOL_PATHS.dash, argv: Object.freeze(argv) });
}
