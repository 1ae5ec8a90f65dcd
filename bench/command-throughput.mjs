// Command runner throughput and start-up cost, in one process:
// 1. a command writing 1 GiB to stdout (`head -c 1073741824 /dev/zero`) through
//    runConfinedCommand (stdout cap 2 GiB) vs plain child_process.spawn of the same command;
//    throughput ratio (target >= 0.8x);
// 2. start-to-exit of `true` through runConfinedCommand vs bwrap running `true` directly with
//    the same namespaces and binds (no stage, no seccomp) (target <= 1.7x).
// Runs alternate between the two sides; medians are reported. Usage:
//   node bench/command-throughput.mjs [runs=5] [bytes=1073741824]
import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BWRAP_POSTURE, SYSTEM_DIRS } from '../lib/bwrap.js';
import { runConfinedCommand } from '../lib/confinement.js';
import { bwrapPath } from '../lib/host.js';

const runs = Number(process.argv[2] ?? 5);
const bytes = Number(process.argv[3] ?? 1024 ** 3);
const dir = mkdtempSync(path.join(os.tmpdir(), 'confined-bench-'));
chmodSync(dir, 0o755);
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function confinedStream() {
  const t0 = performance.now();
  const h = await runConfinedCommand({
    command: '/usr/bin/head',
    args: ['-c', String(bytes), '/dev/zero'],
    cwd: dir,
    mounts: [{ path: dir, mode: 'ro' }],
    limits: { maxStdoutBytes: 2 * 1024 ** 3 },
  });
  let got = 0;
  h.stdout.on('data', (c) => (got += c.length));
  const r = await h.wait();
  await new Promise((res) => (h.stdout.readableEnded ? res() : h.stdout.once('end', res)));
  const ms = performance.now() - t0;
  if (got !== bytes || r.code !== 0) throw new Error(`confined: got ${got} bytes, ${JSON.stringify(r)}`);
  return ms;
}

function plainStream() {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const c = spawn('/usr/bin/head', ['-c', String(bytes), '/dev/zero'], { stdio: ['ignore', 'pipe', 'ignore'] });
    let got = 0;
    c.stdout.on('data', (b) => (got += b.length));
    c.on('close', (code) => {
      const ms = performance.now() - t0;
      if (got !== bytes || code !== 0) reject(new Error(`plain: got ${got}, code ${code}`));
      else resolve(ms);
    });
  });
}

async function confinedTrue() {
  const t0 = performance.now();
  const h = await runConfinedCommand({ command: '/bin/true', cwd: dir, mounts: [{ path: dir, mode: 'ro' }] });
  const r = await h.wait();
  if (r.code !== 0) throw new Error(JSON.stringify(r));
  return performance.now() - t0;
}

function bwrapTrue() {
  const argv = [
    ...BWRAP_POSTURE,
    ...SYSTEM_DIRS.filter((d) => existsSync(d)).flatMap((d) => ['--ro-bind', d, d]),
    '--ro-bind',
    dir,
    dir,
    '--proc',
    '/proc',
    '--dev',
    '/dev',
    '--chdir',
    dir,
    '/bin/true',
  ];
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const c = spawn(bwrapPath(), argv, { stdio: 'ignore', env: {} });
    c.on('close', (code) => (code === 0 ? resolve(performance.now() - t0) : reject(new Error(`bwrap exit ${code}`))));
  });
}

try {
  await confinedTrue(); // the one-time posture probe is not part of the figures
  const conf = [];
  const plain = [];
  const cpu = { conf: [], plain: [] };
  const cpuMs = (u) => (u.user + u.system) / 1000;
  for (let i = 0; i < runs; i++) {
    let u = process.cpuUsage();
    plain.push(await plainStream());
    cpu.plain.push(cpuMs(process.cpuUsage(u)));
    u = process.cpuUsage();
    conf.push(await confinedStream());
    cpu.conf.push(cpuMs(process.cpuUsage(u)));
  }
  const gib = bytes / 1024 ** 3;
  const confRate = gib / (median(conf) / 1000);
  const plainRate = gib / (median(plain) / 1000);
  console.log(`stream ${bytes} bytes, ${runs} runs each (median)`);
  console.log(`  child_process.spawn : ${median(plain).toFixed(0)} ms  ${plainRate.toFixed(2)} GiB/s  runs ${plain.map((x) => x.toFixed(0)).join(' ')}`);
  console.log(`  runConfinedCommand  : ${median(conf).toFixed(0)} ms  ${confRate.toFixed(2)} GiB/s  runs ${conf.map((x) => x.toFixed(0)).join(' ')}`);
  console.log(`  throughput ratio confined/plain: ${(confRate / plainRate).toFixed(2)}x (target >= 0.8x)`);
  console.log(`  host node CPU (user+sys, median): plain ${median(cpu.plain).toFixed(0)} ms, confined ${median(cpu.conf).toFixed(0)} ms`);

  const ct = [];
  const bt = [];
  const startRuns = Math.max(runs * 4, 20);
  for (let i = 0; i < startRuns; i++) {
    bt.push(await bwrapTrue());
    ct.push(await confinedTrue());
  }
  console.log(`start-to-exit of true, ${startRuns} runs each (median)`);
  console.log(`  bwrap directly      : ${median(bt).toFixed(1)} ms`);
  console.log(`  runConfinedCommand  : ${median(ct).toFixed(1)} ms`);
  console.log(`  ratio confined/bwrap: ${(median(ct) / median(bt)).toFixed(2)}x (target <= 1.7x)`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
