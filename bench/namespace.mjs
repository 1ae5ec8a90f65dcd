// Namespace lifecycle timings: claim+materialise, verify (the pre-launch check on every
// run's hot path) and remove, for a 10-file, 64 KiB program (plus a small input), and for
// a larger tree. Prints medians and 90th percentiles in milliseconds.
//   node bench/namespace.mjs [iterations] [directory for the root, default os.tmpdir()]
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as ns from '../lib/namespace.js';

const iterations = Number(process.argv[2] ?? 300);
const where = process.argv[3] ?? os.tmpdir();

function files(count, total, dir = 'src') {
  const out = [];
  for (let i = 0; i < count; i++) {
    const size = Math.floor(total / count) + (i < total % count ? 1 : 0);
    out.push({ path: `${dir}/m${i % 7}/file${i}.js`, content: new Uint8Array(crypto.randomBytes(size)) });
  }
  return out;
}

function quantile(sorted, q) {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

function run(label, tree) {
  const base = fs.realpathSync(fs.mkdtempSync(path.join(where, 'confined-bench-')));
  const root = path.join(base, 'root');
  fs.mkdirSync(root, { mode: 0o700 });
  const times = { materialise: [], verify: [], remove: [], total: [] };
  const ms = (a, b) => Number(b - a) / 1e6;
  for (let i = 0; i < iterations; i++) {
    const t0 = process.hrtime.bigint();
    const slot = ns.claimSlot(root, 8);
    const made = ns.materialise(slot.path, tree);
    const t1 = process.hrtime.bigint();
    const v = ns.verify(made.manifest);
    const t2 = process.hrtime.bigint();
    const gone = ns.remove(made.manifest);
    const t3 = process.hrtime.bigint();
    if (!made.ok || !v.ok || gone.state !== 'removed') throw new Error('lifecycle failed');
    times.materialise.push(ms(t0, t1));
    times.verify.push(ms(t1, t2));
    times.remove.push(ms(t2, t3));
    times.total.push(ms(t0, t3));
  }
  fs.rmSync(base, { recursive: true, force: true });
  const parts = Object.entries(times).map(([k, v]) => {
    v.sort((a, b) => a - b);
    return `${k} median ${quantile(v, 0.5).toFixed(3)} p90 ${quantile(v, 0.9).toFixed(3)}`;
  });
  console.log(`${label} in ${where} (${iterations} runs, ms): ${parts.join('; ')}`);
}

run('10 files, 64 KiB program + 1 input file', {
  program: files(10, 64 * 1024),
  input: [{ path: 'input.txt', content: new Uint8Array(Buffer.from('input\n')) }],
  canary: [{ path: 'canary', content: new Uint8Array(Buffer.from('confined canary\n')) }],
});
run('1000 files, 8 MiB program', { program: files(1000, 8 * 1024 * 1024) });
