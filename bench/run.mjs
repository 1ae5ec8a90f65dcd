// npm run bench: every benchmark figure of the project in one run, each a ratio against a
// baseline measured in the same process, written to BENCHMARKS.md (median, min and max of at
// least BENCH_RUNS runs). No timing is asserted anywhere in the tests: this is the place.
//
//   node bench/run.mjs [--only P1,P4] [--runs N] [--out FILE]
//
// Baselines run with a clean environment (this machine sets NODE_EXTRA_CA_CERTS, which makes
// an inheriting node start ~70 ms slower; the sandbox never inherits it).
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  ConfinedExecutor,
  confinedProfile,
  describeRuntime,
  runConfinedCommand,
  snapshotDigest,
} from '../lib/index.js';
import { bwrapPath } from '../lib/host.js';
import { collectObservers } from '../lib/testing.js';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const RUNS = Math.max(10, Number(opt('--runs', process.env.BENCH_RUNS ?? 10)));
const ONLY = opt('--only', '')
  .split(',')
  .filter(Boolean);
const OUT = opt('--out', path.join(root, 'BENCHMARKS.md'));
const NODE = fs.realpathSync(process.execPath);

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'confined-bench-'));
fs.chmodSync(tmp, 0o700);
process.on('exit', () => fs.rmSync(tmp, { recursive: true, force: true }));

const stats = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return { median: s[s.length >> 1], min: s[0], max: s[s.length - 1], n: s.length };
};
const now = () => performance.now();

function childTime(file, argv, { env = {}, stdout = 'ignore', stderr = 'ignore' } = {}) {
  return new Promise((resolve, reject) => {
    const t = now();
    const c = spawn(file, argv, { env, stdio: ['ignore', stdout, stderr] });
    let bytes = 0;
    if (stdout === 'pipe') c.stdout.on('data', (d) => (bytes += d.length));
    if (stderr === 'pipe') c.stderr.on('data', () => {});
    c.on('error', reject);
    c.on('close', (code) => (code === 0 ? resolve({ ms: now() - t, bytes }) : reject(new Error(`${file} exited ${code}`))));
  });
}

function executorFor(dir, maxRetained = 8) {
  fs.mkdirSync(dir, { mode: 0o700 });
  return new ConfinedExecutor({ root: dir, maxRetained });
}

function request(source, bounds = {}) {
  const files = [{ path: 'main.mjs', content: Buffer.from(source) }];
  return {
    runtime: describeRuntime().digest,
    profile: confinedProfile().digest,
    program: { files, digest: snapshotDigest(files), entry: 'main.mjs', args: [] },
    input: { files: [], digest: snapshotDigest([]) },
    timeoutMs: 60_000,
    maxOutputBytes: 1 << 20,
    cpuSeconds: 30,
    maxDescriptors: 64,
    ...bounds,
  };
}

async function runOk(executor, req) {
  const r = await executor.run(req);
  if (r.status !== 'observed' || !r.attributable) throw new Error(`run failed: ${JSON.stringify(r.problems ?? r.message)}`);
  return r;
}

const HELLO = 'console.log("hello")\n';

// ---------------------------------------------------------------------------------------------

