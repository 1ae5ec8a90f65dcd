// `confined doctor`: one line per host requirement, pass or fail, and how to fix a failure.
//
// It reports on the bwrap the library itself uses (lib/host.js decides the path); --bwrap PATH
// or CONFINED_BWRAP point the bwrap lines at another binary, for diagnosis only: the library
// and the end-to-end probe still use their own.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, realpathSync, rmdirSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { parseArgs, UsageError } from './args.js';

export const DOCTOR_HELP = `Usage: confined doctor [--bwrap PATH]

Checks what confined needs on this host, one line per requirement:
  PASS <what>: <detail>
  FAIL <what>: <detail>
       fix: <how>
  INFO <what>: <detail>       (not a requirement)
and ends with a real confined run of a hello program.

Options:
  --bwrap PATH    examine this bwrap instead of the one the library uses (also the
                  environment variable CONFINED_BWRAP). Diagnosis only: confined itself always
                  uses ${'/usr/bin/bwrap or /bin/bwrap'}.
  -h, --help      this help

Exit status: 0 when every requirement passes, 1 otherwise, 64 for a usage error.
`;

const SPEC = { bwrap: { value: true }, help: { value: false } };

/** Bubblewrap flags the backend passes, read from its own argv template (lib/bwrap.js). */
async function requiredFlags() {
  const { BWRAP_POSTURE, BWRAP_TEMPLATE } = await import('../bwrap.js');
  // Only what precedes <stage> is bwrap's: the rest is the stage's and node's argv.
  const text = [...BWRAP_POSTURE, ...BWRAP_TEMPLATE.executor, ...BWRAP_TEMPLATE.command]
    .map((part) => part.split('<stage>')[0])
    .join(' ');
  return [...new Set(text.match(/--[a-z][a-z0-9-]*/g))].sort();
}

function kernelVersion() {
  const m = /^(\d+)\.(\d+)/.exec(os.release());
  return m ? [Number(m[1]), Number(m[2])] : [0, 0];
}

function atLeast([a, b], [c, d]) {
  return a > c || (a === c && b >= d);
}

function readText(file) {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return null;
  }
}

const INSTALL_BWRAP =
  'install bubblewrap 0.8 or newer as root-owned /usr/bin/bwrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)';

/**
 * Runs every check. Returns an array of `{ state: 'pass'|'fail'|'info', what, detail, fix }`.
 * @param {{ bwrap?: string }} options
 */
