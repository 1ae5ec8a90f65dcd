// Run helpers of the boundary suite: confined runs of test/helpers/boundary-probe.mjs through
// the real executor, and the same probe unconfined (the negative control).
//
// Mutations: when CONFINED_TEST_MUTATION names entries of MUTATIONS (comma-separated), every
// confined run of this helper happens inside lib/testing.js withPatchedProfile with those
// patches combined. Only test/helpers reads the variable; test/helpers/mutate.mjs sets it.
import { spawn } from 'node:child_process';
import diagnostics from 'node:diagnostics_channel';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { EXECUTOR_CHANNEL } from '../../lib/constants.js';
import { ConfinedExecutor } from '../../lib/executor.js';
import { confinedProfile, toolPaths } from '../../lib/profile.js';
import { stageIndex } from './executor-fixture.js';
import { describeRuntime } from '../../lib/runtime.js';
import { snapshotDigest } from '../../lib/snapshot.js';
import { allowAllFilter, withPatchedProfile } from '../../lib/testing.js';

const here = path.dirname(fileURLToPath(import.meta.url));
export const PROBE_SOURCE = fs.readFileSync(path.join(here, 'boundary-probe.mjs'));
const CHILD_SOURCE = Buffer.from("setTimeout(() => {}, 4000);\n");

export const isRoot = process.geteuid() === 0;

/**
 * The mechanisms the mutation script switches off, as withPatchedProfile patches. Each returns
 * the argv/filter/mounts it was given with one layer removed.
 */
export const MUTATIONS = {
  // The seccomp layer: the stage installs a filter that allows every system call.
  seccomp: { filter: () => allowAllFilter() },
  // The noexec layer: the snapshot parts are staged without MS_NOEXEC.
  noexec: { mounts: (mounts) => mounts.map((m) => ({ ...m, noexec: false })) },
  // Mount isolation: the host's whole / is bound read-only at /, so every host path reads as
  // on the host. It goes right after the runtime closure (bwrap cannot create the closure's
  // alias symlinks over the host's existing /lib and the like) and before /proc, /dev/null and
  // the namespace parts, which still sit on top of it.
  mounts: {
    argv: (argv) => {
      const i = argv.indexOf('--proc');
      if (i < 0) throw new Error('no --proc in the bwrap argv');
      // As root the launcher's /tmp is its private staging tmpfs (lib/launch.js), read-only
      // once bound: a fresh tmpfs there lets bwrap create the namespace's mount points. The
      // host's /tmp is not visible to a root launcher anyway; the suite keeps its host
      // fixtures outside /tmp (openDir()).
      const tmp = process.geteuid() === 0 ? ['--tmpfs', '/tmp'] : [];
      return [...argv.slice(0, i), '--ro-bind', '/', '/', ...tmp, ...argv.slice(i)];
    },
  },
  // Read-only mounts: the namespace parts are staged and bound read-write, and the sandbox's
  // root is not remounted read-only (what stays: the uid, 65534, and the file-size limit 0).
  readonly: {
    mounts: (mounts) => mounts.map((m) => (m.isFile ? m : { ...m, readonly: false })),
    argv: (argv) => {
      const chdir = argv.indexOf('--chdir');
      const slot = path.dirname(argv[chdir + 1]);
      const out = [];
      for (let i = 0; i < argv.length; i++) {
        if (argv[i] === '--ro-bind' && argv[i + 2]?.startsWith(slot + '/')) out.push('--bind');
        else if (argv[i] === '--remount-ro' && argv[i + 1] === '/') i++;
        else out.push(argv[i]);
      }
      return out;
    },
  },
  // The gate's admission checks (canary unreadable, host tool absent) aimed at paths that
  // never exist: a detection layer, not a barrier, so it only shows in pairs (mounts+gate
  // exposes what the mount isolation alone guards once nothing refuses the run).
  gate: {
    pairOnly: true,
    argv: (argv) => {
      const i = stageIndex(argv, toolPaths().stage);
      if (argv[i + 6] !== 'gate') throw new Error('no gating stage in the bwrap argv');
      const copy = [...argv];
      copy[i + 7] = '/nonexistent-canary';
      copy[i + 8] = '/nonexistent-host-tool';
      return copy;
    },
  },
  // The network namespace: the sandbox shares the host's network stack.
  netns: { argv: (argv) => argv.filter((a) => a !== '--unshare-net') },
  // The pid namespace: the sandbox would see (and may signal) host processes. The stage
  // refuses to exec the program unless it is pid 2 (native/exe/stage.c), so this one fails
  // closed: no program runs at all.
  pidns: { argv: (argv) => argv.filter((a) => a !== '--unshare-pid' && a !== '--as-pid-1') },
};

