// describeRuntime() on macOS: the same RuntimeIdentity shape, serialisation and digest as the
// Linux backend (lib/runtime.js buildIdentity, runtimeDigest, runtimeSerialisation are
// reused, not copied), filled from macOS sources:
//
//   files    role 'node': realpath(process.execPath); role 'library': every non-system image
//            of its dyld closure (lib/darwin/closure.js resolveClosure over the native Mach-O
//            reader); role 'launcher': /bin/dash, /usr/bin/env, /usr/bin/sandbox-exec (their
//            bytes only: they are system binaries whose own dependencies are system libraries,
//            covered by the OS build; they are not parsed, since Apple ships them as fat
//            binaries with arm64e slices that the reader refuses to choose between).
//   aliases  every path dyld opens that is not its real path (closure aliases; node itself
//            is resolved first, as on Linux): { link, target } with target the REAL path (Linux
//            records readlink's text per traversed link; here the closure module reports
//            link -> real path, which is what Seatbelt's literal rules check).
//   os       kernelRelease = uname release, kernelVersion = uname version, id = 'macos',
//            versionId = '<ProductVersion>[ <ProductVersionExtra>] (<ProductBuildVersion>)'
//            from /System/Library/CoreServices/SystemVersion.plist (what sw_vers prints).
//            The build is part of versionId because the identity has no other field for it
//            and the system libraries (dyld shared cache) are identified by it.
//
// Hashing: native hashFiles (native/pin_linux.c and its cache) is compiled on Linux only, so
// here every file is hashed with node:crypto SHA-256, over exactly the bytes the Mach-O reader
// parsed (one read per file: what is pinned is what was resolved). No cache: node and its
// closure are read in full on every call (a few tens of MB for a typical node).
//
// Refused (runtime-unavailable) rather than pinned partially: a closure the resolver refuses,
// and weak libraries that are absent (RuntimeIdentity has no field to pin an absence).
// unsupported-host: not darwin, an architecture other than arm64/x64, or a tool failing
// checkTools (root-owned, not group/other-writable, directories above included).
//
// Everything that touches the host is injectable (platform, arch, file system through a
// closure host and lstat, uname, the Mach-O parser), so the logic runs on Linux against a
// fake root (test/darwin-wiring.test.js).
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import { ConfinedExecutorError } from '../errors.js';
import { native } from '../native.js';
import { buildIdentity, verifyAgainst } from '../runtime.js';
import { fsHost, machoCpu, resolveClosure } from './closure.js';
import { TOOL_PATHS, checkTools } from './launch.js';

export const SYSTEM_VERSION_PLIST = '/System/Library/CoreServices/SystemVersion.plist';

/** Reads one <key>NAME</key><string>VALUE</string> of an XML property list; null if absent. */
export function plistString(text, key) {
  const esc = key.replace(/[^A-Za-z0-9]/g, '');
  const m = new RegExp(`<key>${esc}</key>\\s*<string>([^<]*)</string>`).exec(text);
  if (!m) return null;
  return m[1]
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&apos;/g, "'")
    .replace(/&amp;/g, '&');
}

/** versionId from SystemVersion.plist text, or null when ProductVersion or the build is missing. */
export function macosVersionId(plistText) {
  const version = plistString(plistText, 'ProductVersion');
  const build = plistString(plistText, 'ProductBuildVersion');
  if (!version || !build) return null;
  const extra = plistString(plistText, 'ProductVersionExtra');
  return `${version}${extra ? ` ${extra}` : ''} (${build})`;
}

function realDeps() {
  return {
    platform: process.platform,
    arch: process.arch,
    execPath: process.execPath,
    version: process.version,
    host: fsHost(''),
    lstat: fs.lstatSync,
    uname: () => ({ release: os.release(), version: os.version() }),
    parse: native.machoParse,
  };
}

function unavailable(message, cause) {
  return new ConfinedExecutorError('runtime-unavailable', message, cause ? { cause } : undefined);
}

/**
 * Why this host cannot run the darwin backend, or null. `deps` as describeRuntimeDarwin.
 */
