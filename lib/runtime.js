// describeRuntime(): the runtime pin of the Linux backend, and verifyRuntime() for run().
//
// RuntimeIdentity = { digest, platform, arch, node: { path, version },
//   os: { kernelRelease, kernelVersion, id, versionId }, files: RuntimeFile[],
//   aliases: RuntimeAlias[] }
// RuntimeFile = { path, size, sha256, role }: role 'node' (realpath(process.execPath)),
//   'launcher' (bwrap and the stage helper), 'interpreter' (PT_INTERP), 'library'
//   (DT_NEEDED, recursively, of any of them). One entry per real path, sorted by path
//   (byte order of the UTF-8 path).
// RuntimeAlias = { link, target }: every symlink traversed while resolving a file
//   (any component), target as readlink returns it; sorted by link, then target.
//
// digest = 'sha256:' + hex SHA-256 of the UTF-8 bytes of
//   'confined-runtime/1\n' + JSON.stringify([platform, arch, [node.path, node.version],
//     [os.kernelRelease, os.kernelVersion, os.id, os.versionId],
//     files.map((f) => [f.path, f.size, f.sha256, f.role]),
//     aliases.map((a) => [a.link, a.target])])
// (JSON makes the encoding unambiguous whatever the strings contain; arrays keep the
// order fixed.) Every field of the identity except the digest itself is covered.
//
// Closure resolution and hashing are native (native/closure_linux.c): the executables
// are resolved as ld.so resolves them with an empty environment, and each file is
// hashed with SHA-256 through node's OpenSSL, behind a cache keyed on (device, inode,
// size, mtime ns, ctime ns) whose soundness argument is written there. The identity is
// memoised (closureIdentity): it is built again unless every answer the file system gave
// the resolution is still the same (one stat each, native/pin_linux.c). Set
// CONFINED_RUNTIME_REHASH=1 (or pass { rehash: true } internally) to hash everything and
// bypass both.
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { readFileSync, realpathSync, statSync } from 'node:fs';
import os from 'node:os';
import { ConfinedExecutorError } from './errors.js';
import { deepFreeze } from './freeze.js';
import { describeRuntimeDarwin } from './darwin/runtime.js';
import { bwrapPath, hostProblem, stagePath } from './host.js';
import { native } from './native.js';

export const RUNTIME_PROTOCOL = 'confined-runtime/1';
const LD_SO_CACHE = '/etc/ld.so.cache';
const OS_RELEASE = ['/etc/os-release', '/usr/lib/os-release'];
const ROLES = Object.freeze(['node', 'launcher', 'launcher']);

// What each program interpreter searches, from its own `--help` (run with an empty
// environment, so LD_LIBRARY_PATH does not appear), keyed on the interpreter's identity.
const loaderMemo = new Map();

function statKey(path) {
  const st = statSync(path, { bigint: true });
  return `${st.dev}:${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`;
}

/** Parses `ld.so --help` (glibc >= 2.33) into the native loader configuration. */
export function parseLoaderHelp(text, interp, ldsoBytes) {
  const dirs = [];
  const hwcaps = [];
  const legacy = [];
  let platform = null;
  let section = null;
  for (const line of text.split('\n')) {
    if (/^Shared library search path:/.test(line)) section = 'dirs';
    else if (/^Subdirectories of glibc-hwcaps directories/.test(line)) section = 'hwcaps';
    else if (/^Legacy HWCAP subdirectories/.test(line)) section = 'legacy';
    else if (!/^ {2}/.test(line)) section = null;
    else if (section === 'dirs') {
      const m = /^ {2}(\/\S*) \(system search path\)$/.exec(line);
      if (m) dirs.push(m[1]);
    } else if (section === 'hwcaps' || section === 'legacy') {
      const m = /^ {2}(\S+) \(([^)]*)\)$/.exec(line);
      if (!m) continue;
      const flags = m[2].split(/[;,] */);
      if (!flags.includes('searched')) continue;
      (section === 'hwcaps' ? hwcaps : legacy).push(m[1]);
      if (section === 'legacy' && flags.includes('AT_PLATFORM')) platform = m[1];
    }
  }
  if (dirs.length === 0) throw new Error(`${interp} --help listed no system search path`);
  // $LIB is ld.so's build-time library directory (Debian: lib/x86_64-linux-gnu, others:
  // lib64). It is not printed: take the first system directory without its leading '/',
  // and accept it only if ld.so holds exactly that string; otherwise $LIB is refused.
  let lib = dirs[0].slice(1);
  if (!ldsoBytes.includes(Buffer.from(`\0${lib}\0`))) lib = null;
  return { interp, dirs, hwcaps, legacy, platform, lib };
}