/** Combines named mutations into one withPatchedProfile patch. */
export function mutationPatch(names) {
  const patch = {};
  for (const name of names) {
    const m = MUTATIONS[name];
    if (!m) throw new Error(`unknown mutation ${name}`);
    for (const key of ['argv', 'filter', 'mounts']) {
      if (!m[key]) continue;
      const prev = patch[key];
      patch[key] = prev ? (x) => m[key](prev(x)) : m[key];
    }
    if (m.parts) patch.parts = { ...patch.parts, ...m.parts };
  }
  return patch;
}

const activeMutation = (process.env.CONFINED_TEST_MUTATION ?? '').split(',').filter(Boolean);
export const mutated = activeMutation.length > 0;

/** Runs fn inside the active mutation (if any) and inside `extra` (a patch of the test's own). */
export async function underPatch(extra, fn) {
  if (!mutated && !extra) return fn();
  const patch = mutated ? mutationPatch(activeMutation) : {};
  if (extra) {
    for (const key of ['argv', 'filter', 'mounts']) {
      if (!extra[key]) continue;
      const prev = patch[key];
      patch[key] = prev ? (x) => extra[key](prev(x)) : extra[key];
    }
    if (extra.parts) patch.parts = { ...patch.parts, ...extra.parts };
  }
  return withPatchedProfile(patch, fn);
}

/** A fresh executor root: 0700, owned by the caller, under os.tmpdir(). */
export function makeRoot(prefix = 'confined-boundary-') {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  fs.chmodSync(dir, 0o700);
  return dir;
}

/**
 * Where host fixtures live: outside /tmp (a root launcher stages on a private /tmp, so host
 * files under /tmp would be hidden from a mutated sandbox for a reason other than the one
 * tested), in a sticky world-writable directory both root and nobody can use.
 */
export function fixtureBase() {
  for (const dir of ['/var/tmp', '/dev/shm']) {
    try {
      const st = fs.statSync(dir);
      if (st.isDirectory() && (st.mode & 0o1777) === 0o1777) return dir;
    } catch {
      // next
    }
  }
  return os.tmpdir();
}

/** A world-readable scratch directory (for host files the sandbox uid could read by DAC). */
export function makeOpenDir(prefix = 'confined-boundary-open-') {
  const dir = fs.mkdtempSync(path.join(fixtureBase(), prefix));
  fs.chmodSync(dir, 0o755);
  return dir;
}

export function snapshot(files) {
  const list = files.map((f) => ({ path: f.path, content: Buffer.from(f.content) }));
  return { files: list, digest: snapshotDigest(list) };
}

/** The program snapshot: the probe as entry, a forkable child, and any extra files. */
export function programFiles(extra = []) {
  return [
    { path: 'probe.mjs', content: PROBE_SOURCE },
    { path: 'child.cjs', content: CHILD_SOURCE },
    ...extra,
  ];
}

export const INPUT_FILE = 'data.txt';
export const INPUT_FILES = [{ path: INPUT_FILE, content: Buffer.from('input data\n') }];

let runtimeDigest = null;
function runtimePin() {
  runtimeDigest ??= describeRuntime().digest;
  return runtimeDigest;
}

/**
 * One confined run of the probe. Returns { result, lines (parsed probe lines by name), events,
 * profileDigest }. `onEvent(message)` sees the executor's diagnostics synchronously (the
 * `admitted` event fires before the go byte is sent). `patch` is a withPatchedProfile patch of
 * the test's own, applied on top of the active mutation.
 */
