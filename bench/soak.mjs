// npm run soak: many executor runs in one process (issue 10), a mix of clean exits, timeouts,
// output floods, aborts and crashes (process.abort, a throw). Every SAMPLE_EVERY runs it samples
// the host process: open descriptors (/proc/self/fd), RSS (after a full GC), threads
// (/proc/self/status), zombie children, leftover processes (children of this process, and any
// process whose command line carries this soak's marker), and the entries left in the executor
// root (only the quarantines the results reported are allowed). Prints a table and exits 1 if
// descriptors or threads grow after warm-up, RSS grows more than 20% after warm-up, a zombie or
// a leftover process remains, an unexpected namespace remains, or a run ends otherwise than
// its kind requires.
//
//   CONFINED_SOAK_RUNS      executor runs (default 1000; CI uses 100)
//   CONFINED_SOAK_RSS_GROWTH  allowed RSS growth after warm-up (default 0.2), or 'off'
//   CONFINED_SOAK_COMMANDS  command-runner runs (default: as many as CONFINED_SOAK_RUNS), through
//                           runConfinedCommand; skipped with a message while it is the placeholder
import { chmodSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { ConfinedExecutor } from '../lib/executor.js';
import { hostProblem } from '../lib/host.js';
import { confinedProfile } from '../lib/profile.js';
import { describeRuntime } from '../lib/runtime.js';
import { snapshotDigest } from '../lib/snapshot.js';
import { ConfinementError, runConfinedCommand } from '../lib/confinement.js';

const RUNS = Number(process.env.CONFINED_SOAK_RUNS ?? 1000);
const COMMANDS = Number(process.env.CONFINED_SOAK_COMMANDS ?? RUNS);
const SAMPLE_EVERY = 50;
const WARMUP = Math.max(SAMPLE_EVERY, Math.round(RUNS / 10 / SAMPLE_EVERY) * SAMPLE_EVERY);
// CONFINED_SOAK_RSS_GROWTH=off disables the RSS judgement (under ASan, whose quarantine holds
// freed memory); otherwise the allowed growth after warm-up, 0.2 by default.
const RSS_GROWTH =
  process.env.CONFINED_SOAK_RSS_GROWTH === 'off' ? Infinity : Number(process.env.CONFINED_SOAK_RSS_GROWTH ?? 0.2);
const MARKER = `confined-soak-${process.pid}-${Date.now()}`;

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc');

// ---- Host sampling ---------------------------------------------------------------------------

function threads() {
  const m = /^Threads:\s+(\d+)$/m.exec(readFileSync('/proc/self/status', 'utf8'));
  return Number(m[1]);
}

/** Every process on the host: pid, ppid, state, cmdline (processes that vanish are skipped). */
function processes() {
  const out = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      // comm may hold spaces and parentheses: the fields after the last ')' are fixed.
      const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const cmdline = readFileSync(`/proc/${name}/cmdline`, 'utf8').replaceAll('\0', ' ');
      out.push({ pid: Number(name), state: rest[0], ppid: Number(rest[1]), cmdline });
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

function sample(runs, root, quarantined) {
  gc();
  gc();
  const procs = processes();
  const children = procs.filter((p) => p.ppid === process.pid);
  const marked = procs.filter((p) => p.pid !== process.pid && p.cmdline.includes(MARKER));
  const entries = readdirSync(root);
  return {
    runs,
    fds: readdirSync('/proc/self/fd').length,
    rssMiB: process.memoryUsage().rss / 1048576,
    threads: threads(),
    zombies: children.filter((p) => p.state === 'Z').length,
    children: children.length,
    marked: marked.length,
    entries: entries.length,
    quarantined: quarantined.size,
    unexpected: entries.filter((e) => !quarantined.has(path.join(root, e))),
    leftovers: [...children, ...marked].map((p) => `${p.pid} ${p.state} ${p.cmdline.slice(0, 80)}`),
  };
}

// ---- Executor runs ---------------------------------------------------------------------------

const PROGRAM = Buffer.from(`
const mode = process.argv[2];
if (mode === 'clean') process.stdout.write('ok');
else if (mode === 'timeout' || mode === 'abort') setInterval(() => {}, 1000);
else if (mode === 'flood') {
  const chunk = Buffer.alloc(65536, 120);
  const pump = () => { while (process.stdout.write(chunk)); process.stdout.once('drain', pump); };
  pump();
} else if (mode === 'crash-abort') process.abort();
else if (mode === 'crash-throw') throw new Error('soak crash');
`);
const KINDS = ['clean', 'timeout', 'flood', 'abort', 'crash-abort', 'crash-throw', 'clean', 'clean'];
/** One run of each kind: after it every once-per-process resource exists (a sample is taken). */
const FIRST_ROUND = KINDS.length;

/** Whether a result is what its kind must give; a string says why not. */
function judge(kind, r) {
  if (r.status === 'not-started') {
    return kind === 'abort' && r.reason === 'aborted' ? null : `not-started ${r.reason}: ${r.message}`;
  }
  if (r.status !== 'observed') return `${r.status}: ${r.problems.join('; ')}`;
  const p = r.process;
  const want = {
    clean: () => r.attributable && p.exit?.code === 0 && String(p.stdout) === 'ok',
    timeout: () => p.stopped === 'timeout' && p.exit !== null,
    flood: () => p.stopped === 'output-limit' && p.exit !== null,
    abort: () => p.stopped === 'cancelled' || (p.stopped === null && p.admission !== 'admitted'),
    'crash-abort': () => r.attributable && p.exit?.signal === 'SIGABRT',
    'crash-throw': () => r.attributable && p.exit?.code === 1,
  }[kind];
  if (want()) return null;
  return `stopped ${p.stopped}, exit ${JSON.stringify(p.exit)}, admission ${p.admission}, problems ${r.problems.join('; ')}`;
}

async function executorRuns(root, quarantined, rows, outcomes, failures) {
  const executor = new ConfinedExecutor({ root, maxRetained: 64 });
  const files = [{ path: 'main.cjs', content: PROGRAM }];
  const input = [{ path: 'data.txt', content: Buffer.from('soak') }];
  const base = {
    runtime: describeRuntime().digest,
    profile: confinedProfile().digest,
    input: { files: input, digest: snapshotDigest(input) },
    maxOutputBytes: 4096,
    cpuSeconds: 30,
    maxDescriptors: 64,
  };
  const started = performance.now();
  for (let i = 1; i <= RUNS; i++) {
    const kind = KINDS[i % KINDS.length];
    const request = {
      ...base,
      program: { files, digest: snapshotDigest(files), entry: 'main.cjs', args: [kind, MARKER] },
      timeoutMs: kind === 'timeout' ? 400 : 30_000,
    };
    let signal;
    let timer;
    if (kind === 'abort') {
      const controller = new AbortController();
      signal = controller.signal;
      timer = setTimeout(() => controller.abort(new Error('soak abort')), 150 + (i % 5) * 100);
    }
    const r = await executor.run(request, signal);
    clearTimeout(timer);
    if (r.namespace?.state === 'quarantined') quarantined.add(r.namespace.path);
    const why = judge(kind, r);
    const key = `${kind}: ${why === null ? 'as required' : 'UNEXPECTED'}`;
    outcomes.set(key, (outcomes.get(key) ?? 0) + 1);
    if (why !== null && failures.length < 10) failures.push(`run ${i} (${kind}): ${why}`);
    if (i === FIRST_ROUND || i % SAMPLE_EVERY === 0 || i === RUNS) {
      rows.push(sample(i, root, quarantined));
      if (process.env.CONFINED_SOAK_PROGRESS) console.log(table(rows.slice(-1)).split('\n')[1]);
    }
  }
  return (performance.now() - started) / 1000;
}

// ---- Command-runner runs (hook) ------------------------------------------------------------

/** true when lib/confinement.js still holds the placeholder. */
async function commandRunnerIsPlaceholder() {
  try {
    await runConfinedCommand();
  } catch (error) {
    return error instanceof ConfinementError && error.message === 'not implemented';
  }
  return false;
}

const COMMAND_KINDS = [
  { kind: 'clean', command: '/bin/sh', args: ['-c', 'echo ok'], limits: {} },
  { kind: 'timeout', command: '/bin/sh', args: ['-c', 'sleep 60'], limits: { wallTimeoutMs: 300 } },
  { kind: 'flood', command: '/bin/sh', args: ['-c', 'while :; do echo floodfloodflood; done'], limits: { maxStdoutBytes: 4096, wallTimeoutMs: 10_000 } },
  { kind: 'abort', command: '/bin/sh', args: ['-c', 'sleep 60'], limits: {}, abortMs: 200 },
  { kind: 'crash-abort', command: '/bin/sh', args: ['-c', 'kill -ABRT $$'], limits: {} },
  { kind: 'crash-exit', command: '/bin/sh', args: ['-c', 'exit 3'], limits: {} },
];

function judgeCommand(kind, r) {
  const ok = {
    clean: () => r.code === 0 && r.confined,
    timeout: () => r.timedOut,
    flood: () => r.truncated || r.timedOut,
    abort: () => r.aborted,
    'crash-abort': () => r.signal === 'SIGABRT',
    'crash-exit': () => r.code === 3,
  }[kind];
  return ok() ? null : JSON.stringify(r);
}

async function commandRuns(root, quarantined, rows, outcomes, failures) {
  const cwd = mkdtempSync(path.join(os.tmpdir(), 'confined-soak-cwd-'));
  const started = performance.now();
  try {
    for (let i = 1; i <= COMMANDS; i++) {
      const spec = COMMAND_KINDS[i % COMMAND_KINDS.length];
      const controller = new AbortController();
      const timer = spec.abortMs ? setTimeout(() => controller.abort(), spec.abortMs) : null;
      let why;
      try {
        const handle = await runConfinedCommand({
          command: spec.command,
          // The marker rides along as $0 of the shell: visible in /proc/<pid>/cmdline.
          args: [...spec.args, MARKER],
          cwd,
          mounts: [{ path: cwd, mode: 'ro' }],
          limits: spec.limits,
          signal: controller.signal,
        });
        handle.stdout.resume();
        handle.stderr.resume();
        why = judgeCommand(spec.kind, await handle.wait());
      } catch (error) {
        why = `rejected: ${error?.code ?? ''} ${error?.message}`;
      }
      clearTimeout(timer);
      const key = `command ${spec.kind}: ${why === null ? 'as required' : 'UNEXPECTED'}`;
      outcomes.set(key, (outcomes.get(key) ?? 0) + 1);
      if (why !== null && failures.length < 20) failures.push(`command ${i} (${spec.kind}): ${why}`);
      if (i === FIRST_ROUND || i % SAMPLE_EVERY === 0 || i === COMMANDS) rows.push({ ...sample(i, root, quarantined), runs: `c${i}` });
    }
  } finally {
    rmSync(cwd, { recursive: true, force: true });
  }
  return (performance.now() - started) / 1000;
}

// ---- Report ----------------------------------------------------------------------------------

function table(rows) {
  const head = ['runs', 'fds', 'rss MiB', 'threads', 'zombies', 'children', 'marked', 'root entries', 'quarantined'];
  const lines = [head.join('\t')];
  for (const r of rows) {
    lines.push(
      [r.runs, r.fds, r.rssMiB.toFixed(1), r.threads, r.zombies, r.children, r.marked, r.entries, r.quarantined].join('\t'),
    );
  }
  return lines.join('\n');
}

/** Problems of one series of samples, judged after its warm-up sample. */
function verdict(rows, label) {
  const problems = [];
  // After WARMUP runs, or (a short soak) after the first round, when every once-per-process
  // resource exists (the posture probe, a root caller's idmap user namespace descriptor).
  const runsOf = (r) => Number(String(r.runs).replace('c', ''));
  const baseline =
    rows.find((r) => runsOf(r) >= WARMUP && r !== rows[rows.length - 1]) ??
    rows.find((r) => runsOf(r) >= FIRST_ROUND) ??
    rows[0];
  const last = rows[rows.length - 1];
  if (!baseline || !last) return problems;
  if (last.fds > baseline.fds) problems.push(`${label}: descriptors grew ${baseline.fds} -> ${last.fds}`);
  if (last.threads > baseline.threads) problems.push(`${label}: threads grew ${baseline.threads} -> ${last.threads}`);
  if (last.rssMiB > baseline.rssMiB * (1 + RSS_GROWTH)) {
    problems.push(`${label}: RSS grew ${baseline.rssMiB.toFixed(1)} -> ${last.rssMiB.toFixed(1)} MiB (> ${RSS_GROWTH * 100}%)`);
  }
  for (const r of rows) {
    if (r.zombies || r.children || r.marked) problems.push(`${label} at ${r.runs}: leftover processes ${r.leftovers.join(' | ')}`);
    if (r.unexpected.length) problems.push(`${label} at ${r.runs}: unexpected root entries ${r.unexpected.join(', ')}`);
  }
  return problems;
}

async function main() {
  const problem = hostProblem();
  if (problem) {
    console.error(`soak: this host cannot run the executor: ${problem}`);
    process.exit(1);
  }
  const root = mkdtempSync(path.join(os.tmpdir(), 'confined-soak-'));
  chmodSync(root, 0o700);
  const quarantined = new Set();
  const outcomes = new Map();
  const failures = [];
  const problems = [];
  console.log(`soak: ${RUNS} executor runs, samples every ${SAMPLE_EVERY}, warm-up ${WARMUP}, root ${root}, marker ${MARKER}`);
  const rows = [sample(0, root, quarantined)];
  const seconds = await executorRuns(root, quarantined, rows, outcomes, failures);
  console.log(table(rows));
  console.log(`executor: ${RUNS} runs in ${seconds.toFixed(1)} s (${((seconds * 1000) / Math.max(RUNS, 1)).toFixed(0)} ms per run)`);
  problems.push(...verdict(rows, 'executor'));

  if (COMMANDS > 0) {
    if (await commandRunnerIsPlaceholder()) {
      console.log('commands: skipped: runConfinedCommand is still the placeholder (lib/confinement.js)');
    } else {
      const crows = [sample('c0', root, quarantined)];
      const cs = await commandRuns(root, quarantined, crows, outcomes, failures);
      console.log(table(crows));
      console.log(`commands: ${COMMANDS} runs in ${cs.toFixed(1)} s`);
      problems.push(...verdict(crows, 'commands'));
    }
  }

  console.log('outcomes:');
  for (const [key, n] of [...outcomes].sort()) console.log(`  ${String(n).padStart(5)}  ${key}`);
  if (quarantined.size) console.log(`quarantined namespaces (reported by their results): ${[...quarantined].join(', ')}`);
  for (const f of failures) problems.push(`unexpected outcome: ${f}`);
  // Open descriptors by target, for a failing run to be diagnosable.
  if (problems.length) {
    const fds = readdirSync('/proc/self/fd').map((fd) => {
      try {
        return readlinkSync(`/proc/self/fd/${fd}`);
      } catch {
        return '?';
      }
    });
    console.log(`open descriptors now: ${fds.join(', ')}`);
    console.log('soak FAILED:');
    for (const p of problems) console.log(`  ${p}`);
    process.exitCode = 1;
  } else {
    console.log(`soak passed: descriptors and threads flat, RSS ${RSS_GROWTH === Infinity ? 'not judged' : `within ${RSS_GROWTH * 100}%`} after warm-up, no zombie, leftover process or unexpected namespace`);
  }
  // Quarantines are kept for inspection; an empty root is removed.
  if (readdirSync(root).length === 0) rmSync(root, { recursive: true });
}

await main();
