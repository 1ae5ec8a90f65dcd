// snapshotDigest against `openssl dgst -sha256` on the same bytes (issue 2's target: at least
// 0.9x of openssl's throughput). Usage: node bench/snapshot-digest.mjs [runs]
//
// Cases, each timed `runs` times (default 10) after one untimed warm-up:
//   big:   one file of 256 MiB of random bytes; openssl is one process over the file.
//   many:  10,000 files of 1 KiB; openssl is one process over all 10,000 files, and, for
//          reference, one process per file on a sample of 500 files, extrapolated to 10,000.
// openssl reads the files from the page cache (written and warmed first); our side hashes the
// same bytes in memory. openssl is timed by bash's `time` around the openssl process(es), so
// the times include openssl's start but not the cost of forking this (large) node process.
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { snapshotDigest } from '../lib/snapshot.js';

const runs = Number(process.argv[2] ?? 10);
const BIG = 256 * 1024 * 1024;
const MANY = 10_000;
const SMALL = 1024;
const SAMPLE = 500;

function summary(times) {
  times.sort((a, b) => a - b);
  const mid = times.length >> 1;
  const median = times.length % 2 ? times[mid] : (times[mid - 1] + times[mid]) / 2;
  return { median, min: times[0], max: times[times.length - 1] };
}

/** Times fn in this process: `runs` timed calls after one warm-up. */
function time(fn) {
  fn();
  const times = [];
  for (let i = 0; i < runs; i++) {
    const start = performance.now();
    fn();
    times.push(performance.now() - start);
  }
  return summary(times);
}

/** Times a bash script (given the files as "$@") with bash's `time`, in ms. */
function timeBash(script, files, cwd) {
  const once = () => {
    const r = spawnSync('bash', ['-c', `TIMEFORMAT=%3R; time { ${script}; }`, 'bash', ...files], {
      cwd,
      encoding: 'latin1',
    });
    const m = /^(\d+\.\d+)\s*$/.exec(r.stderr);
    if (r.status !== 0 || !m) throw new Error(`bash/openssl failed: ${r.stderr}`);
    return Number(m[1]) * 1000;
  };
  once();
  return summary(Array.from({ length: runs }, once));
}

const ONE_PROCESS = 'openssl dgst -sha256 "$@" >/dev/null';
const PROCESS_PER_FILE = 'for f in "$@"; do openssl dgst -sha256 "$f" >/dev/null; done';

function openssl(args, cwd) {
  const r = spawnSync('openssl', ['dgst', '-sha256', ...args], {
    cwd,
    encoding: 'latin1',
    maxBuffer: 64 * 1024 * 1024,
  });
  if (r.status !== 0) throw new Error(`openssl failed: ${r.stderr}`);
  return r.stdout;
}

/** Parses `SHA2-256(name)= hex` (or `SHA256(name)= hex`) lines into a name -> hex map. */
function parseDgst(text) {
  const out = new Map();
  for (const line of text.trim().split('\n')) {
    const m = /^SHA2?-?256\((.*)\)= ([0-9a-f]{64})$/.exec(line);
    if (!m) throw new Error(`unexpected openssl output: ${line}`);
    out.set(m[1], m[2]);
  }
  return out;
}

/** The snapshot digest computed from openssl's per-file hashes: a cross-check of ours. */
function digestFromOpenssl(files, hashes) {
  const sorted = [...files].sort((a, b) =>
    Buffer.compare(Buffer.from(a.path), Buffer.from(b.path)),
  );
  const h = createHash('sha256').update('sf-confined-snapshot/1\n');
  for (const f of sorted) h.update(`${f.path}\t${f.content.length}\t${hashes.get(f.path)}\n`);
  return `sha256:${h.digest('hex')}`;
}

const fmt = (ms) => `${ms.toFixed(1).padStart(9)} ms`;
function rate(bytes, ms) {
  const r = bytes / (1024 * 1024) / (ms / 1000);
  return `${r.toFixed(r < 10 ? 2 : 0).padStart(6)} MiB/s`;
}
function row(label, t, bytes) {
  console.log(
    `${label.padEnd(44)} median ${fmt(t.median)}  min ${fmt(t.min)}  max ${fmt(t.max)}  ${rate(bytes, t.median)}`,
  );
}

const dir = mkdtempSync(path.join(os.tmpdir(), 'confined-bench-'));
try {
  console.log(`node ${process.version}, ${execFileSync('openssl', ['version']).toString().trim()}`);
  console.log(
    `node's OpenSSL ${process.versions.openssl}; ${os.cpus()[0].model}; ${runs} runs each\n`,
  );

  // One big file.
  const big = [{ path: 'big.bin', content: randomBytes(BIG) }];
  writeFileSync(path.join(dir, 'big.bin'), big[0].content);
  const oursBig = time(() => snapshotDigest(big));
  const sslBig = timeBash(ONE_PROCESS, ['big.bin'], dir);
  const bigCheck = digestFromOpenssl(big, parseDgst(openssl(['big.bin'], dir)));
  if (bigCheck !== snapshotDigest(big)) throw new Error('digest mismatch on the big file');
  row('ours: snapshotDigest, 1 file of 256 MiB', oursBig, BIG);
  row('openssl dgst -sha256, 1 process, 256 MiB', sslBig, BIG);
  console.log(
    `throughput ratio ours/openssl (big): ${(sslBig.median / oursBig.median).toFixed(3)}x\n`,
  );

  // Many small files, spread over 100 directories.
  const many = [];
  for (let i = 0; i < MANY; i++) {
    const rel = `d${String(i % 100).padStart(2, '0')}/f${String(i).padStart(5, '0')}.bin`;
    many.push({ path: rel, content: randomBytes(SMALL) });
  }
  for (let d = 0; d < 100; d++) mkdirSync(path.join(dir, `d${String(d).padStart(2, '0')}`));
  for (const f of many) writeFileSync(path.join(dir, f.path), f.content);
  const names = many.map((f) => f.path);
  const oursMany = time(() => snapshotDigest(many));
  const sslMany = timeBash(ONE_PROCESS, names, dir);
  const manyCheck = digestFromOpenssl(many, parseDgst(openssl(names, dir)));
  if (manyCheck !== snapshotDigest(many)) throw new Error('digest mismatch on the 10,000 files');
  const sample = names.filter((_, i) => i % (MANY / SAMPLE) === 0);
  const perFile = timeBash(PROCESS_PER_FILE, sample, dir);
  const scale = MANY / SAMPLE;
  const perFileExtrapolated = {
    median: perFile.median * scale,
    min: perFile.min * scale,
    max: perFile.max * scale,
  };
  const manyBytes = MANY * SMALL;
  row('ours: snapshotDigest, 10,000 files of 1 KiB', oursMany, manyBytes);
  row('openssl dgst -sha256, 1 process, 10,000 files', sslMany, manyBytes);
  row(`openssl, 1 process per file (${SAMPLE} x${scale})`, perFileExtrapolated, manyBytes);
  console.log(
    `throughput ratio ours/openssl (10,000 files, one process): ${(sslMany.median / oursMany.median).toFixed(3)}x`,
  );
  console.log(
    `throughput ratio ours/openssl (10,000 files, process per file): ${(perFileExtrapolated.median / oursMany.median).toFixed(1)}x`,
  );
  console.log(
    "\ncross-check: the snapshot digests built from openssl's per-file hashes equal ours",
  );
} finally {
  rmSync(dir, { recursive: true, force: true });
}