export async function diagnose({ bwrap: override } = {}) {
  const lines = [];
  const pass = (what, detail) => lines.push({ state: 'pass', what, detail, fix: null });
  const fail = (what, detail, fix) => lines.push({ state: 'fail', what, detail, fix });
  const info = (what, detail) => lines.push({ state: 'info', what, detail, fix: null });

  // Kernel and architecture.
  const platformOk = process.platform === 'linux' && (process.arch === 'x64' || process.arch === 'arm64');
  const kernel = `${process.platform} ${process.arch}, kernel ${os.release()}`;
  if (platformOk) pass('kernel and architecture', kernel);
  else fail('kernel and architecture', kernel, 'confined runs on Linux x64 or arm64 (macOS support is not run yet)');

  // bwrap: the path the library uses, unless pointed elsewhere.
  // lib/host.js loads the addon: without it, the library's choice cannot be read.
  let host = null;
  let hostError = null;
  try {
    host = await import('../host.js');
  } catch (error) {
    hostError = error;
  }
  if (host === null) {
    fail(
      'addon',
      `cannot load the native addon: ${hostError.message.split('\n')[0]}`,
      'npm install (or npm run build) in the package directory; it needs a C compiler, make, python3 and libseccomp-dev',
    );
    return lines;
  }
  const libraryBwrap = host.bwrapPath();
  let bwrap = libraryBwrap;
  let where = `the library's: first of ${host.BWRAP_CANDIDATES.join(', ')}`;
  if (override !== undefined) {
    bwrap = override;
    where = `given by --bwrap/CONFINED_BWRAP; the library uses ${libraryBwrap ?? 'none found'}`;
  }
  let bwrapUsable = false;
  if (!bwrap) {
    fail('bwrap path', `not found (${where})`, INSTALL_BWRAP);
  } else {
    let st = null;
    try {
      st = statSync(bwrap);
    } catch (error) {
      fail('bwrap path', `${bwrap}: ${error.code === 'ENOENT' ? 'no such file' : error.message} (${where})`, INSTALL_BWRAP);
    }
    if (st) {
      const problems = [];
      if (!st.isFile()) problems.push('not a regular file');
      if (st.uid !== 0) problems.push('not owned by root');
      if (st.mode & 0o022) problems.push('group- or other-writable');
      if (!(st.mode & 0o111)) problems.push('not executable');
      if (st.mode & 0o4000) info('bwrap setuid', `${bwrap} is setuid root: confined does not need that`);
      if (problems.length === 0) {
        pass('bwrap path', `${bwrap} (${where})`);
        bwrapUsable = true;
      } else {
        fail('bwrap path', `${bwrap}: ${problems.join(', ')} (${where})`, `chown root:root ${bwrap} && chmod 0755 ${bwrap}, or ${INSTALL_BWRAP}`);
      }
    }
  }

  // Version and the flags the backend passes.
  const [minMajor, minMinor] = host.MIN_BWRAP_VERSION;
  let version = null;
  let help = null;
  if (bwrapUsable) {
    try {
      const out = execFileSync(bwrap, ['--version'], { env: {}, encoding: 'utf8', timeout: 5000, stdio: ['ignore', 'pipe', 'pipe'] });
      const m = /^bubblewrap (\d+)\.(\d+)(?:\.(\d+))?/m.exec(out);
      if (m) version = [Number(m[1]), Number(m[2]), Number(m[3] ?? 0)];
    } catch {
      version = null;
    }
    try {
      help = execFileSync(bwrap, ['--help'], { env: {}, encoding: 'utf8', timeout: 5000, stdio: ['ignore', 'pipe', 'pipe'] });
    } catch (error) {
      help = typeof error.stdout === 'string' && error.stdout !== '' ? error.stdout : null;
    }
  }
  if (version && atLeast(version, [minMajor, minMinor])) pass('bwrap version', version.join('.'));
  else
    fail(
      'bwrap version',
      version ? `${version.join('.')} is older than ${minMajor}.${minMinor}` : bwrapUsable ? 'bwrap --version did not answer' : 'no usable bwrap',
      INSTALL_BWRAP,
    );
  const flags = await requiredFlags();
  if (help) {
    const missing = flags.filter((flag) => !new RegExp(`(^|\\s)${flag}(\\s|=|$)`, 'm').test(help));
    if (missing.length === 0) pass('bwrap features', `bwrap --help lists all ${flags.length} flags the backend passes (${flags.join(' ')})`);
    else fail('bwrap features', `bwrap --help lacks ${missing.join(' ')}`, INSTALL_BWRAP);
    info('bwrap --ro-bind-fd', /--ro-bind-fd\b/.test(help) ? 'available (not used: bwrap mounts it by path again)' : 'absent (not used)');
  } else {
    fail('bwrap features', bwrapUsable ? 'bwrap --help did not answer' : 'no usable bwrap', INSTALL_BWRAP);
  }

  // Unprivileged user namespaces (bwrap is not setuid here: it needs them).
  const maxNs = readText('/proc/sys/user/max_user_namespaces');
  const clone = readText('/proc/sys/kernel/unprivileged_userns_clone');
  const apparmor = readText('/proc/sys/kernel/apparmor_restrict_unprivileged_userns');
  const nsProblems = [];
  const nsFacts = [];
  if (maxNs === null) nsProblems.push('/proc/sys/user/max_user_namespaces is missing (kernel without CONFIG_USER_NS?)');
  else if (Number(maxNs.trim()) <= 0) nsProblems.push(`user.max_user_namespaces is ${maxNs.trim()}`);
  else nsFacts.push(`user.max_user_namespaces=${maxNs.trim()}`);
  if (clone !== null) {
    if (clone.trim() !== '1') nsProblems.push(`kernel.unprivileged_userns_clone is ${clone.trim()}`);
    else nsFacts.push('kernel.unprivileged_userns_clone=1');
  }
  if (apparmor !== null) {
    // Not a failure by itself: an AppArmor profile may allow bwrap (Ubuntu ships one); the
    // end-to-end probe shows whether it does.
    nsFacts.push(
      apparmor.trim() === '0'
        ? 'kernel.apparmor_restrict_unprivileged_userns=0'
        : `kernel.apparmor_restrict_unprivileged_userns=${apparmor.trim()} (bwrap needs an AppArmor profile allowing userns: see the end-to-end probe)`,
    );
  }
  if (nsProblems.length === 0) pass('unprivileged user namespaces', nsFacts.join(', '));
  else
    fail(
      'unprivileged user namespaces',
      nsProblems.join('; '),
      'sysctl -w user.max_user_namespaces=15000, and kernel.unprivileged_userns_clone=1 where it exists',
    );

  // seccomp: the Seccomp field of /proc/self/status exists when the kernel has it.
  const status = readText('/proc/self/status') ?? '';
  const seccomp = /^Seccomp:\s*(\d+)/m.exec(status);
  if (seccomp) pass('seccomp', `available (this process: mode ${seccomp[1]}${/^Seccomp_filters:\s*(\d+)/m.exec(status) ? `, ${/^Seccomp_filters:\s*(\d+)/m.exec(status)[1]} filters` : ''})`);
  else fail('seccomp', 'no Seccomp field in /proc/self/status', 'use a kernel built with CONFIG_SECCOMP and CONFIG_SECCOMP_FILTER');

  // Landlock: not a requirement of the current backend; reported for what it could add.
  const lsm = readText('/sys/kernel/security/lsm');
  if (lsm === null) info('Landlock', 'unknown (/sys/kernel/security/lsm is not readable); not required');
  else if (lsm.split(',').map((s) => s.trim()).includes('landlock')) info('Landlock', `enabled (lsm: ${lsm.trim()}); not required`);
  else info('Landlock', `not enabled (lsm: ${lsm.trim()}); not required`);

  // Root callers: idmapped mounts and the privilege drop.
  const root = typeof process.getuid === 'function' && process.getuid() === 0;
  const kv = kernelVersion();
  if (root) {
    if (atLeast(kv, [5, 12]))
      pass('idmapped mounts (root callers)', `kernel ${kv.join('.')} has mount_setattr and open_tree (5.12+); the probe below proves the filesystem supports them`);
    else fail('idmapped mounts (root callers)', `kernel ${kv.join('.')} is older than 5.12`, 'run as an unprivileged user, or use a kernel 5.12 or newer');
    pass('running as root', 'confined drops to uid/gid 65534 before bwrap: programs never run as host root');
  } else {
    info('idmapped mounts', 'not needed (not running as root)');
    info('running as', `uid ${process.getuid?.()}: programs run unprivileged in their own user namespace`);
  }

  // The addon and the stage helper.
  let addonOk = false;
  try {
    const { helperPath } = await import('../native.js');
    const stage = host.stagePath();
    if (!stage) fail('addon', `the stage helper ${helperPath('stage')} is missing`, 'npm run build');
    else {
      pass('addon', `confined.node loaded; stage helper ${stage}`);
      addonOk = true;
    }
  } catch (error) {
    fail('addon', `cannot load the native addon: ${error.message.split('\n')[0]}`, 'npm install (or npm run build) in the package directory; it needs a C compiler, make, python3 and libseccomp-dev');
  }

  // The library's own verdict, then the pins and a real run.
  if (addonOk) {
    const problem = host.hostProblem();
    if (problem === null) pass('host check (library)', 'lib/host.js accepts this host');
    else fail('host check (library)', problem, INSTALL_BWRAP);
    await probe({ pass, fail });
  } else {
    fail('runtime pin', 'skipped: no addon', 'npm run build');
    fail('end-to-end probe', 'skipped: no addon', 'npm run build');
  }
  return lines;
}

