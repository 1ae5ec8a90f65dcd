#!/usr/bin/env node
// A repository collector: one confined run per repository check, for a base and a candidate
// commit. Each commit's tree is read from git without a checkout (snapshotFromGitTree) and is
// both the program (the check script lives in the tree) and the input (the read-only working
// directory the check examines). The collector records what the host observed; it does not
// judge: the check's exit code is a fact of each run.
//
//   node examples/repository-collector.mjs <repo> <base-rev> <candidate-rev> <check-path> [--json]
//   node examples/repository-collector.mjs --demo [--json]
//
// --demo builds a temporary repository with two commits and a check script, collects, and
// removes the repository again.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, realpathSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  ConfinedExecutor,
  confinedProfile,
  describeRuntime,
  snapshotDigest,
  snapshotFromGitTree,
} from 'confined';

const GIT_ENV = {
  PATH: '/usr/local/bin:/usr/bin:/bin',
  HOME: os.tmpdir(),
  LC_ALL: 'C',
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_CONFIG_GLOBAL: '/dev/null',
  GIT_AUTHOR_NAME: 'demo',
  GIT_AUTHOR_EMAIL: 'demo@example.invalid',
  GIT_COMMITTER_NAME: 'demo',
  GIT_COMMITTER_EMAIL: 'demo@example.invalid',
};

function git(repo, ...args) {
  return execFileSync('git', ['-C', repo, ...args], { env: GIT_ENV, encoding: 'utf8' }).trim();
}

/** The check of the demo: every .js file under src/ has no TODO marker. */
const DEMO_CHECK = `// Fails (exit 1) when a file under src/ holds a TODO marker; lists what it examined.
import { readdirSync, readFileSync } from 'node:fs';
const marker = 'TO' + 'DO';
let bad = 0;
for (const name of readdirSync('src').sort()) {
  const text = readFileSync('src/' + name, 'utf8');
  const found = text.includes(marker);
  console.log((found ? 'FAIL ' : 'ok   ') + 'src/' + name);
  if (found) bad += 1;
}
console.log(bad === 0 ? 'check passed' : bad + ' file(s) hold a ' + marker);
process.exitCode = bad === 0 ? 0 : 1;
`;

/** A repository with a base commit and a candidate that adds a TODO: [repo, base, candidate]. */
function makeDemoRepository() {
  const repo = mkdtempSync(path.join(realpathSync(os.tmpdir()), 'confined-demo-repo-'));
  git(repo, 'init', '--quiet');
  mkdirSync(path.join(repo, 'src'));
  mkdirSync(path.join(repo, 'checks'));
  writeFileSync(path.join(repo, 'checks', 'no-todo.mjs'), DEMO_CHECK);
  writeFileSync(path.join(repo, 'src', 'add.js'), 'export const add = (a, b) => a + b;\n');
  git(repo, 'add', '.');
  git(repo, 'commit', '--quiet', '-m', 'base');
  git(repo, 'tag', 'base');
  writeFileSync(path.join(repo, 'src', 'mul.js'), `// ${'TO'}${'DO'}: negative numbers\nexport const mul = (a, b) => a * b;\n`);
  git(repo, 'add', '.');
  git(repo, 'commit', '--quiet', '-m', 'candidate');
  git(repo, 'tag', 'candidate');
  // Leave the work tree at the base: the collector never reads it.
  git(repo, 'checkout', '--quiet', 'base');
  return { repo, base: 'base', candidate: 'candidate' };
}

/** One confined run of the check in the tree of rev. */
async function collectOne(executor, pins, repo, rev, check) {
  const tree = snapshotFromGitTree(repo, rev);
  const digest = snapshotDigest(tree);
  const result = await executor.run({
    runtime: pins.runtime,
    profile: pins.profile,
    program: { files: tree, digest, entry: check, args: [] },
    input: { files: tree, digest },
    timeoutMs: 60_000,
    maxOutputBytes: 256 * 1024,
    cpuSeconds: 30,
    maxDescriptors: 64,
  });
  return { rev, commit: git(repo, 'rev-parse', '--verify', `${rev}^{commit}`), files: tree.length, result };
}

