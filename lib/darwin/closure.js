// The non-system dylib closure of a Mach-O executable, resolved as dyld resolves it, on
// top of the native Mach-O reader (native/macho.c). Pure with respect to the file system:
// every file access goes through a `host` ({ readFile, realpath }), so the resolution runs
// on Linux against a fake root (test/macho.test.js) exactly as on macOS against '/'.
//
// What is kept: every library file that is not a system library. System libraries (install
// names under /usr/lib/ and /System/) live in the dyld shared cache, not on disk, and are
// SIP-protected: they are identified by the OS build, not pinned file by file, and are only
// listed by name. Anything this module cannot model exactly (dyld's fallback search, bare
// install names, LC_DYLD_ENVIRONMENT, a system location reached through @rpath before an
// on-disk candidate, an image whose directory differs from its real directory while it
// uses @loader_path) is refused with a reason: a pinned closure must not have gaps.
import fs from 'node:fs';
import path from 'node:path';

/** Install-name prefixes of the system libraries (shared cache, OS build). */
export const SYSTEM_PREFIXES = Object.freeze(['/usr/lib/', '/System/']);
/** The only dynamic linker a main executable may name. */
export const DYLD_PATH = '/usr/lib/dyld';
/** Resolution stops (and refuses) beyond this many image visits. */
export const MAX_VISITS = 4096;

const DEPENDENCY_KINDS = new Set(['load', 'weak', 'reexport', 'upward']);

/** Under /System/ but not sealed system content: /System/Volumes/Data is the user data
 * volume (firmlinked to /Users, /opt, ...), so nothing under /System/Volumes/ is treated as
 * a system library; such a path must exist on disk and is pinned like any other. */
const NOT_SYSTEM_PREFIXES = Object.freeze(['/System/Volumes/']);

/** True when `p` is lexically a system location ('..' segments are not resolved here). */
export function isSystemPath(p) {
  return (
    SYSTEM_PREFIXES.some((prefix) => p.startsWith(prefix)) &&
    !NOT_SYSTEM_PREFIXES.some((prefix) => p.startsWith(prefix))
  );
}

function hasDotSegment(p) {
  return p.split('/').some((s) => s === '.' || s === '..');
}

/** process.arch to the Mach-O reader's CPU name; null for an architecture macOS lacks. */
export function machoCpu(arch = process.arch) {
  if (arch === 'arm64') return 'arm64';
  if (arch === 'x64') return 'x86_64';
  return null;
}

/**
 * A host over the real file system, or over a fake root directory: every absolute path,
 * including absolute symlink targets, is taken relative to `root`. With root '' it is the
 * real file system.
 */
export function fsHost(root = '') {
  if (root !== '' && (!path.isAbsolute(root) || root.endsWith('/'))) {
    throw new TypeError('fsHost root must be absolute without a trailing /');
  }
  const readFile = (p) => {
    try {
      return fs.readFileSync(root + p);
    } catch (err) {
      if (err.code === 'ENOENT' || err.code === 'ENOTDIR') return null;
      throw err;
    }
  };
  if (root === '') {
    const realpath = (p) => {
      try {
        return fs.realpathSync.native(p);
      } catch (err) {
        if (err.code === 'ENOENT' || err.code === 'ENOTDIR') return null;
        throw err;
      }
    };
    return Object.freeze({ readFile, realpath });
  }
  // Resolves symlinks component by component inside the root, as the kernel would if the
  // root were '/'. Returns null when a component is missing.
  const realpath = (p) => {
    let links = 0;
    let done = '';
    let rest = p.split('/').filter(Boolean);
    while (rest.length > 0) {
      const part = rest.shift();
      if (part === '.') continue;
      if (part === '..') {
        done = done.slice(0, done.lastIndexOf('/'));
        continue;
      }
      const next = `${done}/${part}`;
      let st;
      try {
        st = fs.lstatSync(root + next);
      } catch (err) {
        if (err.code === 'ENOENT' || err.code === 'ENOTDIR') return null;
        throw err;
      }
      if (st.isSymbolicLink()) {
        if (++links > 40) {
          const err = new Error(`too many symbolic links resolving ${p}`);
          err.code = 'ELOOP';
          throw err;
        }
        const target = fs.readlinkSync(root + next);
        rest = [...target.split('/').filter(Boolean), ...rest];
        if (target.startsWith('/')) done = '';
        continue;
      }
      if (rest.length > 0 && !st.isDirectory()) return null;
      done = next;
    }
    return done === '' ? '/' : done;
  };
  return Object.freeze({ readFile, realpath });
}

