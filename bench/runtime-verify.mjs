// Warm cost of describeRuntime() and verifyRuntime() per call, in a tight loop.
// Usage: node bench/runtime-verify.mjs [calls=200] [rounds=5]
// Each round: `calls` calls of each after a warm-up of 50; prints µs/call (median of the
// rounds) and, for reference, the parts describeRuntime is made of when run separately.
import { realpathSync } from 'node:fs';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { bwrapPath, hostProblem, stagePath } from '../lib/host.js';
import { native } from '../lib/native.js';
import { describeRuntime, loaderConfig, verifyRuntime } from '../lib/runtime.js';

const calls = Number(process.argv[2] ?? 200);
const rounds = Number(process.argv[3] ?? 5);

function perCall(fn) {
  for (let i = 0; i < 50; i++) fn();
  const res = [];
  for (let r = 0; r < rounds; r++) {
    const t0 = performance.now();
    for (let i = 0; i < calls; i++) fn();
    res.push(((performance.now() - t0) * 1000) / calls);
  }
  res.sort((a, b) => a - b);
  return res[res.length >> 1];
}

const pin = describeRuntime().digest;
const rows = [
  ['describeRuntime()', () => describeRuntime()],
  ['verifyRuntime(pin)', () => {
    if (!verifyRuntime(pin).ok) throw new Error('verify failed');
  }],
];
if (process.argv.includes('--parts')) {
  const nodePath = realpathSync(process.execPath);
  const exes = [nodePath, bwrapPath(), stagePath()];
  const interp = native.elfInfoFile(nodePath).interp;
  const loaders = [loaderConfig(interp)];
  rows.push(
    ['  hostProblem()', () => hostProblem()],
    ['  realpath(node)', () => realpathSync(process.execPath)],
    ['  elfInfoFile x3', () => exes.forEach((e) => native.elfInfoFile(e))],
    ['  loaderConfig()', () => loaderConfig(interp)],
    ['  runtimeClosure()', () => native.runtimeClosure(exes, ['node', 'launcher', 'launcher'], loaders, '/etc/ld.so.cache', false)],
    ['  os.release/version', () => [os.release(), os.version()]],
  );
}
for (const [name, fn] of rows) console.log(`${name.padEnd(24)} ${perCall(fn).toFixed(1).padStart(8)} µs/call`);