/** Pins the runtime and profile, then runs a hello program confined and checks its answer. */
async function probe({ pass, fail }) {
  let lib;
  let runtime;
  let profile;
  try {
    lib = await import('../index.js');
    const identity = lib.describeRuntime();
    runtime = identity.digest;
    profile = lib.confinedProfile().digest;
    pass('runtime pin', `describeRuntime() pinned ${identity.files.length} files: ${runtime}`);
  } catch (error) {
    fail('runtime pin', `${error.code ?? error.name}: ${error.message}`, 'fix the lines above, then run doctor again');
    fail('end-to-end probe', 'skipped: no runtime pin', 'fix the lines above');
    return;
  }
  const nonce = randomBytes(8).toString('hex');
  const source = 'console.log(`hello ${process.argv[2]} uid ${process.getuid()}`);\n';
  const files = [{ path: 'hello.mjs', content: new TextEncoder().encode(source) }];
  let root;
  try {
    root = mkdtempSync(path.join(realpathSync(os.tmpdir()), 'confined-doctor-'));
  } catch (error) {
    fail('end-to-end probe', `cannot create a root under ${os.tmpdir()}: ${error.message}`, 'make the temporary directory writable');
    return;
  }
  try {
    const result = await new lib.ConfinedExecutor({ root }).run({
      runtime,
      profile,
      program: { files, digest: lib.snapshotDigest(files), entry: 'hello.mjs', args: [nonce] },
      input: { files: [], digest: lib.snapshotDigest([]) },
      timeoutMs: 60_000,
      maxOutputBytes: 4096,
      cpuSeconds: 30,
      maxDescriptors: 64,
    });
    const out = result.process?.stdout.toString('utf8') ?? '';
    const m = new RegExp(`^hello ${nonce} uid (\\d+)\\n$`).exec(out);
    if (result.status === 'observed' && result.attributable && result.process.exit.code === 0 && m) {
      pass('end-to-end probe', `a hello program ran confined as uid ${m[1]}, admitted, attributable, in ${result.process.durationMs.toFixed(0)} ms`);
    } else {
      const why =
        result.status === 'not-started'
          ? `not-started (${result.reason}): ${result.message}`
          : `${result.status}, problems [${result.problems.join('; ')}], exit ${JSON.stringify(result.process.exit)}, stdout ${JSON.stringify(out)}, stderr ${JSON.stringify(result.process.stderr.toString('utf8').slice(0, 500))}`;
      fail('end-to-end probe', why, 'fix the lines above; if they all pass, report this line');
    }
  } catch (error) {
    fail('end-to-end probe', `${error.name}: ${error.message}`, 'report this line');
  } finally {
    try {
      rmdirSync(root);
    } catch {
      // A quarantined namespace stays for inspection.
    }
  }
}