const figures = {
  async P1() {
    // The baseline collects the program's stdout and stderr through pipes, as run() does: a
    // node whose output goes to /dev/null does less (node sets up pipe streams lazily, ~3-5 ms
    // here). That cheaper run is measured too and reported as a reference row, not judged.
    const executor = executorFor(path.join(tmp, 'p1'));
    const req = request(HELLO);
    const file = path.join(tmp, 'hello.mjs');
    fs.writeFileSync(file, HELLO);
    const captured = () => childTime(NODE, [file], { stdout: 'pipe', stderr: 'pipe' });
    // The same executor with its root on a tmpfs, where that exists: each run creates and
    // removes its namespace (7 inodes), and on a file system mounted with online discard (this
    // machine's ext4) a creation after a removal waits ~0.5 ms for the journal's discards.
    const shm = fs.existsSync('/dev/shm') ? fs.mkdtempSync('/dev/shm/confined-bench-') : null;
    if (shm) process.on('exit', () => fs.rmSync(shm, { recursive: true, force: true }));
    const onTmpfs = shm ? executorFor(path.join(shm, 'p1')) : null;
    for (let i = 0; i < 3; i++) {
      await captured();
      await childTime(NODE, [file]);
      await runOk(executor, req);
      if (onTmpfs) await runOk(onTmpfs, req);
    }
    const base = [], discarded = [], ours = [], oursTmpfs = [];
    // 40 interleaved runs at least: single runs here spread from ~30 to ~120 ms.
    for (let i = 0; i < Math.max(RUNS, 40); i++) {
      base.push((await captured()).ms);
      discarded.push((await childTime(NODE, [file])).ms);
      let t = now();
      await runOk(executor, req);
      ours.push(now() - t);
      if (onTmpfs) {
        t = now();
        await runOk(onTmpfs, req);
        oursTmpfs.push(now() - t);
      }
    }
    const ratio = stats(ours).median / stats(base).median;
    const tmpfsRow = onTmpfs && {
      title: 'P1 reference: the same with the executor root on a tmpfs (/dev/shm)',
      baseline: 'the first row\'s baseline',
      unit: 'ms',
      ours: stats(oursTmpfs),
      base: stats(base),
      ratio: stats(oursTmpfs).median / stats(base).median,
      target: 'reference, not judged',
      pass: null,
    };
    return [
      {
        title: 'P1 trivial `run()` end to end',
        baseline: '`env -i node` on the same program, its stdout and stderr collected through pipes',
        unit: 'ms',
        ours: stats(ours),
        base: stats(base),
        ratio,
        target: 'at most 1.25x',
        pass: ratio <= 1.25,
      },
      {
        title: 'P1 reference: the same, against a node whose output is discarded',
        baseline: '`env -i node` on the same program, stdio to /dev/null',
        unit: 'ms',
        ours: stats(ours),
        base: stats(discarded),
        ratio: stats(ours).median / stats(discarded).median,
        target: 'reference, not judged',
        pass: null,
      },
      ...(tmpfsRow ? [tmpfsRow] : []),
    ];
  },

  async P2() {
    const { snapshotDigest: digest } = await import('../lib/snapshot.js');
    const big = randomBytes(256 * 1024 * 1024);
    const bigFile = path.join(tmp, 'big.bin');
    fs.writeFileSync(bigFile, big);
    const small = [];
    const smallDir = path.join(tmp, 'small');
    fs.mkdirSync(smallDir);
    for (let i = 0; i < 10_000; i++) {
      const content = randomBytes(1024);
      const name = `f${String(i).padStart(5, '0')}`;
      small.push({ path: name, content });
      fs.writeFileSync(path.join(smallDir, name), content);
    }
    const names = small.map((f) => f.path);
    const openssl = (argv, cwd) => {
      const t = now();
      execFileSync('openssl', ['dgst', '-sha256', ...argv], { cwd, env: {}, stdio: ['ignore', 'ignore', 'inherit'], maxBuffer: 1 << 26 });
      return now() - t;
    };
    const oursBig = [], baseBig = [], oursSmall = [], baseSmall = [];
    for (let i = 0; i < RUNS; i++) {
      let t = now();
      digest([{ path: 'big.bin', content: big }]);
      oursBig.push(now() - t);
      baseBig.push(openssl([bigFile]));
      t = now();
      digest(small);
      oursSmall.push(now() - t);
      baseSmall.push(openssl(names, smallDir));
    }
    const perFile = [];
    for (let i = 0; i < 200; i++) perFile.push(openssl([names[i]], smallDir));
    const r1 = stats(baseBig).median / stats(oursBig).median;
    const r2 = stats(baseSmall).median / stats(oursSmall).median;
    return [
      {
        title: 'P2a `snapshotDigest`, 256 MiB in one file',
        baseline: '`openssl dgst -sha256` on the same bytes',
        unit: 'ms',
        ours: stats(oursBig),
        base: stats(baseBig),
        ratio: r1,
        ratioNote: 'throughput ours / openssl',
        target: 'at least 0.9x',
        pass: r1 >= 0.9,
      },
      {
        title: 'P2b `snapshotDigest`, 10,000 files of 1 KiB',
        baseline: `one \`openssl dgst -sha256\` over all files (one process per file: ${(stats(perFile).median * 10_000 / 1000).toFixed(1)} s extrapolated)`,
        unit: 'ms',
        ours: stats(oursSmall),
        base: stats(baseSmall),
        ratio: r2,
        ratioNote: 'throughput ours / openssl',
        target: 'at least 0.9x',
        pass: r2 >= 0.9,
      },
    ];
  },

  async P3() {
    const executor = executorFor(path.join(tmp, 'p3'));
    const source =
      'const b = Buffer.alloc(1 << 20, 120); let n = 0; ' +
      'function w() { while (n < 1024) { n++; if (!process.stdout.write(b)) return process.stdout.once("drain", w); } } w();\n';
    const req = request(source, { maxOutputBytes: 1 << 20 });
    await executor.run(req);
    const growth = [], latency = [];
    let facts = null;
    collectObservers.onFacts = (f) => (facts = f);
    try {
      for (let i = 0; i < RUNS; i++) {
        const before = process.memoryUsage().rss;
        const peak0 = process.resourceUsage().maxRSS;
        const r = await executor.run(req);
        if (r.process.stopped !== 'output-limit') throw new Error(`P3: stopped ${r.process.stopped}`);
        const peak1 = process.resourceUsage().maxRSS;
        growth.push(Math.max((process.memoryUsage().rss - before) / 1048576, (peak1 - peak0) / 1024));
        latency.push(facts.reapedAt - facts.stoppedAt);
      }
    } finally {
      collectObservers.onFacts = null;
    }
    return [
      {
        title: 'P3a a program writing 1 GiB, `maxOutputBytes` 1 MiB: host RSS growth',
        baseline: '—',
        unit: 'MiB',
        ours: stats(growth),
        base: null,
        ratio: null,
        target: 'at most 16 MiB',
        pass: stats(growth).max <= 16,
      },
      {
        title: 'P3b the same: from crossing the cap to the sandbox reaped',
        baseline: '—',
        unit: 'ms',
        ours: stats(latency),
        base: null,
        ratio: null,
        target: 'at most 50 ms',
        pass: stats(latency).median <= 50,
      },
    ];
  },

  async P4() {
    const GiB = 1024 * 1024 * 1024;
    const argv = ['-c', `${GiB}`, '/dev/zero'];
    const base = [], ours = [];
    for (let i = 0; i < RUNS; i++) {
      const b = await childTime('/usr/bin/head', argv, { stdout: 'pipe' });
      if (b.bytes !== GiB) throw new Error('P4 baseline short');
      base.push(b.ms);
      const t = now();
      const handle = await runConfinedCommand({
        command: '/usr/bin/head',
        args: argv,
        cwd: tmp,
        mounts: [{ path: tmp, mode: 'ro' }],
        limits: { maxStdoutBytes: 2 * GiB },
      });
      let bytes = 0;
      handle.stdout.on('data', (d) => (bytes += d.length));
      const res = await handle.wait();
      if (res.code !== 0 || bytes !== GiB) throw new Error(`P4: code ${res.code}, ${bytes} bytes`);
      ours.push(now() - t);
    }
    const ratio = stats(base).median / stats(ours).median;
    return {
      title: 'P4 `runConfinedCommand` stdout throughput, 1 GiB',
      baseline: 'plain `child_process.spawn` of the same command',
      unit: 'ms',
      ours: stats(ours),
      base: stats(base),
      ratio,
      ratioNote: 'throughput ours / baseline',
      target: 'at least 0.8x',
      pass: ratio >= 0.8,
    };
  },

  async P5() {
    const batch = Number(process.env.BENCH_P5_BATCH ?? 100);
    const executor = executorFor(path.join(tmp, 'p5'), 8);
    const req = request(HELLO);
    await runOk(executor, req);
    const seq = [], par = [];
    for (let i = 0; i < RUNS; i++) {
      let t = now();
      for (let j = 0; j < batch; j++) await runOk(executor, req);
      seq.push(now() - t);
      t = now();
      let next = 0;
      const worker = async () => {
        while (next < batch) {
          next++;
          await runOk(executor, req);
        }
      };
      await Promise.all([worker(), worker()]);
      par.push(now() - t);
    }
    const ratio = stats(seq).median / stats(par).median;
    return {
      title: `P5 ${batch} trivial runs, 2 at a time`,
      baseline: `the same ${batch} one at a time`,
      unit: 'ms',
      ours: stats(par),
      base: stats(seq),
      ratio,
      ratioNote: 'throughput 2-at-a-time / sequential',
      target: 'at least 1.5x on 2 cores',
      pass: ratio >= 1.5,
    };
  },

  async P6() {
    const bwrap = bwrapPath();
    const direct = [
      '--unshare-all', '--die-with-parent', '--new-session', '--cap-drop', 'ALL', '--clearenv',
      '--ro-bind', '/usr', '/usr', '--symlink', 'usr/lib', '/lib', '--symlink', 'usr/lib64', '/lib64',
      '--symlink', 'usr/bin', '/bin', '--proc', '/proc', '--dev', '/dev', '/usr/bin/true',
    ];
    const base = [], ours = [];
    const once = async () => {
      const t = now();
      const h = await runConfinedCommand({ command: '/usr/bin/true', cwd: tmp, mounts: [{ path: tmp, mode: 'ro' }] });
      const r = await h.wait();
      if (r.code !== 0) throw new Error(`P6: code ${r.code}`);
      return now() - t;
    };
    for (let i = 0; i < 3; i++) {
      await childTime(bwrap, direct);
      await once();
    }
    for (let i = 0; i < Math.max(RUNS, 20); i++) {
      base.push((await childTime(bwrap, direct)).ms);
      ours.push(await once());
    }
    const ratio = stats(ours).median / stats(base).median;
    return {
      title: 'P6 `runConfinedCommand` start-to-exit of `true`',
      baseline: 'bwrap running `true` directly',
      unit: 'ms',
      ours: stats(ours),
      base: stats(base),
      ratio,
      target: 'at most 1.7x',
      pass: ratio <= 1.7,
    };
  },
};