export function loaderConfig(interp) {
  let key;
  try {
    key = statKey(interp);
  } catch (err) {
    throw new ConfinedExecutorError(
      'runtime-unavailable',
      `interpreter ${interp} cannot be read: ${err.message}`,
      { cause: err },
    );
  }
  const memo = loaderMemo.get(interp);
  if (memo && memo.key === key) return memo.config;
  let config;
  try {
    const text = execFileSync(interp, ['--help'], {
      env: {},
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: 10000,
    });
    config = parseLoaderHelp(text, interp, readFileSync(interp));
  } catch (err) {
    throw new ConfinedExecutorError(
      'runtime-unavailable',
      `interpreter ${interp} did not describe its search path: ${err.message}`,
      { cause: err },
    );
  }
  loaderMemo.set(interp, { key, config });
  return config;
}

function readOsRelease() {
  for (const file of OS_RELEASE) {
    let text;
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    const vars = Object.create(null);
    for (const line of text.split('\n')) {
      const m = /^([A-Z0-9_]+)=(.*)$/.exec(line.trim());
      if (!m) continue;
      let v = m[2];
      const q = /^(["'])(.*)\1$/.exec(v);
      if (q) v = q[1] === '"' ? q[2].replace(/\\([\\"$`])/g, '$1') : q[2];
      vars[m[1]] = v;
    }
    return { id: vars.ID ?? 'linux', versionId: vars.VERSION_ID ?? null };
  }
  // os-release(5): ID defaults to "linux" when unset.
  return { id: 'linux', versionId: null };
}

function byteCompare(a, b) {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

/** The canonical serialisation that the digest covers (see the header comment). */
export function runtimeSerialisation(identity) {
  const { platform, arch, node, os: o, files, aliases } = identity;
  const body = [
    platform,
    arch,
    [node.path, node.version],
    [o.kernelRelease, o.kernelVersion, o.id, o.versionId],
    files.map((f) => [f.path, f.size, f.sha256, f.role]),
    aliases.map((a) => [a.link, a.target]),
  ];
  return `${RUNTIME_PROTOCOL}\n${JSON.stringify(body)}`;
}

export function runtimeDigest(identity) {
  return 'sha256:' + createHash('sha256').update(runtimeSerialisation(identity)).digest('hex');
}

/**
 * Builds the identity from a native closure result ({ files, aliases }) and the host
 * facts; sorts, strips native-only fields, computes the digest and freezes everything.
 */
export function buildIdentity(closure, facts) {
  const files = closure.files
    .map((f) => ({ path: f.path, size: f.size, sha256: f.sha256, role: f.role }))
    .sort((a, b) => byteCompare(a.path, b.path));
  const aliases = closure.aliases
    .map((a) => ({ link: a.link, target: a.target }))
    .sort((a, b) => byteCompare(a.link, b.link) || byteCompare(a.target, b.target));
  const identity = {
    digest: '',
    platform: facts.platform,
    arch: facts.arch,
    node: { path: facts.node.path, version: facts.node.version },
    os: { ...facts.os },
    files,
    aliases,
  };
  identity.digest = runtimeDigest(identity);
  return deepFreeze(identity);
}

/** Hashes files with the native pinning code and its cache (for tests and tools). */
export function hashFiles(paths, { rehash = false } = {}) {
  try {
    return native.hashFiles([...paths], rehash);
  } catch (err) {
    throw new ConfinedExecutorError('runtime-unavailable', err.message, { cause: err });
  }
}

function rehashRequested(options) {
  return options?.rehash === true || process.env.CONFINED_RUNTIME_REHASH === '1';
}

function sameList(a, b) {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

function sameFacts(a, b) {
  return (
    a.platform === b.platform &&
    a.arch === b.arch &&
    a.node.path === b.node.path &&
    a.node.version === b.node.version &&
    a.os.kernelRelease === b.os.kernelRelease &&
    a.os.kernelVersion === b.os.kernelVersion &&
    a.os.id === b.os.id &&
    a.os.versionId === b.os.versionId
  );
}

// The identity closureIdentity last built, with everything it was built from: the
// arguments, the host facts and the generation of the native recording of what the
// closure resolution observed (native/pin_linux.c, closure_memo_holds).
let identityMemo = null;

/**
 * The identity of the closure of `executables` (real paths; roles 'node' or 'launcher')
 * with the given host facts ({ platform, arch, node: { path, version }, os }). Options:
 * rehash (hash every file, consult no memo), cachePath (the ld.so.cache, for tests).
 * Throws ConfinedExecutorError 'runtime-unavailable'.
 *
 * The memo: the previous identity is returned again only when the arguments and facts
 * are equal (compared here, every call) and runtimeMemoChanged reports that every
 * observation the native resolution made still holds, so resolving again would give
 * the same files, hashes and aliases (the argument is written at closure_memo_holds).
 * The loader configurations are not recomputed on that path: they are a function of the
 * executables' bytes (their PT_INTERP) and of the interpreters' stat keys (loaderConfig's
 * memo), and both are observations of the recording (every executable and interpreter
 * is a file of the closure). The memo is kept only if those configurations are still
 * loaderConfig's current ones once the closure is recorded, so that they cannot be older
 * than what the recording observed.
 */
export function closureIdentity(executables, roles, facts, options) {
  const rehash = rehashRequested(options);
  const cachePath = options?.cachePath ?? LD_SO_CACHE;
  const m = identityMemo;
  if (
    !rehash &&
    m &&
    m.cachePath === cachePath &&
    sameList(m.executables, executables) &&
    sameList(m.roles, roles) &&
    sameFacts(m.facts, facts) &&
    native.runtimeMemoChanged(m.generation) === null
  )
    return m.identity;
  identityMemo = null;
  const loaders = [];
  const seen = new Set();
  for (const exe of executables) {
    let info;
    try {
      info = native.elfInfoFile(exe);
    } catch (err) {
      throw new ConfinedExecutorError('runtime-unavailable', err.message, { cause: err });
    }
    if (info.interp && !seen.has(info.interp)) {
      seen.add(info.interp);
      loaders.push(loaderConfig(info.interp));
    }
  }
  let closure;
  try {
    closure = native.runtimeClosure([...executables], [...roles], loaders, cachePath, rehash, true);
  } catch (err) {
    throw new ConfinedExecutorError('runtime-unavailable', err.message, { cause: err });
  }
  const identity = buildIdentity(closure, facts);
  let current;
  try {
    current = loaders.every((l) => loaderConfig(l.interp) === l);
  } catch {
    current = false;
  }
  if (current)
    identityMemo = {
      executables: [...executables],
      roles: [...roles],
      cachePath,
      facts: { ...facts, node: { ...facts.node }, os: { ...facts.os } },
      generation: closure.memo,
      identity,
    };
  return identity;
}

/**
 * The runtime this process would confine programs with. Throws ConfinedExecutorError
 * 'unsupported-host' (hostProblem's reason) or 'runtime-unavailable' (a file of the
 * closure cannot be found, read or parsed, or cannot be resolved exactly).
 */
export function describeRuntime(options) {
  if (process.platform === 'darwin') return describeRuntimeDarwin(options);
  const problem = hostProblem();
  if (problem) throw new ConfinedExecutorError('unsupported-host', problem);
  let nodePath;
  try {
    nodePath = realpathSync(process.execPath);
  } catch (err) {
    throw new ConfinedExecutorError('runtime-unavailable', `node: ${err.message}`, {
      cause: err,
    });
  }
  const executables = [nodePath, bwrapPath(), stagePath()];
  if (executables.includes(null))
    throw new ConfinedExecutorError('unsupported-host', 'a launcher disappeared');
  const facts = {
    platform: process.platform,
    arch: process.arch,
    node: { path: nodePath, version: process.version },
    os: {
      kernelRelease: os.release(),
      kernelVersion: os.version(),
      ...readOsRelease(),
    },
  };
  return closureIdentity(executables, ROLES, facts, options);
}

/**
 * For run(): recomputes the runtime (with the cache) and compares it with the pinned
 * digest. Never throws; `problem` is null when ok, else a reason.
 */
export function verifyRuntime(expectedDigest, options) {
  // describeRuntime dispatches to the macOS closure on darwin.
  return verifyAgainst(expectedDigest, () => describeRuntime(options));
}

/** Compares the identity `describe()` builds with a pinned digest; never throws. */
export function verifyAgainst(expectedDigest, describe) {
  let identity;
  try {
    identity = describe();
  } catch (err) {
    const why = err instanceof ConfinedExecutorError ? `${err.code}: ${err.message}` : String(err);
    return { ok: false, digest: null, identity: null, problem: `runtime cannot be verified: ${why}` };
  }
  if (identity.digest !== expectedDigest) {
    return {
      ok: false,
      digest: identity.digest,
      identity,
      problem: `runtime changed: digest ${identity.digest} is not the pinned ${expectedDigest}`,
    };
  }
  return { ok: true, digest: identity.digest, identity, problem: null };
}
