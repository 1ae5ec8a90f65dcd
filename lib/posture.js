// The one posture decision of the Linux backend: { enforced, backend, reason }. Shared by the
// command runner (and available to the executor): the host checks of lib/host.js, then, once per
// process, a probe that runs the real launch path (lib/bwrap.js commandArgv, lib/launch.js
// spawnLauncher, the stage, the command seccomp policy) with /bin/true and requires the stage's
// exact report "exited 0". A host where bwrap cannot create its namespaces (no unprivileged user
// namespaces, a seccomp'd container...) is refused with the reason the probe saw.
import { existsSync } from 'node:fs';
import { commandArgv, stageArgv, SYSTEM_DIRS } from './bwrap.js';
import { parseStatus } from './collect.js';
import { bwrapPath, hostProblem, stagePath } from './host.js';
import { spawnLauncher, STAGING_DIR } from './launch.js';
import { native } from './native.js';

/** How long the one-time probe may take before the host is declared unusable. */
export const POSTURE_PROBE_TIMEOUT_MS = 10_000;

const PROBE_COMMAND = '/bin/true';

let cachedFilter = null;
/** The command seccomp policy (native/seccomp_linux.c), built once. */
export function commandFilter() {
  if (!cachedFilter) cachedFilter = native.seccompFilter('command');
  return cachedFilter;
}

/** System directories of the spec that exist on this host. */
export function existingSystemDirs() {
  return SYSTEM_DIRS.filter((d) => existsSync(d));
}

function enforced() {
  return Object.freeze({ enforced: true, backend: 'bwrap', reason: null });
}

function unenforced(reason, backend = 'none') {
  return Object.freeze({ enforced: false, backend, reason });
}

/** The stage binary bound into a sandbox: a root caller's launcher (uid 65534) may not traverse
 * the package's path, so it is staged as an idmapped clone; otherwise bound directly. */
export function stageBind(stage, asRoot, index = 0) {
  if (!asRoot) return { bind: { source: stage, target: stage }, mount: null };
  const staged = `${STAGING_DIR}/s${index}`;
  return {
    bind: { source: staged, target: stage },
    mount: { source: stage, target: staged, readonly: true, noexec: false, isFile: true },
  };
}

function probe() {
  return new Promise((resolve) => {
    const bwrap = bwrapPath();
    const stage = stagePath();
    const asRoot = process.geteuid() === 0;
    const { bind, mount } = stageBind(stage, asRoot);
    const argv = commandArgv({
      bwrap,
      systemDirs: existingSystemDirs(),
      mounts: [],
      stageFile: bind,
      cwd: '/',
      stage: stageArgv(stage, {
        limits: { coreBlocks: 0 },
        env: { PATH: '/usr/bin:/bin' },
        file: PROBE_COMMAND,
        args: [],
      }),
    });
    let proc;
    try {
      proc = spawnLauncher({
        file: bwrap,
        argv,
        mounts: mount ? [mount] : [],
        staging: mount ? STAGING_DIR : null,
        filter: commandFilter(),
      });
    } catch (err) {
      resolve(`bubblewrap could not be launched: ${err.message}`);
      return;
    }
    proc.closeStdin();
    let status = '';
    let stderr = '';
    const open = new Set(['stdout', 'stderr', 'control', 'status']);
    let exit = null;
    const finish = () => {
      if (exit === null || open.size > 0) return;
      clearTimeout(timer);
      const parsed = parseStatus(status);
      if (parsed && parsed.exit.code === 0) return resolve(null);
      const detail = stderr.trim().split('\n').pop() || `launcher exit ${JSON.stringify(exit)}`;
      resolve(`bubblewrap cannot create the sandbox on this host: ${detail}`);
    };
    const timer = setTimeout(() => {
      proc.kill();
      proc.unref();
      resolve(`bubblewrap did not finish a trial run within ${POSTURE_PROBE_TIMEOUT_MS} ms`);
    }, POSTURE_PROBE_TIMEOUT_MS);
    proc.status.on('data', (c) => {
      if (status.length < 256) status += c.toString('latin1');
    });
    proc.stderr.on('data', (c) => {
      if (stderr.length < 4096) stderr += c.toString('utf8');
    });
    for (const name of open) {
      proc[name].on('error', () => {});
      proc[name].on('close', () => {
        open.delete(name);
        finish();
      });
    }
    proc.stdout.resume();
    proc.control.resume();
    proc.onExit((e) => {
      exit = e;
      finish();
    });
  });
}

let probed = null;
let probeReason; // undefined until the probe settled, then null or the reason
let override = null;

/**
 * Test seam (not exported by the package: lib/posture.js is not in its exports map): makes
 * confinementPosture() resolve to `posture` until called again with null.
 */
export function setPostureForTesting(posture) {
  override = posture === null ? null : Object.freeze({ ...posture });
}

/**
 * The posture of this host, decided once per process (the probe result is cached; the host
 * checks are repeated on every call, so a removed or replaced bwrap is noticed).
 * Resolves to a frozen { enforced, backend, reason }; never rejects.
 */
export async function confinementPosture() {
  if (override) return override;
  const problem = hostProblem();
  if (problem) return unenforced(problem);
  probed ??= probe().then((reason) => (probeReason = reason));
  const reason = await probed;
  return reason === null ? enforced() : unenforced(reason, 'bwrap');
}

/**
 * The posture without waiting, when it is already decided (the probe settled): the same value
 * confinementPosture() resolves to, or null. Lets a caller stay synchronous after the first run.
 */
export function decidedPosture() {
  if (override) return override;
  if (probeReason === undefined) return null;
  const problem = hostProblem();
  if (problem) return unenforced(problem);
  return probeReason === null ? enforced() : unenforced(probeReason, 'bwrap');
}
