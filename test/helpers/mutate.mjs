// Mutation script of the boundary suite: `node test/helpers/mutate.mjs [mutation...]`.
// Runs test/confined-executor-boundaries.test.js once unmutated and once per mutation, with
// CONFINED_TEST_MUTATION set (test/helpers/boundary-run.js then patches the profile through
// lib/testing.js withPatchedProfile around every confined run), and prints which tests fail
// under each. Every mechanism must make at least one test fail when it is switched off.
// A mutation is a mechanism name of MUTATIONS or a '+'-joined combination of them.
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { MUTATIONS } from './boundary-run.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const suite = path.join(here, '..', 'confined-executor-boundaries.test.js');

const SINGLE = Object.keys(MUTATIONS).filter((k) => !MUTATIONS[k].pairOnly);
// Where two layers guard the same thing: the network (seccomp's socket families and the
// network namespace), native code (seccomp and noexec), other processes (seccomp's signal
// rule and the pid namespace), files (seccomp and the mount isolation), and the mounts with
// noexec (host paths are executable again only when both are off).
// The gate's admission checks only detect a broken mount isolation: mounts+gate.
const PAIRS = [
  'seccomp+netns',
  'seccomp+noexec',
  'seccomp+pidns',
  'seccomp+mounts',
  'mounts+noexec',
  'mounts+gate',
  'seccomp+mounts+gate',
];
const requested = process.argv.slice(2);
const mutations = requested.length ? requested : [...SINGLE, ...PAIRS];

function runSuite(mutation) {
  const env = { ...process.env };
  if (mutation) env.CONFINED_TEST_MUTATION = mutation.split('+').join(',');
  else delete env.CONFINED_TEST_MUTATION;
  const r = spawnSync(process.execPath, ['--test', '--test-reporter=tap', suite], {
    env,
    encoding: 'utf8',
    maxBuffer: 64 << 20,
  });
  const failed = [];
  const suites = [];
  let total = 0;
  for (const line of r.stdout.split('\n')) {
    const sub = /^(\s*)# Subtest: (.*)$/.exec(line);
    if (sub) {
      const depth = sub[1].length / 4;
      suites.length = depth;
      suites[depth] = sub[2];
      continue;
    }
    const m = /^(\s*)(not )?ok \d+ - (.*?)(?: # (?:SKIP|TODO).*)?$/.exec(line);
    if (!m) continue;
    const depth = m[1].length / 4;
    if (depth === 0) continue; // a describe block: its tests are listed themselves
    total++;
    if (m[2]) failed.push(`${suites[0]} > ${m[3]}`);
  }
  return { failed, total, code: r.status };
}

const baseline = runSuite(null);
console.log(`baseline: ${baseline.total} tests, ${baseline.failed.length} failing`);
if (baseline.failed.length) {
  console.log(baseline.failed.map((f) => `  ${f}`).join('\n'));
  console.log('the unmutated suite must pass first');
  process.exit(1);
}

const rows = [];
for (const mutation of mutations) {
  const t0 = Date.now();
  const r = runSuite(mutation);
  rows.push({ mutation, ...r });
  console.log(`\n## ${mutation}: ${r.failed.length} of ${r.total} tests fail (${((Date.now() - t0) / 1000).toFixed(0)} s)`);
  for (const f of r.failed) console.log(`  - ${f}`);
}

console.log('\n| mutation | failing tests |\n|---|---|');
for (const r of rows) console.log(`| ${r.mutation} | ${r.failed.length}: ${r.failed.join('; ') || '(none)'} |`);

const idle = rows.filter((r) => !r.mutation.includes('+') && r.failed.length === 0).map((r) => r.mutation);
if (idle.length) {
  console.log(`\nNOT load-bearing for any test: ${idle.join(', ')}`);
  process.exit(1);
}
console.log('\nevery single mechanism is load-bearing for at least one test');