const fmt = (s, unit) => (s ? `${s.median.toFixed(1)} ${unit} (${s.min.toFixed(1)}–${s.max.toFixed(1)}, n=${s.n})` : '—');

const rows = [];
for (const [name, fn] of Object.entries(figures)) {
  if (ONLY.length && !ONLY.includes(name)) continue;
  process.stderr.write(`bench: ${name}...\n`);
  // Each figure starts with nothing left to write back: P2 and P4 write hundreds of MiB, and
  // their writeback slows the next figure's file-system work (namespace creation) severalfold.
  execFileSync('sync');
  try {
    const out = await fn();
    for (const r of [out].flat()) {
      rows.push(r);
      process.stderr.write(`  ${r.title}: ours ${fmt(r.ours, r.unit)}, baseline ${fmt(r.base, r.unit)}, ratio ${r.ratio === null ? '—' : r.ratio.toFixed(2) + 'x'} ${r.pass === null ? 'is a reference' : r.pass ? 'meets target' : 'MISSES target'} (${r.target})\n`);
    }
  } catch (err) {
    rows.push({ title: name, error: err.message });
    process.stderr.write(`  ${name} failed: ${err.stack}\n`);
  }
}

const cpu = os.cpus()[0]?.model ?? 'unknown CPU';
const lines = [
  '# Benchmarks',
  '',
  `Written by \`npm run bench\` (bench/run.mjs). Machine: ${os.cpus().length} × ${cpu}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, Linux ${os.release()}, node ${process.version}. Date: ${new Date().toISOString()}. Load average at the end: ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}.`,
  '',
  'Each figure: median (min–max) over the runs; the ratio compares medians measured in the same process. Baselines run with an empty environment.',
  '',
  '| figure | ours | baseline | ratio | target | met |',
  '|---|---|---|---|---|---|',
  ...rows.map((r) =>
    r.error
      ? `| ${r.title} | failed: ${r.error.replace(/\|/g, '\\|')} | | | | no |`
      : `| ${r.title} | ${fmt(r.ours, r.unit)} | ${r.base ? `${fmt(r.base, r.unit)}: ${r.baseline}` : r.baseline} | ${r.ratio === null ? '—' : `${r.ratio.toFixed(2)}x${r.ratioNote ? ` (${r.ratioNote})` : ''}`} | ${r.target} | ${r.pass === null ? '—' : r.pass ? 'yes' : 'no'} |`,
  ),
  '',
];
if (!ONLY.length) fs.writeFileSync(OUT, lines.join('\n'));
else process.stdout.write(lines.join('\n'));