class Refusal extends Error {}

function refuse(message) {
  throw new Refusal(message);
}

/**
 * Resolves the closure of `executable` (an absolute path) for `cpu` ('arm64' | 'x86_64').
 * `parse` is the native reader (native.machoParse), injected so that this module does not
 * load the addon itself.
 *
 * Returns { ok: true, executable, images, aliases, system, weakAbsent } or
 * { ok: false, reason }, where
 *   images:     [{ path, role: 'executable' | 'library', fileType, installName, requestedAs }]
 *               one per real file, the executable first, then in resolution order;
 *   aliases:    [{ link, target }] each path dyld opens that is not the real path (re-check
 *               with realpath(link) === target);
 *   system:     sorted install names of system libraries (identified by the OS build);
 *   weakAbsent: [{ from, name, tried }] weak libraries that were absent: pin the absence.
 */
export function resolveClosure({ executable, cpu, host, parse }) {
  try {
    return resolve(executable, cpu, host, parse);
  } catch (err) {
    if (err instanceof Refusal) return Object.freeze({ ok: false, reason: err.message });
    throw err;
  }
}

function resolve(executable, cpu, host, parse) {
  if (typeof executable !== 'string' || !path.isAbsolute(executable)) {
    refuse('the executable must be an absolute path');
  }
  if (cpu !== 'arm64' && cpu !== 'x86_64') refuse(`unsupported CPU ${cpu}`);
  const exeReal = host.realpath(executable);
  if (exeReal === null) refuse(`${executable} does not exist`);
  const exeDir = path.posix.dirname(exeReal);

  const images = new Map(); // real path -> record
  const aliases = new Map(); // link -> target
  const system = new Set();
  const weakAbsent = [];
  const visited = new Set();
  let visits = 0;

  const load = (real, role) => {
    const bytes = host.readFile(real);
    if (bytes === null) refuse(`${real} vanished while resolving`);
    const r = parse(bytes, cpu);
    if (!r.ok) refuse(`${real}: ${r.reason}`);
    if (role === 'executable' && r.fileType !== 'execute') {
      refuse(`${real} is a Mach-O ${r.fileType}, not an executable`);
    }
    if (role === 'library' && r.fileType !== 'dylib') {
      refuse(`${real} is a Mach-O ${r.fileType}, not a dylib`);
    }
    return r;
  };

  const noteAlias = (opened, real) => {
    if (opened !== real) aliases.set(opened, real);
  };

  // Expands an LC_RPATH of the image at `real` to an absolute directory.
  const expandRpath = (rp, real) => {
    let out;
    if (rp === '@loader_path' || rp.startsWith('@loader_path/')) {
      out = path.posix.dirname(real) + rp.slice('@loader_path'.length);
    } else if (rp === '@executable_path' || rp.startsWith('@executable_path/')) {
      out = exeDir + rp.slice('@executable_path'.length);
    } else if (rp.startsWith('/')) {
      out = rp;
    } else {
      refuse(`${real}: LC_RPATH ${JSON.stringify(rp)} is neither absolute nor @loader_path or @executable_path relative`);
    }
    return out;
  };

  // Candidate paths for one install name, in dyld's order.
  const candidates = (name, real, searchRpaths) => {
    if (name.startsWith('@rpath/')) {
      const rest = name.slice('@rpath'.length);
      return searchRpaths.map((dir) => dir + rest);
    }
    if (name.startsWith('@loader_path/')) {
      return [path.posix.dirname(real) + name.slice('@loader_path'.length)];
    }
    if (name.startsWith('@executable_path/')) {
      return [exeDir + name.slice('@executable_path'.length)];
    }
    if (name.startsWith('@')) refuse(`${real}: unsupported install name ${JSON.stringify(name)}`);
    if (!name.startsWith('/')) {
      refuse(`${real}: install name ${JSON.stringify(name)} is not absolute (dyld's fallback search is not modelled)`);
    }
    return [name];
  };

  const visit = (opened, real, role, chainRpaths, chain) => {
    const key = `${real}\n${chainRpaths.join('\n')}`;
    if (visited.has(key) || chain.has(real)) return;
    visited.add(key);
    if (++visits > MAX_VISITS) refuse(`closure exceeds ${MAX_VISITS} image visits`);

    const r = load(real, role);
    const dir = path.posix.dirname(real);
    const usesLoaderPath = r.commands.some(
      (c) => c.value.startsWith('@loader_path') && (c.kind === 'rpath' || DEPENDENCY_KINDS.has(c.kind)),
    );
    // dyld may expand @loader_path from the path it opened rather than the real one; the
    // two agree exactly when the opened path's directory resolves to the real directory.
    if (usesLoaderPath && host.realpath(path.posix.dirname(opened)) !== dir) {
      refuse(`${opened} uses @loader_path but is a link into another directory (${real})`);
    }
    if (r.commands.some((c) => c.value.startsWith('@executable_path'))) usesExecutablePath = true;
    for (const c of r.commands) {
      if (c.kind === 'dyld-environment' && role === 'executable') {
        refuse(`${real}: LC_DYLD_ENVIRONMENT changes dyld's search paths`);
      }
      if (c.kind === 'dylinker' && c.value !== DYLD_PATH) {
        refuse(`${real}: dynamic linker ${JSON.stringify(c.value)} is not ${DYLD_PATH}`);
      }
    }
    const record = images.get(real) ?? {
      path: real,
      role,
      fileType: r.fileType,
      installName: r.commands.find((c) => c.kind === 'id')?.value ?? null,
      requestedAs: new Set(),
    };
    images.set(real, record);

    // dyld searches the loading image's LC_RPATHs first, then those of each image up the
    // chain that loaded it, ending with the main executable's.
    const own = r.commands.filter((c) => c.kind === 'rpath').map((c) => expandRpath(c.value, real));
    const searchRpaths = [...new Set([...own, ...chainRpaths])];
    const nextChain = new Set(chain).add(real);

    for (const c of r.commands) {
      if (!DEPENDENCY_KINDS.has(c.kind)) continue;
      const tried = candidates(c.value, real, searchRpaths);
      let found = null;
      let systemHit = null;
      for (const cand of tried) {
        if (isSystemPath(path.posix.normalize(cand))) {
          if (hasDotSegment(cand)) {
            refuse(`${real}: ${JSON.stringify(c.value)} reaches the system location ${cand} through '..'`);
          }
          if (systemHit === null && found === null) systemHit = cand;
          continue;
        }
        const candReal = host.realpath(cand);
        if (candReal === null) continue;
        if (systemHit !== null) {
          refuse(
            `${real}: ${JSON.stringify(c.value)} resolves to the system location ${systemHit} ` +
              `before ${cand}, which exists: whether dyld's shared cache holds it cannot be decided here`,
          );
        }
        found = { opened: cand, real: candReal };
        break;
      }
      if (found === null && systemHit !== null) {
        system.add(systemHit);
        continue;
      }
      if (found === null) {
        if (c.kind === 'weak') {
          weakAbsent.push(Object.freeze({ from: real, name: c.value, tried: Object.freeze(tried) }));
          continue;
        }
        refuse(`${real}: ${JSON.stringify(c.value)} not found (tried ${tried.join(', ') || 'no LC_RPATH'})`);
      }
      if (isSystemPath(found.real)) {
        // An on-disk file under a SIP-protected location: covered by the OS build.
        system.add(found.real);
        continue;
      }
      noteAlias(found.opened, found.real);
      visit(found.opened, found.real, 'library', searchRpaths, nextChain);
      images.get(found.real)?.requestedAs.add(c.value);
    }
  };

  noteAlias(executable, exeReal);
  let usesExecutablePath = false;
  visit(executable, exeReal, 'executable', [], new Set());
  if (usesExecutablePath && host.realpath(path.posix.dirname(executable)) !== exeDir) {
    refuse(`${executable} is a link into another directory and the closure uses @executable_path`);
  }

  const frozenImages = [...images.values()].map((i) =>
    Object.freeze({ ...i, requestedAs: Object.freeze([...i.requestedAs].sort()) }),
  );
  return Object.freeze({
    ok: true,
    executable: exeReal,
    images: Object.freeze(frozenImages),
    aliases: Object.freeze([...aliases].map(([link, target]) => Object.freeze({ link, target }))),
    system: Object.freeze([...system].sort()),
    weakAbsent: Object.freeze(weakAbsent),
  });
}
