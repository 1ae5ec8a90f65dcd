// A trivial ConfinedExecutor.run() end to end against spawning `env -i node` on the same
// program, in one process, interleaved (the order alternates per round), after a warm-up.
// Prints medians, minimums and maximums in milliseconds, the ratio of the medians, and the
// median time of each phase of run() (from the diagnostics channel's events):
//   start -> counted:        validation, host check, profile, runtime verify, root check, count
//   counted -> materialised: slot claim, namespace write
//   materialised -> launched: launch plan, pre-launch verify, spawn (fork, staging, exec bwrap)
//   launched -> admitted:    bwrap, the stage and its gate (the admission record arrives)
//   admitted -> collected:   go, the program, exit, settle, runtime re-verify, removal + fsync
//   collected -> resolved:   the result is shaped and frozen
// Usage: node bench/executor-run.mjs [rounds, default 25] [warm-up, default 5]
import { spawn } from 'node:child_process';
import diagnostics from 'node:diagnostics_channel';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ConfinedExecutor } from '../lib/executor.js';
import { EXECUTOR_CHANNEL } from '../lib/constants.js';
import { confinedProfile } from '../lib/profile.js';
import { describeRuntime } from '../lib/runtime.js';
import { snapshotDigest } from '../lib/snapshot.js';

const rounds = Number(process.argv[2] ?? 25);
const warmup = Number(process.argv[3] ?? 5);
const SOURCE = 'console.log("hello");\n';

const base = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'confined-bench-run-')));
const root = path.join(base, 'root');
fs.mkdirSync(root, { mode: 0o700 });
const plain = path.join(base, 'plain');
fs.mkdirSync(plain);
fs.writeFileSync(path.join(plain, 'main.mjs'), SOURCE);
fs.writeFileSync(path.join(plain, 'data.txt'), 'input data\n');

const executor = new ConfinedExecutor({ root });
const program = [{ path: 'main.mjs', content: new Uint8Array(Buffer.from(SOURCE)) }];
const input = [{ path: 'data.txt', content: new Uint8Array(Buffer.from('input data\n')) }];
const request = {
  runtime: describeRuntime().digest,
  profile: confinedProfile().digest,
  program: { files: program, digest: snapshotDigest(program), entry: 'main.mjs', args: [] },
  input: { files: input, digest: snapshotDigest(input) },
  timeoutMs: 60_000,
  maxOutputBytes: 1 << 20,
  cpuSeconds: 60,
  maxDescriptors: 64,
};

const PHASES = ['counted', 'materialised', 'launched', 'admitted', 'collected'];
let marks = null;
diagnostics.subscribe(EXECUTOR_CHANNEL, (m) => {
  if (marks) marks[m.event] = performance.now();
});

async function confined() {
  marks = { start: performance.now() };
  const result = await executor.run(request);
  marks.resolved = performance.now();
  if (result.status !== 'observed' || !result.attributable || result.process.stdout.toString() !== 'hello\n')
    throw new Error(`run failed: ${JSON.stringify({ ...result, process: undefined })}`);
  const m = marks;
  marks = null;
  return m;
}

function plainNode() {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn('/usr/bin/env', ['-i', process.execPath, path.join(plain, 'main.mjs')], {
      cwd: plain,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const out = [];
    child.stdout.on('data', (c) => out.push(c));
    child.on('error', reject);
    child.on('close', (code) => {
      const elapsed = performance.now() - t0;
      if (code !== 0 || Buffer.concat(out).toString() !== 'hello\n') reject(new Error('env -i node failed'));
      else resolve(elapsed);
    });
  });
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
};
const fmt = (x) => x.toFixed(1);

for (let i = 0; i < warmup; i++) {
  await confined();
  await plainNode();
}
const ours = [];
const theirs = [];
const phases = Object.fromEntries([...PHASES, 'resolved'].map((p) => [p, []]));
for (let i = 0; i < rounds; i++) {
  const order = i % 2 === 0 ? ['ours', 'theirs'] : ['theirs', 'ours'];
  for (const which of order) {
    if (which === 'theirs') {
      theirs.push(await plainNode());
      continue;
    }
    const m = await confined();
    ours.push(m.resolved - m.start);
    let prev = m.start;
    for (const p of [...PHASES, 'resolved']) {
      phases[p].push(m[p] - prev);
      prev = m[p];
    }
  }
}
fs.rmSync(base, { recursive: true, force: true });

const line = (label, xs) =>
  `${label.padEnd(14)} median ${fmt(median(xs))}  min ${fmt(Math.min(...xs))}  max ${fmt(Math.max(...xs))}`;
console.log(`executor run vs env -i node, ${rounds} rounds each after ${warmup} warm-up, ms`);
console.log(line('run()', ours));
console.log(line('env -i node', theirs));
console.log(`ratio of medians ${(median(ours) / median(theirs)).toFixed(3)}x, of minimums ${(Math.min(...ours) / Math.min(...theirs)).toFixed(3)}x`);
console.log('run() phases (median ms):');
let prev = 'start';
for (const p of [...PHASES, 'resolved']) {
  console.log(`  ${`${prev} -> ${p}`.padEnd(28)} ${fmt(median(phases[p]))}`);
  prev = p;
}
