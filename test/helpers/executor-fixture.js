// Shared fixture for suites that run ConfinedExecutor for real: a private executor root under
// os.tmpdir() (so the suites also run as nobody), fresh pins, snapshots, run requests, the
// diagnostics channel, and host-side probes (root listing, child processes, open descriptors).
// Every expectation a suite derives from these helpers is computed on the host, independently
// of the executor's own result.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import diagnostics from 'node:diagnostics_channel';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ConfinedExecutor } from '../../lib/executor.js';
import { EXECUTOR_CHANNEL } from '../../lib/constants.js';
import { confinedProfile } from '../../lib/profile.js';
import { describeRuntime } from '../../lib/runtime.js';
import { snapshotDigest } from '../../lib/snapshot.js';

export const isRoot = process.geteuid() === 0;

/**
 * A fresh private directory `base` (0700, canonical) holding the executor root `base/root`
 * (0700). Removed after the test, quarantined namespaces included.
 */
export function makeRoot(t, { maxRetained } = {}) {
  const base = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'confined-exec-')));
  fs.chmodSync(base, 0o700);
  const root = path.join(base, 'root');
  fs.mkdirSync(root, { mode: 0o700 });
  fs.chmodSync(root, 0o700);
  t?.after(() => fs.rmSync(base, { recursive: true, force: true }));
  const options = maxRetained === undefined ? { root } : { root, maxRetained };
  return { base, root, executor: new ConfinedExecutor(options) };
}

let runtimeDigest = null;
/**
 * The pins a caller passes: the runtime digest (computed once per process) and the digest
 * of the profile active now (a patched profile, lib/testing.js, has its own).
 */
export function pins() {
  runtimeDigest ??= describeRuntime().digest;
  return { runtime: runtimeDigest, profile: confinedProfile().digest };
}

const bytes = (c) => new Uint8Array(typeof c === 'string' ? Buffer.from(c) : c);

/** A snapshot from { path: string | Uint8Array }: { files, digest }. */
export function snapshot(files) {
  const list = Object.entries(files).map(([p, c]) => ({ path: p, content: bytes(c) }));
  return { files: list, digest: snapshotDigest(list) };
}

/** Default input: one file the program can read from its cwd. */
export const INPUT = Object.freeze({ 'data.txt': 'input data\n' });

/**
 * A run request for the program `source` (its entry main.mjs unless `entry` says otherwise).
 * `files` adds program files; everything else overrides the defaults below.
 */
export function request(source, opts = {}) {
  const {
    entry = 'main.mjs',
    files = {},
    input = INPUT,
    args = [],
    timeoutMs = 60_000,
    maxOutputBytes = 1 << 20,
    cpuSeconds = 60,
    maxDescriptors = 64,
    pin = pins(),
  } = opts;
  const program = snapshot({ [entry]: source, ...files });
  const inputSnapshot = snapshot(input);
  return {
    runtime: pin.runtime,
    profile: pin.profile,
    program: { files: program.files, digest: program.digest, entry, args },
    input: { files: inputSnapshot.files, digest: inputSnapshot.digest },
    timeoutMs,
    maxOutputBytes,
    cpuSeconds,
    maxDescriptors,
  };
}

/** A string a program prints only when its entry runs: proves whether it ran. */
export function marker() {
  return `entry-ran-${crypto.randomBytes(6).toString('hex')}`;
}

/** Sorted entries of a directory. */
export function listing(dir) {
  return fs.readdirSync(dir).sort();
}

/**
 * Subscribes fn(message) to one event of EXECUTOR_CHANNEL (all events when `event` is null)
 * for the rest of the test. Returns the unsubscribe function.
 */
export function onEvent(t, event, fn) {
  const handler = (message) => {
    if (event === null || message.event === event) fn(message);
  };
  diagnostics.subscribe(EXECUTOR_CHANNEL, handler);
  let done = false;
  const off = () => {
    if (done) return;
    done = true;
    diagnostics.unsubscribe(EXECUTOR_CHANNEL, handler);
  };
  t?.after(off);
  return off;
}

/** Every event published on the channel while fn runs (awaited). */
export async function recordEvents(fn) {
  const events = [];
  const handler = (message) => events.push(message);
  diagnostics.subscribe(EXECUTOR_CHANNEL, handler);
  try {
    return { value: await fn(), events };
  } finally {
    diagnostics.unsubscribe(EXECUTOR_CHANNEL, handler);
  }
}

function procStat(pid) {
  try {
    const text = fs.readFileSync(`/proc/${pid}/stat`, 'latin1');
    // comm may hold spaces and parentheses: the fields after it follow the last ')'.
    const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return { state: rest[0], ppid: Number(rest[1]) };
  } catch {
    return null;
  }
}

function cmdline(pid) {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'latin1');
  } catch {
    return '';
  }
}

/** Pids of live processes whose parent is `pid`, or whose command line contains `needle`. */
export function processesOf(pid = process.pid, needle = null) {
  const out = [];
  for (const name of fs.readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(name) || Number(name) === process.pid) continue;
    const st = procStat(name);
    if (!st) continue;
    if (st.ppid === pid || (needle !== null && cmdline(name).includes(needle)))
      out.push(Number(name));
  }
  return out;
}

/** Open descriptors of this process. */
export function openDescriptors() {
  return fs.readdirSync('/proc/self/fd').length;
}

/**
 * Asserts that a run left nothing on the host: no namespace (the root is empty) and no
 * child process of this process or process naming the root.
 */
export function assertNothingLeft(root, { except = [] } = {}) {
  assert.deepEqual(listing(root), [], 'no namespace is left in the root');
  const left = processesOf(process.pid, root).filter((pid) => !except.includes(pid));
  assert.deepEqual(left, [], 'no process is left');
}

/** Decoded stdout/stderr of an observed result. */
export function text(result) {
  return {
    stdout: result.process.stdout.toString('utf8'),
    stderr: result.process.stderr.toString('utf8'),
  };
}

/** Waits, blocking (as a channel subscriber must), until `file` exists or `ms` passed. */
export function awaitFile(file, ms) {
  const end = performance.now() + ms;
  while (!fs.existsSync(file) && performance.now() < end) blockFor(1);
}

/** Blocks this thread for ms milliseconds (the event loop included). */
export function blockFor(ms) {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/**
 * The stage's argv index in a bwrap argv: its last occurrence (the stage is also bound into the
 * sandbox as a runtime file; its own argv comes last, after bwrap's options).
 */
export function stageIndex(argv, stagePath) {
  const i = argv.lastIndexOf(stagePath);
  assert.ok(i > 0, 'the stage is in the bwrap argv');
  return i;
}