export async function runConfined({
  root,
  probes,
  config = {},
  extraFiles = [],
  cpuSeconds = 20,
  maxDescriptors = 64,
  timeoutMs = 60_000,
  maxOutputBytes = 1 << 20,
  maxRetained,
  onEvent,
  patch,
  executor,
  entry,
}) {
  const program = snapshot(programFiles(extraFiles));
  const input = snapshot(INPUT_FILES);
  const events = [];
  const listener = (message) => {
    if (root && message.namespace && !message.namespace.startsWith(root) && message.root !== root) return;
    events.push(message);
    onEvent?.(message);
  };
  diagnostics.subscribe(EXECUTOR_CHANNEL, listener);
  try {
    return await underPatch(patch, async () => {
      const ex = executor ?? new ConfinedExecutor(maxRetained ? { root, maxRetained } : { root });
      const profileDigest = confinedProfile().digest;
      const result = await ex.run({
        runtime: runtimePin(),
        profile: profileDigest,
        program: { ...program, entry: entry ?? 'probe.mjs', args: [JSON.stringify(config), ...probes] },
        input,
        timeoutMs,
        maxOutputBytes,
        cpuSeconds,
        maxDescriptors,
      });
      return { result, lines: parseLines(result.process?.stdout), events, profileDigest };
    });
  } finally {
    diagnostics.unsubscribe(EXECUTOR_CHANNEL, listener);
  }
}

export function parseLines(stdout) {
  const lines = {};
  if (!stdout) return lines;
  for (const line of stdout.toString().split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      const parsed = JSON.parse(line);
      lines[parsed.probe] = parsed;
    } catch {
      // not a probe line
    }
  }
  return lines;
}

/**
 * The negative control: the same probe, unconfined, as a plain node child of the test (same
 * uid), with a clean environment of the same five names pointing at writable scratch
 * directories, from a copy of the same program snapshot. Returns { lines, code, signal, dir,
 * child } where dir holds program/, home/, tmp/ and input/.
 */
export function runControl({
  probes,
  config = {},
  extraFiles = [],
  env,
  stdio,
  onSpawn,
  timeoutMs = 60_000,
}) {
  const dir = makeOpenDir('confined-boundary-control-');
  for (const sub of ['program', 'home', 'tmp', 'input']) fs.mkdirSync(path.join(dir, sub), { mode: 0o755 });
  for (const f of programFiles(extraFiles)) {
    const target = path.join(dir, 'program', f.path);
    fs.mkdirSync(path.dirname(target), { recursive: true });
    fs.writeFileSync(target, f.content);
  }
  for (const f of INPUT_FILES) fs.writeFileSync(path.join(dir, 'input', f.path), f.content);
  const childEnv = env ?? {
    LC_ALL: 'C',
    TZ: 'UTC',
    HOME: path.join(dir, 'home'),
    TMPDIR: path.join(dir, 'tmp'),
    OPENSSL_CONF: '/dev/null',
  };
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [path.join(dir, 'program', 'probe.mjs'), JSON.stringify(config), ...probes],
      { cwd: path.join(dir, 'input'), env: childEnv, stdio: stdio ?? ['ignore', 'pipe', 'pipe'] },
    );
    const out = [];
    const err = [];
    child.stdout.on('data', (c) => out.push(c));
    child.stderr?.on('data', (c) => err.push(c));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', reject);
    onSpawn?.(child);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const stdout = Buffer.concat(out).toString();
      resolve({ lines: parseLines(stdout), stdout, stderr: Buffer.concat(err).toString(), code, signal, dir, child });
    });
  });
}

/** Host pids whose cmdline contains `needle` (excluding this process). */
export function hostPidsWith(needle) {
  const found = [];
  for (const e of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(e) || Number(e) === process.pid) continue;
    try {
      if (fs.readFileSync(`/proc/${e}/cmdline`, 'latin1').includes(needle)) found.push(Number(e));
    } catch {
      // gone
    }
  }
  return found;
}

/** Children of a host pid (from /proc/<pid>/task/<pid>/children). */
export function childrenOf(pid) {
  try {
    return fs
      .readFileSync(`/proc/${pid}/task/${pid}/children`, 'latin1')
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map(Number);
  } catch {
    return [];
  }
}

export function uniqueMarker(tag) {
  return `${tag}-${process.pid}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
}
