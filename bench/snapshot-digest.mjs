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

/** Milliseconds of one call of fn in this process. */
function timeOnce(fn) {
  const start = performance.now();
  fn();
  return performance.now() - start;
}

/** Milliseconds of one run of a bash script (given the files as "$@"), by bash's `time`. */
function timeBashOnce(script, files, cwd) {
  const r = spawnSync('bash', ['-c', `TIMEFORMAT=%3R; time { ${script}; }`, 'bash', ...files], {
    cwd,
    encoding: 'latin1',
  });
  const m = /^(\d+\.\d+)\s*$/.exec(r.stderr);
  if (r.status !== 0 || !m) throw new Error(`bash/openssl failed: ${r.stderr}`);
  return Number(m[1]) * 1000;
}

/**
 * Times each of the named measurements `runs` times after one untimed warm-up, interleaved
 * (one of each per round), so that load from elsewhere on the machine falls on all alike.
 * Also returns, per round, the ratio of the first measurement's time to each other's.
 */
function compare(measurements) {
  const names = Object.keys(measurements);
  for (const name of names) measurements[name]();
  const times = Object.fromEntries(names.map((name) => [name, []]));
  for (let i = 0; i < runs; i++) {
    for (const name of names) times[name].push(measurements[name]());
  }
  const out = {};
  for (const name of names) {
    out[name] = summary([...times[name]]);
    out[name].perRoundRatio = summary(times[name].map((t, i) => t / times[names[0]][i])).median;
  }
  return out;
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
/**
 * Throughput ratio ours/openssl: of the medians, of the minimums (the least disturbed runs),
 * and the median of the per-round ratios.
 */
function ratio(label, theirs, ours) {
  const x = (v) => `${v.toFixed(3)}x`;
  console.log(
    `throughput ratio ours/openssl (${label}): ${x(theirs.median / ours.median)} of medians, ` +
      `${x(theirs.min / ours.min)} of minimums, ${x(theirs.perRoundRatio)} median per round`,
  );
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
  const bigCheck = digestFromOpenssl(big, parseDgst(openssl(['big.bin'], dir)));
  if (bigCheck !== snapshotDigest(big)) throw new Error('digest mismatch on the big file');
  const b = compare({
    ours: () => timeOnce(() => snapshotDigest(big)),
    openssl: () => timeBashOnce(ONE_PROCESS, ['big.bin'], dir),
  });
  row('ours: snapshotDigest, 1 file of 256 MiB', b.ours, BIG);
  row('openssl dgst -sha256, 1 process, 256 MiB', b.openssl, BIG);
  ratio('256 MiB, one openssl process', b.openssl, b.ours);
  console.log();
  big.length = 0; // let the 256 MiB go before the next case

  // Many small files, spread over 100 directories.
  const many = [];
  for (let i = 0; i < MANY; i++) {
    const rel = `d${String(i % 100).padStart(2, '0')}/f${String(i).padStart(5, '0')}.bin`;
    many.push({ path: rel, content: randomBytes(SMALL) });
  }
  for (let d = 0; d < 100; d++) mkdirSync(path.join(dir, `d${String(d).padStart(2, '0')}`));
  for (const f of many) writeFileSync(path.join(dir, f.path), f.content);
  const names = many.map((f) => f.path);
  const manyCheck = digestFromOpenssl(many, parseDgst(openssl(names, dir)));
  if (manyCheck !== snapshotDigest(many)) throw new Error('digest mismatch on the 10,000 files');
  const sample = names.filter((_, i) => i % (MANY / SAMPLE) === 0);
  const scale = MANY / SAMPLE;
  const m = compare({
    ours: () => timeOnce(() => snapshotDigest(many)),
    openssl: () => timeBashOnce(ONE_PROCESS, names, dir),
    perFile: () => scale * timeBashOnce(PROCESS_PER_FILE, sample, dir),
  });
  const manyBytes = MANY * SMALL;
  row('ours: snapshotDigest, 10,000 files of 1 KiB', m.ours, manyBytes);
  row('openssl dgst -sha256, 1 process, 10,000 files', m.openssl, manyBytes);
  row(`openssl, 1 process per file (${SAMPLE} files x${scale})`, m.perFile, manyBytes);
  ratio('10,000 files, one openssl process', m.openssl, m.ours);
  ratio('10,000 files, one openssl process per file', m.perFile, m.ours);
  console.log(
    "\ncross-check: the snapshot digests built from openssl's per-file hashes equal ours",
  );
} finally {
  rmSync(dir, { recursive: true, force: true });
}
