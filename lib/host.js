// Host checks of the Linux backend: which launchers it execs and whether this host can
// run confined programs at all. Synchronous: describeRuntime() and run() call it first.
import { execFileSync } from 'node:child_process';
import { existsSync, realpathSync, statSync } from 'node:fs';
import { darwinHostProblem } from './darwin/runtime.js';
import { helperPath } from './native.js';
import { ConfinedExecutorError } from './errors.js';

/** Where bwrap is looked for, in order (the first that exists is used, realpath'd). */
export const BWRAP_CANDIDATES = Object.freeze(['/usr/bin/bwrap', '/bin/bwrap']);
/** Oldest bubblewrap the backend accepts (--disable-userns, --assert-userns-disabled). */
export const MIN_BWRAP_VERSION = Object.freeze([0, 8]);
const SUPPORTED_ARCHES = new Set(['x64', 'arm64']);

// `bwrap --version`, run once per binary: keyed on its identity so that a replaced
// binary is asked again.
let versionMemo = null;

function identity(st) {
  return `${st.dev}:${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`;
}

/** Real path of the bwrap the backend execs, or null when none of the candidates exists. */
export function bwrapPath() {
  for (const candidate of BWRAP_CANDIDATES) {
    if (existsSync(candidate)) {
      try {
        return realpathSync(candidate);
      } catch {
        return null;
      }
    }
  }
  return null;
}

/** Real path of the stage helper built by binding.gyp, or null when it is missing. */
export function stagePath() {
  try {
    return realpathSync(helperPath('stage'));
  } catch {
    return null;
  }
}

function bwrapVersion(path, st) {
  const key = `${path}\0${identity(st)}`;
  if (versionMemo && versionMemo.key === key) return versionMemo.version;
  let version = null;
  try {
    const out = execFileSync(path, ['--version'], {
      env: {},
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: 5000,
    });
    const m = /^bubblewrap (\d+)\.(\d+)(?:\.(\d+))?\s*$/m.exec(out);
    if (m) version = [Number(m[1]), Number(m[2]), Number(m[3] ?? 0)];
  } catch {
    version = null;
  }
  versionMemo = { key, version };
  return version;
}

/**
 * Why this host cannot run the Linux backend, or null when it can. Checks, in order:
 * platform, architecture, bwrap (present, regular, root-owned, not group/other-writable,
 * executable, version >= 0.8) and the stage helper (present, regular, executable).
 */
export function hostProblem() {
  // macOS has its own checks (sandbox-exec, dash, env: root-owned, not writable by others).
  if (process.platform === 'darwin') return darwinHostProblem();
  if (process.platform !== 'linux') return `platform ${process.platform} is not supported`;
  if (!SUPPORTED_ARCHES.has(process.arch))
    return `architecture ${process.arch} is not supported (x64 or arm64 only)`;
  const bwrap = bwrapPath();
  if (!bwrap) return `bubblewrap not found (looked for ${BWRAP_CANDIDATES.join(', ')})`;
  let st;
  try {
    st = statSync(bwrap, { bigint: true });
  } catch (err) {
    return `bubblewrap ${bwrap} cannot be examined: ${err.message}`;
  }
  if (!st.isFile()) return `bubblewrap ${bwrap} is not a regular file`;
  if (st.uid !== 0n) return `bubblewrap ${bwrap} is not owned by root`;
  if ((st.mode & 0o022n) !== 0n) return `bubblewrap ${bwrap} is group- or other-writable`;
  if ((st.mode & 0o111n) === 0n) return `bubblewrap ${bwrap} is not executable`;
  const version = bwrapVersion(bwrap, st);
  if (!version) return `bubblewrap ${bwrap} did not report its version`;
  const [maj, min] = MIN_BWRAP_VERSION;
  if (version[0] < maj || (version[0] === maj && version[1] < min))
    return `bubblewrap ${version.join('.')} is older than ${maj}.${min}`;
  const stage = stagePath();
  if (!stage) return `the stage helper ${helperPath('stage')} is missing (run npm run build)`;
  let sst;
  try {
    sst = statSync(stage);
  } catch (err) {
    return `the stage helper ${stage} cannot be examined: ${err.message}`;
  }
  if (!sst.isFile() || (sst.mode & 0o111) === 0)
    return `the stage helper ${stage} is not an executable regular file`;
  return null;
}

/**
 * Absolute real paths of the executables the Linux backend execs: [bwrap, stage].
 * Throws ConfinedExecutorError('unsupported-host') when the host has a problem.
 */
export function hostLaunchers() {
  const problem = hostProblem();
  if (problem) throw new ConfinedExecutorError('unsupported-host', problem);
  return Object.freeze([bwrapPath(), stagePath()]);
}