export function darwinHostProblem(deps = {}) {
  const d = { ...realDeps(), ...deps };
  if (d.platform !== 'darwin') return `platform ${d.platform} is not darwin`;
  if (machoCpu(d.arch) === null) return `architecture ${d.arch} is not supported (arm64 or x64 only)`;
  const tools = checkTools(d.lstat, Object.values(TOOL_PATHS));
  if (!tools.ok) return `host tools refused: ${tools.problems.join('; ')}`;
  return null;
}

function sha256hex(bytes) {
  return createHash('sha256').update(bytes).digest('hex');
}

/**
 * The runtime identity on darwin. `deps` overrides any of: platform, arch, execPath,
 * version (node's), host ({ readFile, realpath }, lib/darwin/closure.js fsHost), lstat
 * (for checkTools; relative to the same root as host), uname () => { release, version },
 * parse (the Mach-O reader, native.machoParse). Throws ConfinedExecutorError
 * 'unsupported-host' or 'runtime-unavailable'.
 */
export function describeRuntimeDarwin(deps = {}) {
  const d = { ...realDeps(), ...deps };
  const problem = darwinHostProblem(d);
  if (problem) throw new ConfinedExecutorError('unsupported-host', problem);
  if (typeof d.parse !== 'function') {
    throw unavailable('the Mach-O reader (native.machoParse) was not given');
  }

  // One read per file: the bytes the reader parses are the bytes that are hashed.
  const read = new Map();
  const host = {
    realpath: (p) => d.host.realpath(p),
    readFile: (p) => {
      const bytes = d.host.readFile(p);
      if (bytes !== null && !read.has(p)) read.set(p, bytes);
      return bytes;
    },
  };
  // node's real path, as on Linux (the launch executes it; a link to it is never opened).
  let nodePath;
  try {
    nodePath = d.host.realpath(d.execPath);
  } catch (err) {
    throw unavailable(`node: ${err.message}`, err);
  }
  if (nodePath === null) throw unavailable(`node: ${d.execPath} does not exist`);
  let closure;
  try {
    closure = resolveClosure({ executable: nodePath, cpu: machoCpu(d.arch), host, parse: d.parse });
  } catch (err) {
    throw unavailable(`node's closure cannot be resolved: ${err.message}`, err);
  }
  if (!closure.ok) throw unavailable(`node's closure is refused: ${closure.reason}`);
  if (closure.weakAbsent.length > 0) {
    const w = closure.weakAbsent[0];
    throw unavailable(
      `weak library ${w.name} of ${w.from} is absent; an absence cannot be pinned in the runtime identity`,
    );
  }

  const files = [];
  const fileOf = (path, role, bytes) => {
    if (bytes === null || bytes === undefined) throw unavailable(`${path} cannot be read`);
    files.push({ path, size: bytes.length, sha256: sha256hex(bytes), role });
  };
  for (const image of closure.images) {
    fileOf(image.path, image.role === 'executable' ? 'node' : 'library', read.get(image.path));
  }
  for (const tool of Object.values(TOOL_PATHS)) {
    // checkTools refused symbolic links, so the tool path is its real path.
    let bytes;
    try {
      bytes = d.host.readFile(tool);
    } catch (err) {
      throw unavailable(`${tool} cannot be read: ${err.message}`, err);
    }
    fileOf(tool, 'launcher', bytes);
  }

  let plist;
  try {
    plist = d.host.readFile(SYSTEM_VERSION_PLIST);
  } catch (err) {
    throw unavailable(`${SYSTEM_VERSION_PLIST} cannot be read: ${err.message}`, err);
  }
  if (plist === null) throw unavailable(`${SYSTEM_VERSION_PLIST} is missing`);
  const versionId = macosVersionId(plist.toString('utf8'));
  if (versionId === null) {
    throw unavailable(`${SYSTEM_VERSION_PLIST} names no ProductVersion and ProductBuildVersion`);
  }
  const uname = d.uname();

  return buildIdentity(
    { files, aliases: closure.aliases },
    {
      platform: d.platform,
      arch: d.arch,
      node: { path: closure.executable, version: d.version },
      os: { kernelRelease: uname.release, kernelVersion: uname.version, id: 'macos', versionId },
    },
  );
}

/** For run(): like lib/runtime.js verifyRuntime, never throws. */
export function verifyRuntimeDarwin(expectedDigest, deps) {
  return verifyAgainst(expectedDigest, () => describeRuntimeDarwin(deps));
}