function describe(label, { rev, commit, files, result }) {
  const lines = [`${label}: ${rev} (${commit}), ${files} files`, `  status       ${result.status}`];
  if (result.status === 'not-started') {
    lines.push(`  reason       ${result.reason}: ${result.message}`);
    return lines.join('\n');
  }
  const p = result.process;
  if (result.status === 'observed') lines.push(`  attributable ${result.attributable}`);
  for (const problem of result.problems) lines.push(`  problem      ${problem}`);
  lines.push(`  exit         ${p.exit ? (p.exit.signal ?? `code ${p.exit.code}`) : 'not reaped'}`);
  lines.push(`  stopped      ${p.stopped ?? 'no'}`);
  lines.push(`  duration     ${p.durationMs.toFixed(0)} ms`);
  lines.push(`  program      ${result.identities.program.digest}`);
  for (const line of p.stdout.toString('utf8').split('\n').filter(Boolean)) lines.push(`  | ${line}`);
  for (const line of p.stderr.toString('utf8').split('\n').filter(Boolean)) lines.push(`  ! ${line}`);
  return lines.join('\n');
}

function toJson(run) {
  const { result } = run;
  if (!result.process) return run;
  const { stdout, stderr, ...facts } = result.process;
  return { ...run, result: { ...result, process: { ...facts, stdout: stdout.toString('utf8'), stderr: stderr.toString('utf8') } } };
}

async function main(argv) {
  const json = argv.includes('--json');
  const args = argv.filter((a) => a !== '--json');
  let demo = null;
  let repo;
  let baseRev;
  let candidateRev;
  let check;
  if (args[0] === '--demo' && args.length === 1) {
    demo = makeDemoRepository();
    ({ repo } = demo);
    baseRev = demo.base;
    candidateRev = demo.candidate;
    check = 'checks/no-todo.mjs';
  } else if (args.length === 4) {
    [repo, baseRev, candidateRev, check] = args;
  } else {
    process.stderr.write(
      'usage: repository-collector.mjs <repo> <base-rev> <candidate-rev> <check-path> [--json]\n' +
        '       repository-collector.mjs --demo [--json]\n',
    );
    return 64;
  }
  const pins = { runtime: describeRuntime().digest, profile: confinedProfile().digest };
  const root = mkdtempSync(path.join(realpathSync(os.tmpdir()), 'confined-collector-'));
  const executor = new ConfinedExecutor({ root });
  let runs;
  try {
    // One run per check and commit, one after the other: each gets a fresh namespace.
    runs = [
      await collectOne(executor, pins, repo, baseRev, check),
      await collectOne(executor, pins, repo, candidateRev, check),
    ];
  } finally {
    try {
      rmdirSync(root);
    } catch (error) {
      process.stderr.write(`kept the executor root ${root} (${error.code}): it holds a quarantined namespace\n`);
    }
    if (demo) rmSync(demo.repo, { recursive: true, force: true });
  }
  if (json) {
    process.stdout.write(JSON.stringify({ repo, check, base: toJson(runs[0]), candidate: toJson(runs[1]) }, null, 2) + '\n');
  } else {
    process.stdout.write(`check ${check} in ${demo ? 'a demo repository' : repo}\n`);
    process.stdout.write(describe('base', runs[0]) + '\n');
    process.stdout.write(describe('candidate', runs[1]) + '\n');
  }
  // The collection succeeded when both runs were observed and attributable; what the check
  // said is in the results, not in this exit code.
  return runs.every((r) => r.result.status === 'observed' && r.result.attributable) ? 0 : 1;
}

process.exitCode = await main(process.argv.slice(2));