/** Formats the lines: `PASS what: detail`, with `fix:` under a failure. */
export function formatLines(lines) {
  return lines
    .map((l) => `${l.state.toUpperCase()} ${l.what}: ${l.detail}${l.fix ? `\n     fix: ${l.fix}` : ''}`)
    .join('\n') + '\n';
}

/**
 * Runs `confined doctor`. Returns the exit code.
 * @param {string[]} argv
 * @param {{ stdout: NodeJS.WritableStream, stderr: NodeJS.WritableStream }} io
 * @param {NodeJS.ProcessEnv} env
 */
export async function doctorCommand(argv, io, env = process.env) {
  const { options, positionals, rest } = parseArgs(argv, SPEC);
  if (options.help) {
    io.stdout.write(DOCTOR_HELP);
    return 0;
  }
  if (positionals.length > 0 || rest.length > 0)
    throw new UsageError(`unexpected argument ${JSON.stringify(positionals[0] ?? rest[0])}`);
  let bwrap = options.bwrap ?? (env.CONFINED_BWRAP || undefined);
  if (bwrap !== undefined) bwrap = path.resolve(bwrap);
  if (bwrap !== undefined && existsSync(bwrap)) {
    try {
      bwrap = realpathSync(bwrap);
    } catch {
      // Reported by the bwrap line.
    }
  }
  const lines = await diagnose({ bwrap });
  io.stdout.write(formatLines(lines));
  const failed = lines.filter((l) => l.state === 'fail').length;
  io.stdout.write(failed === 0 ? 'confined doctor: every requirement passes\n' : `confined doctor: ${failed} requirement(s) fail\n`);
  return failed === 0 ? 0 : 1;
}
