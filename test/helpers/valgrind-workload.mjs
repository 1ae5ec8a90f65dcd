// The workload of scripts/valgrind.sh (not a test): snapshotDigest over valid and invalid
// snapshots, describeRuntime, and a few executor runs (a clean exit, a crash, an output flood),
// so the addon's snapshot, runtime, namespace and launch code runs under memcheck.
// Usage: node test/helpers/valgrind-workload.mjs <root dir, 0700> [runs]
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { native } from '../../lib/native.js';

// valgrind does not implement seccomp(2), which libseccomp calls while compiling a policy, so
// scripts/valgrind.sh compiles the policies with this same addon outside valgrind and hands
// the BPF bytes over: the executor runs with exactly the production filter.
const bpfDir = process.env.CONFINED_VALGRIND_BPF_DIR;
if (bpfDir) native.seccompFilter = (policy) => readFileSync(path.join(bpfDir, `${policy}.bpf`));

const { ConfinedExecutor } = await import('../../lib/executor.js');
const { confinedProfile } = await import('../../lib/profile.js');
const { describeRuntime } = await import('../../lib/runtime.js');
const { snapshotDigest } = await import('../../lib/snapshot.js');

const [root, runsArg = '3'] = process.argv.slice(2);
const files = [
  { path: 'main.cjs', content: Buffer.from('') },
  { path: 'lib/a.js', content: Buffer.alloc(70_000, 1) },
  { path: 'lib/b/c.txt', content: new Uint8Array(0) },
];
let digests = 0;
let refusals = 0;
for (let i = 0; i < 200; i++) {
  files[0].content = Buffer.from(`process.stdout.write(${JSON.stringify(String(i))})`);
  assert.match(snapshotDigest(files), /^sha256:[0-9a-f]{64}$/);
  digests++;
  for (const bad of [[{ path: '../x', content: Buffer.from('x') }], [files[0], { ...files[0] }], [{ path: 'a', content: 'x' }]]) {
    assert.throws(() => snapshotDigest(bad), TypeError);
    refusals++;
  }
}
const runtime = describeRuntime().digest;
const profile = confinedProfile().digest;
const executor = new ConfinedExecutor({ root });
const sources = [
  'process.stdout.write("hello")',
  'process.abort()',
  'const b = Buffer.alloc(65536, 120); for (let i = 0; i < 64; i++) process.stdout.write(b)',
];
const outcomes = [];
for (let i = 0; i < Number(runsArg); i++) {
  const program = [{ path: 'main.cjs', content: Buffer.from(sources[i % sources.length]) }];
  const r = await executor.run({
    runtime,
    profile,
    program: { files: program, digest: snapshotDigest(program), entry: 'main.cjs', args: [] },
    input: { files: [], digest: snapshotDigest([]) },
    timeoutMs: 300_000,
    maxOutputBytes: 8192,
    cpuSeconds: 60,
    maxDescriptors: 64,
  });
  outcomes.push(`${r.status} ${JSON.stringify(r.process?.exit ?? r.reason)} ${r.process?.stopped ?? ''} ${r.namespace?.state}`);
}
console.log(`valgrind workload: ${digests} digests, ${refusals} refusals, runs: ${outcomes.join(' | ')}`);
