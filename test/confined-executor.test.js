// ConfinedExecutor.run on Linux (issue 3): one test per claim of the spec's contract suite,
// each judged from host-side facts (the root's listing, /proc, the program's own report of
// what it saw) rather than from the executor's word alone. Runs as root and as nobody.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import childProcess from 'node:child_process';
import { native } from '../lib/native.js';
import { ConfinedExecutor } from '../lib/executor.js';
import { CONFINED_ENVIRONMENT_KEYS } from '../lib/constants.js';
import { toolPaths } from '../lib/profile.js';
import { withPatchedProfile } from '../lib/testing.js';
import {
  assertNothingLeft,
  awaitFile,
  blockFor,
  isRoot,
  listing,
  makeRoot,
  marker,
  onEvent,
  pins,
  processesOf,
  recordEvents,
  request,
  stageIndex,
  text,
} from './helpers/executor-fixture.js';

const HELLO = 'console.log("hello");\n';

/** A digest of the same shape that differs from `digest` in its last hex digit. */
function otherDigest(digest) {
  const last = digest.at(-1);
  return digest.slice(0, -1) + (last === '0' ? '1' : '0');
}

function assertNotStarted(result, reason) {
  assert.equal(result.status, 'not-started', JSON.stringify(result));
  assert.equal(result.reason, reason, result.message);
  assert.equal(typeof result.message, 'string');
}

// ---------------------------------------------------------------------------------------------
// Pins, validation and the refusals before anything is written (invariants 1 and 2)

test('pinned runtime or profile mismatches start nothing and create nothing', async (t) => {
  const { root, executor } = makeRoot(t);
  const real = pins();
  for (const [pin, reason] of [
    [{ ...real, runtime: otherDigest(real.runtime) }, 'runtime-mismatch'],
    [{ ...real, profile: otherDigest(real.profile) }, 'profile-mismatch'],
    [{ runtime: otherDigest(real.runtime), profile: otherDigest(real.profile) }, 'profile-mismatch'],
  ]) {
    const { value: result, events } = await recordEvents(() =>
      executor.run(request(HELLO, { pin })),
    );
    assertNotStarted(result, reason);
    assert.equal(result.namespace, null);
    assert.deepEqual(events, [], 'not even the root was counted');
    assertNothingLeft(root);
  }
});

test('validation throws a TypeError before anything is touched', async (t) => {
  const { base } = makeRoot(t);
  // A root that does not exist yet: any touch of it would show.
  const root = path.join(base, 'untouched');
  const executor = new ConfinedExecutor({ root });
  const good = request(HELLO);
  const events = [];
  onEvent(t, null, (m) => events.push(m));
  const bad = [
    [{ ...good, extra: 1 }, /invalid confined run request/],
    [{ ...good, timeoutMs: 0 }, /invalid confined run request: timeoutMs/],
    [{ ...good, program: { ...good.program, entry: 'main.sh' } }, /program\.entry/],
    [{ ...good, input: { ...good.input, digest: good.program.digest } }, /input\.digest does not match/],
    [
      Object.defineProperty({ ...good }, 'cpuSeconds', { get: () => 1, enumerable: true }),
      /invalid confined run request/,
    ],
  ];
  for (const [req, message] of bad) {
    // Thrown synchronously: run() does not even return a promise.
    assert.throws(() => executor.run(req), (err) => err instanceof TypeError && message.test(err.message));
  }
  assert.throws(
    () => executor.run(good, { aborted: true }),
    (err) => err instanceof TypeError && err.message === 'signal must be an AbortSignal',
  );
  assert.throws(() => new ConfinedExecutor({ root: `${root}/` }), TypeError);
  assert.throws(() => new ConfinedExecutor({ root, maxRetained: 0 }), TypeError);
  assert.equal(fs.existsSync(root), false, 'the root was never created');
  assert.deepEqual(listing(base), ['root']);
  assert.deepEqual(events, []);
});

test('not-started aborted: a signal aborted before run creates nothing', async (t) => {
  const { root, executor } = makeRoot(t);
  const result = await executor.run(request(HELLO), AbortSignal.abort());
  assertNotStarted(result, 'aborted');
  assert.equal(result.namespace, null);
  assertNothingLeft(root);
});

test('not-started unsupported-host: another platform is refused before any write', async (t) => {
  const { root, executor } = makeRoot(t);
  const req = request(HELLO);
  const original = Object.getOwnPropertyDescriptor(process, 'platform');
  let result;
  try {
    Object.defineProperty(process, 'platform', { ...original, value: 'freebsd' });
    result = await executor.run(req);
  } finally {
    Object.defineProperty(process, 'platform', original);
  }
  assert.equal(process.platform, 'linux');
  assertNotStarted(result, 'unsupported-host');
  assert.match(result.message, /freebsd/);
  assert.equal(result.namespace, null);
  assertNothingLeft(root);
});

test('an aliased or shared root is refused; leftover entries count against the retained limit', async (t) => {
  const { base, root } = makeRoot(t);
  const req = request(HELLO);
  const refused = async (dir, why) => {
    const before = fs.existsSync(dir) && fs.statSync(dir).isDirectory() ? listing(dir) : null;
    const result = await new ConfinedExecutor({ root: dir }).run(req);
    assertNotStarted(result, 'setup-failed');
    assert.equal(result.namespace, null, why);
    if (before) assert.deepEqual(listing(dir), before, `${why}: nothing was created`);
  };
  // Not a directory.
  const file = path.join(base, 'file');
  fs.writeFileSync(file, 'x', { mode: 0o600 });
  await refused(file, 'a regular file');
  // Missing.
  await refused(path.join(base, 'missing'), 'a missing root');
  // Shared: group or other bits.
  for (const mode of [0o750, 0o707, 0o701]) {
    const shared = path.join(base, `shared-${mode.toString(8)}`);
    fs.mkdirSync(shared);
    fs.chmodSync(shared, mode);
    await refused(shared, `mode ${mode.toString(8)}`);
  }
  // Aliased: the root itself a symlink, or reached through a symlinked parent.
  const link = path.join(base, 'link');
  fs.symlinkSync(root, link);
  await refused(link, 'a symlinked root');
  const parentLink = path.join(base, 'parent');
  fs.symlinkSync(base, parentLink);
  await refused(path.join(parentLink, 'root'), 'a root behind a symlinked parent');
  if (isRoot) {
    const foreign = path.join(base, 'foreign');
    fs.mkdirSync(foreign, { mode: 0o700 });
    fs.chownSync(foreign, 65534, 65534);
    await refused(foreign, 'a root owned by another user');
  }
  assert.deepEqual(listing(root), []);

  // Leftovers: every entry counts, foreign ones included.
  fs.writeFileSync(path.join(root, 'foreign-file'), '');
  fs.mkdirSync(path.join(root, 'slot-7'));
  const limited = new ConfinedExecutor({ root, maxRetained: 2 });
  const result = await limited.run(req);
  assertNotStarted(result, 'retained-limit');
  assert.match(result.message, /never reclaimed automatically/);
  assert.equal(result.namespace, null);
  assert.deepEqual(listing(root), ['foreign-file', 'slot-7']);
});

test('controllers sharing a root cannot exceed maxRetained: a slot claimed after the count refuses the run', async (t) => {
  const { root } = makeRoot(t, { maxRetained: 1 });
  const executor = new ConfinedExecutor({ root, maxRetained: 1 });
  const counts = [];
  onEvent(t, 'counted', (m) => {
    counts.push(m.retained);
    // Another controller claims the only slot between this count and the claim.
    fs.mkdirSync(path.join(m.root, 'slot-0'), { mode: 0o700 });
  });
  const result = await executor.run(request(HELLO));
  assert.deepEqual(counts, [0]);
  assertNotStarted(result, 'retained-limit');
  assert.match(result.message, /every slot is taken/);
  assert.equal(result.namespace, null);
  assert.deepEqual(listing(root), ['slot-0']);
  assert.deepEqual(listing(path.join(root, 'slot-0')), [], "the other controller's slot is untouched");
});

// ---------------------------------------------------------------------------------------------
// Pre-launch integrity and the last refusals before a process exists (invariant 4)

/** Runs HELLO with `tamper(slot)` applied at the materialised event. */
async function tamperedRun(t, tamper) {
  const { base, root, executor } = makeRoot(t);
  const mark = marker();
  let slot = null;
  onEvent(t, 'materialised', (m) => {
    slot = m.namespace;
    tamper(slot, base);
  });
  const result = await executor.run(request(`console.log(${JSON.stringify(mark)});\n`));
  return { root, slot, result };
}

function assertQuarantinedBeforeLaunch({ root, slot, result }) {
  assertNotStarted(result, 'snapshot-mismatch');
  assert.equal(result.namespace.state, 'quarantined');
  assert.equal(result.namespace.path, slot);
  assert.equal(typeof result.namespace.reason, 'string');
  // Preserved, slot included, and no process was started.
  assert.deepEqual(listing(root), [path.basename(slot)]);
  assert.deepEqual(listing(slot).sort(), ['canary', 'home', 'input', 'program']);
  assert.deepEqual(processesOf(process.pid, root), []);
}

test('snapshot-mismatch: a changed byte quarantines and preserves the namespace', async (t) => {
  const run = await tamperedRun(t, (slot) => {
    const file = path.join(slot, 'input', 'data.txt');
    const content = fs.readFileSync(file);
    content[0] ^= 1; // same size, same inode
    fs.writeFileSync(file, content);
  });
  assertQuarantinedBeforeLaunch(run);
  const kept = fs.readFileSync(path.join(run.slot, 'input', 'data.txt'), 'utf8');
  assert.equal(kept, 'hnput data\n', 'the tampered content is preserved');
});

test('snapshot-mismatch: a hard link to a namespace file quarantines and preserves the namespace', async (t) => {
  const run = await tamperedRun(t, (slot, base) => {
    fs.linkSync(path.join(slot, 'program', 'main.mjs'), path.join(base, 'hard-link'));
  });
  assertQuarantinedBeforeLaunch(run);
  assert.equal(fs.statSync(path.join(run.slot, 'program', 'main.mjs')).nlink, 2);
});

test('snapshot-mismatch: a swapped file quarantines and preserves the namespace', async (t) => {
  let swappedIno = null;
  const run = await tamperedRun(t, (slot, base) => {
    // Same name, same bytes, same mode: only the inode differs.
    const file = path.join(slot, 'program', 'main.mjs');
    const st = fs.statSync(file);
    const copy = path.join(base, 'swap');
    fs.writeFileSync(copy, fs.readFileSync(file), { mode: st.mode & 0o777 });
    fs.renameSync(copy, file);
    swappedIno = fs.statSync(file).ino;
    assert.notEqual(swappedIno, st.ino);
  });
  assertQuarantinedBeforeLaunch(run);
  assert.equal(fs.statSync(path.join(run.slot, 'program', 'main.mjs')).ino, swappedIno);
});

test('aborted between materialise and spawn: not-started, the namespace removed', async (t) => {
  const { root, executor } = makeRoot(t);
  const controller = new AbortController();
  const seen = [];
  onEvent(t, null, (m) => {
    seen.push(m.event);
    if (m.event === 'materialised') controller.abort();
  });
  const result = await executor.run(request(HELLO), controller.signal);
  assertNotStarted(result, 'aborted');
  assert.deepEqual(result.namespace, { state: 'removed', durable: true });
  assert.deepEqual(seen, ['counted', 'materialised'], 'nothing was launched');
  assertNothingLeft(root);
});

test('setup-failed when the spawn fails: the namespace is removed and nothing is left', async (t) => {
  const { base, root, executor } = makeRoot(t);
  const missing = path.join(base, 'no-such-bwrap');
  const seen = [];
  onEvent(t, null, (m) => seen.push(m.event));
  const result = await withPatchedProfile(
    { parts: { tools: { ...toolPaths(), bwrap: missing } } },
    () => executor.run(request(HELLO)),
  );
  assertNotStarted(result, 'setup-failed');
  assert.match(result.message, /spawn failed at exec/);
  assert.deepEqual(result.namespace, { state: 'removed', durable: true });
  assert.deepEqual(seen, ['counted', 'materialised']);
  assertNothingLeft(root);
});

// ---------------------------------------------------------------------------------------------
// A program that runs (invariants 9, 11, 12)

test('hello world: observed, attributable, exit 0, its stdout, namespace removed durably', async (t) => {
  const { root, executor } = makeRoot(t);
  const result = await executor.run(request(HELLO));
  assert.equal(result.status, 'observed', JSON.stringify(result.problems));
  assert.equal(result.attributable, true);
  assert.deepEqual(result.problems, []);
  assert.equal(result.process.admission, 'admitted');
  assert.deepEqual(result.process.exit, { code: 0, signal: null });
  assert.equal(result.process.pipesClosed, true);
  assert.equal(result.process.stopped, null);
  assert.equal(result.process.killSent, false);
  assert.equal(text(result).stdout, 'hello\n');
  assert.equal(text(result).stderr, '');
  assert.equal(result.process.outputBytes, 'hello\n'.length);
  assert.deepEqual(result.namespace, { state: 'removed', durable: true });
  assertNothingLeft(root);
});

test('the exit code is the program’s own: process.exit(3)', async (t) => {
  const { root, executor } = makeRoot(t);
  const result = await executor.run(request('process.exit(3);\n'));
  assert.equal(result.status, 'observed');
  assert.equal(result.attributable, true);
  assert.deepEqual(result.process.exit, { code: 3, signal: null });
  assertNothingLeft(root);
});

test('stderr is collected separately from stdout', async (t) => {
  const { executor } = makeRoot(t);
  const result = await executor.run(
    request('process.stderr.write("to stderr\\n"); process.stdout.write("to stdout\\n");\n'),
  );
  assert.equal(result.attributable, true);
  assert.deepEqual(text(result), { stdout: 'to stdout\n', stderr: 'to stderr\n' });
  assert.equal(result.process.outputBytes, 20);
});

test('args reach the program after its entry', async (t) => {
  const { executor } = makeRoot(t);
  const args = ['one', 'two words', '', '--flag=ü'];
  const result = await executor.run(
    request('console.log(JSON.stringify(process.argv.slice(2)));\n', { args }),
  );
  assert.equal(result.attributable, true);
  assert.deepEqual(JSON.parse(text(result).stdout), args);
  assert.deepEqual(result.identities.program.args, args);
});

test('the cwd is <namespace>/input and the input files are readable', async (t) => {
  const { root, executor } = makeRoot(t);
  let slot = null;
  onEvent(t, 'materialised', (m) => (slot = m.namespace));
  const input = { 'data.txt': 'input data\n', 'dir/nested.json': '{"n":1}\n' };
  const result = await executor.run(
    request(
      `import fs from 'node:fs';
console.log(JSON.stringify({ cwd: process.cwd(), data: fs.readFileSync('data.txt', 'utf8'),
  nested: fs.readFileSync('dir/nested.json', 'utf8'), list: fs.readdirSync('.').sort() }));\n`,
      { input },
    ),
  );
  assert.equal(result.attributable, true, JSON.stringify(result.problems));
  const seen = JSON.parse(text(result).stdout);
  assert.equal(path.dirname(slot), root);
  assert.equal(seen.cwd, path.join(slot, 'input'));
  assert.equal(seen.data, input['data.txt']);
  assert.equal(seen.nested, input['dir/nested.json']);
  assert.deepEqual(seen.list, ['data.txt', 'dir']);
});

test('the environment is exactly the five names of invariant 11', async (t) => {
  const { executor } = makeRoot(t);
  let slot = null;
  onEvent(t, 'materialised', (m) => (slot = m.namespace));
  const result = await executor.run(request('console.log(JSON.stringify(process.env));\n'));
  assert.equal(result.attributable, true);
  const env = JSON.parse(text(result).stdout);
  assert.deepEqual(Object.keys(env).sort(), [...CONFINED_ENVIRONMENT_KEYS].sort());
  assert.deepEqual(env, {
    LC_ALL: 'C',
    TZ: 'UTC',
    HOME: path.join(slot, 'home'),
    TMPDIR: path.join(slot, 'home'),
    OPENSSL_CONF: '/dev/null',
  });
});

// ---------------------------------------------------------------------------------------------
// Stop reasons (invariants 7, 8, 10)

/** A program that prints `mark` and then stays alive until it is killed. */
const lingering = (mark) => `console.log(${JSON.stringify(mark)});\nsetInterval(() => {}, 1000);\n`;

function assertKilledAfterAdmission(result, stopped, mark) {
  assert.equal(result.status, 'observed', JSON.stringify(result.problems));
  assert.equal(result.process.stopped, stopped);
  assert.equal(result.process.killSent, true);
  assert.deepEqual(result.process.exit, { code: null, signal: 'SIGKILL' });
  assert.equal(result.process.admission, 'admitted');
  assert.equal(result.process.pipesClosed, true);
  // A stop reason is a fact, not a verdict: the admitted run stays attributable.
  assert.equal(result.attributable, true, JSON.stringify(result.problems));
  if (mark) assert.equal(text(result).stdout, `${mark}\n`, 'the entry ran before the stop');
}

test('stop timeout: a program that outlives timeoutMs is killed, still attributable', async (t) => {
  const { root, executor } = makeRoot(t);
  const mark = marker();
  const result = await executor.run(request(lingering(mark), { timeoutMs: 4000 }));
  assertKilledAfterAdmission(result, 'timeout', mark);
  assert.ok(result.process.durationMs >= 4000);
  assertNothingLeft(root);
});

test('a stop before the sandbox is set up still kills all of it: timeoutMs 1, ten times', async (t) => {
  const { root, executor } = makeRoot(t);
  const mark = marker();
  for (let i = 0; i < 10; i++) {
    const result = await executor.run(request(lingering(mark), { timeoutMs: 1 }));
    assert.equal(result.status, 'observed', `run ${i}: ${result.problems}`);
    assert.equal(result.process.stopped, 'timeout');
    assert.equal(result.process.pipesClosed, true);
    assert.ok(!text(result).stdout.includes(mark), 'the entry never ran');
    assert.deepEqual(result.namespace, { state: 'removed', durable: true });
    assertNothingLeft(root);
  }
});

test('stop cancelled: an abort after go kills the program, still attributable', async (t) => {
  const { root, executor } = makeRoot(t);
  const mark = marker();
  const controller = new AbortController();
  onEvent(t, 'admitted', () => setTimeout(() => controller.abort(), 1500));
  const result = await executor.run(request(lingering(mark)), controller.signal);
  assertKilledAfterAdmission(result, 'cancelled', mark);
  assertNothingLeft(root);
});

test('stop output-limit: outputBytes counts everything, exactly maxOutputBytes are kept', async (t) => {
  const { root, executor } = makeRoot(t);
  const max = 1000;
  const result = await executor.run(
    request(
      `process.stdout.write('o'.repeat(700));
process.stderr.write('e'.repeat(100000));
process.stdout.write('O'.repeat(100000));
setInterval(() => {}, 1000);\n`,
      { maxOutputBytes: max },
    ),
  );
  assertKilledAfterAdmission(result, 'output-limit', null);
  const { stdout, stderr } = result.process;
  assert.ok(result.process.outputBytes > max);
  assert.equal(stdout.length + stderr.length, max);
  // What was kept is a prefix of what each stream received.
  assert.ok(stdout.toString().startsWith('o'.repeat(Math.min(700, stdout.length))));
  assert.match(stdout.toString(), /^o*O*$/);
  assert.match(stderr.toString(), /^e*$/);
  assertNothingLeft(root);
});

/** The bwrap argv with the stage's cpu limit argument replaced by `cpu`. */
function wrongCpuLimit(cpu) {
  return (argv) => {
    const copy = [...argv];
    copy[stageIndex(copy, toolPaths().stage) + 1] = String(cpu);
    return copy;
  };
}

test('stop limits-mismatch: limits that differ from the request never run the entry', async (t) => {
  const { root, executor } = makeRoot(t);
  const mark = marker();
  const result = await withPatchedProfile({ argv: wrongCpuLimit(7) }, () =>
    executor.run(request(lingering(mark), { cpuSeconds: 5 })),
  );
  assert.equal(result.status, 'observed');
  assert.equal(result.process.stopped, 'limits-mismatch');
  assert.equal(result.process.admission, 'admitted', 'the stage admitted, the host refused');
  assert.deepEqual(result.process.limits.cpuSeconds, { soft: 7, hard: 7 }, 'measured, not requested');
  assert.equal(result.attributable, false);
  assert.ok(result.problems.some((p) => p.startsWith('limits-mismatch')), result.problems.join());
  assert.equal(result.process.killSent, true);
  assert.ok(!text(result).stdout.includes(mark), 'the entry never ran');
  assertNothingLeft(root);
});

/** The bwrap argv with the stage's `processes` limit set: it then reports ten limit lines. */
function extraLimit(argv) {
  const copy = [...argv];
  copy[stageIndex(copy, toolPaths().stage) + 5] = '4096';
  return copy;
}

/**
 * The bwrap argv with the stage (and its gate) replaced by node running `script` as the
 * sandbox's pid 1: a broken launch stage that holds the control channel (fd 3) itself.
 */
function nodeInsteadOfStage(script) {
  return (argv) => {
    const i = stageIndex(argv, toolPaths().stage);
    return [...argv.slice(0, i), fs.realpathSync(process.execPath), '-e', script];
  };
}

test('stop control-malformed: control text that is not limits and the record never runs the entry', async (t) => {
  const { root, executor } = makeRoot(t);
  const mark = marker();
  // Ten limit lines and the record: a stage and a host that disagree on what is reported.
  const result = await withPatchedProfile({ argv: extraLimit }, () => executor.run(request(lingering(mark))));
  assert.equal(result.status, 'observed');
  assert.equal(result.process.stopped, 'control-malformed');
  assert.equal(result.process.admission, 'malformed');
  assert.equal(result.attributable, false);
  assert.ok(!text(result).stdout.includes(mark), 'the entry never ran');
  assertNothingLeft(root);
});

test('the first stop wins: a cancellation at admission is not replaced by limits-mismatch', async (t) => {
  const { root, executor } = makeRoot(t);
  const mark = marker();
  const controller = new AbortController();
  // The abort stops the run synchronously inside the gate, before the limits are compared.
  onEvent(t, 'admitted', () => controller.abort());
  const result = await withPatchedProfile({ argv: wrongCpuLimit(9) }, () =>
    executor.run(request(lingering(mark), { cpuSeconds: 5 }), controller.signal),
  );
  assert.equal(result.process.stopped, 'cancelled');
  assert.ok(result.problems.some((p) => p.startsWith('limits-mismatch')), 'the mismatch is still a problem');
  assert.ok(!text(result).stdout.includes(mark));
  assertNothingLeft(root);
});

test('no stop is recorded after the exit: a timeout that elapses after the program exited', async (t) => {
  const { root, executor } = makeRoot(t);
  const timeoutMs = 4000;
  let started = 0;
  onEvent(t, 'launched', () => (started = performance.now()));
  // After go, block the host's event loop (in a timer callback) past timeoutMs: the program
  // exits meanwhile, and the loop's poll phase (exit, status, pipes) runs before the next
  // timers phase could fire the timeout.
  onEvent(t, 'admitted', () =>
    setTimeout(() => blockFor(started + timeoutMs + 2000 - performance.now()), 0),
  );
  const result = await executor.run(request('console.log("done");\n', { timeoutMs }));
  assert.ok(result.process.durationMs > timeoutMs, 'the timeout elapsed before collection ended');
  assert.equal(result.process.stopped, null);
  assert.equal(result.process.killSent, false);
  assert.deepEqual(result.process.exit, { code: 0, signal: null });
  assert.equal(text(result).stdout, 'done\n');
  assert.equal(result.attributable, true);
  assertNothingLeft(root);
});

// ---------------------------------------------------------------------------------------------
// Admission states (invariant 5) and what each means for attribution (invariant 9)

test('admission refused: a visible host tool makes the gate exit 125 and the entry never runs', async (t) => {
  const { root, executor } = makeRoot(t);
  const mark = marker();
  // The gate's host tool aimed at a file the sandbox does see (node itself, bound read-only):
  // what the gate sees when the host's files are visible.
  const visible = (argv) => {
    const copy = [...argv];
    const i = stageIndex(copy, toolPaths().stage);
    assert.equal(copy[i + 6], 'gate');
    copy[i + 8] = fs.realpathSync(process.execPath);
    return copy;
  };
  const result = await withPatchedProfile({ argv: visible }, () => executor.run(request(lingering(mark))));
  assert.equal(result.status, 'observed');
  assert.equal(result.process.admission, 'refused');
  assert.deepEqual(result.process.exit, { code: 125, signal: null });
  assert.equal(result.attributable, false);
  assert.ok(result.problems.some((p) => p.startsWith('admission refused')));
  assert.ok(!text(result).stdout.includes(mark));
  assertNothingLeft(root);
});

test('admission refused: a readable canary (a permissive profile) never runs the entry', async (t) => {
  const { root, executor } = makeRoot(t);
  const mark = marker();
  let slot = null;
  onEvent(t, 'materialised', (m) => (slot = m.namespace));
  // Bind the canary directory like the other parts: staged as a clone for a root caller,
  // re-mounted over itself for an unprivileged one.
  const staged = () => (isRoot ? '/tmp/canary' : path.join(slot, 'canary'));
  const patch = {
    mounts: (mounts) => [
      ...mounts,
      { source: path.join(slot, 'canary'), target: staged(), readonly: true, noexec: true, isFile: false },
    ],
    argv: (argv) => {
      const i = argv.indexOf('--chdir');
      return [...argv.slice(0, i), '--ro-bind', staged(), path.join(slot, 'canary'), ...argv.slice(i)];
    },
  };
  const result = await withPatchedProfile(patch, () => executor.run(request(lingering(mark))));
  assert.equal(result.status, 'observed');
  assert.equal(result.process.admission, 'refused', JSON.stringify(text(result)));
  assert.deepEqual(result.process.exit, { code: 125, signal: null });
  assert.equal(result.attributable, false);
  assert.ok(!text(result).stdout.includes(mark));
  assertNothingLeft(root);
});

test('admission absent: a launcher that fails before the stage runs never runs the entry', async (t) => {
  const { root, executor } = makeRoot(t);
  const mark = marker();
  const result = await withPatchedProfile(
    { argv: (argv) => [argv[0], '--no-such-bwrap-option', ...argv.slice(1)] },
    () => executor.run(request(lingering(mark))),
  );
  assert.equal(result.status, 'observed');
  assert.equal(result.process.admission, 'absent');
  assert.equal(result.process.limits, null, 'the stage never reported');
  assert.notEqual(result.process.exit.code, 0);
  assert.match(text(result).stderr, /no-such-bwrap-option/);
  assert.equal(result.attributable, false);
  assert.ok(result.problems.some((p) => p.startsWith('admission absent')));
  assert.ok(!text(result).stdout.includes(mark));
  assertNothingLeft(root);
});

test('admission malformed: more than 1024 bytes of control text stop the run', async (t) => {
  const { root, executor } = makeRoot(t);
  const mark = marker();
  const flood = `require('node:fs').writeSync(3, 'x'.repeat(2000) + '\\n');`;
  const result = await withPatchedProfile({ argv: nodeInsteadOfStage(flood) }, () =>
    executor.run(request(lingering(mark))),
  );
  assert.equal(result.status, 'observed');
  assert.equal(result.process.admission, 'malformed');
  assert.equal(result.process.stopped, 'control-malformed');
  assert.equal(result.process.limits, null);
  assert.equal(result.attributable, false);
  assert.ok(result.problems.some((p) => p.startsWith('admission malformed')));
  assert.ok(!text(result).stdout.includes(mark));
  assertNothingLeft(root);
});

test('not executed: an execve that fails after admission is reported, not passed off as exit 125', async (t) => {
  const { root, executor } = makeRoot(t);
  // The program path after the stage's `--` aimed at a file that does not exist in the sandbox.
  const missing = (argv) => {
    const copy = [...argv];
    const i = copy.indexOf('--', stageIndex(copy, toolPaths().stage));
    copy[i + 1] = '/nonexistent-node';
    return copy;
  };
  const result = await withPatchedProfile({ argv: missing }, () => executor.run(request(HELLO)));
  assert.equal(result.status, 'observed');
  assert.equal(result.process.admission, 'admitted', 'the gate passed; the exec failed after go');
  assert.deepEqual(result.process.exit, { code: 125, signal: null });
  assert.equal(result.attributable, false);
  assert.ok(
    result.problems.some((p) => p === 'not executed: execve of the program failed after admission (errno 2)'),
    result.problems.join(),
  );
  assert.equal(text(result).stdout, '');
  assertNothingLeft(root);
});

// ---------------------------------------------------------------------------------------------
// Limits, measured inside and reported (invariants 5 and 6)

test('a CPU runaway dies of its CPU limit and reports the signal it really died of', async (t) => {
  const { root, executor } = makeRoot(t);
  const result = await executor.run(request('for (;;) {}\n', { cpuSeconds: 1, timeoutMs: 120_000 }));
  assert.equal(result.status, 'observed');
  assert.equal(result.attributable, true, JSON.stringify(result.problems));
  assert.equal(result.process.stopped, null, 'the host did not stop it');
  assert.equal(result.process.killSent, false);
  assert.equal(result.process.exit.code, null);
  assert.ok(['SIGXCPU', 'SIGKILL'].includes(result.process.exit.signal), result.process.exit.signal);
  const { userCpuMs, systemCpuMs } = result.process.resources;
  // It spent its second of CPU. The kernel enforces RLIMIT_CPU on tick-sampled time, while
  // the reaped rusage is the precise runtime: on a contended host (measured here: 2 cores,
  // load 5) the precise figure at the kill was 830-970 ms, hence the margin.
  assert.ok(userCpuMs + systemCpuMs >= 700, `${userCpuMs} + ${systemCpuMs} ms`);
  assert.ok(userCpuMs + systemCpuMs < 3000, `${userCpuMs} + ${systemCpuMs} ms`);
  assertNothingLeft(root);
});

/** Parses /proc/<pid>/limits text: { name: { soft, hard } } with 'unlimited' or numbers. */
function parseProcLimits(textOf) {
  const out = {};
  for (const line of textOf.split('\n').slice(1)) {
    const m = /^(.+?)\s{2,}(\S+)\s+(\S+)/.exec(line);
    if (!m) continue;
    const v = (s) => (s === 'unlimited' ? 'unlimited' : Number(s));
    out[m[1]] = { soft: v(m[2]), hard: v(m[3]) };
  }
  return out;
}

test('descriptors: opening files fails with EMFILE at maxDescriptors; limits reported equal the request', async (t) => {
  const { executor } = makeRoot(t);
  const maxDescriptors = 100;
  const cpuSeconds = 17;
  const result = await executor.run(
    request(
      `import fs from 'node:fs';
const limits = fs.readFileSync('/proc/self/limits', 'utf8');
const fds = [];
let code = null;
for (let i = 0; i < 100000; i++) {
  try { fds.push(fs.openSync('data.txt', 'r')); } catch (error) { code = error.code; break; }
}
console.log(JSON.stringify({ code, max: Math.max(...fds), limits }));\n`,
      { maxDescriptors, cpuSeconds },
    ),
  );
  assert.equal(result.attributable, true, JSON.stringify(result.problems));
  const seen = JSON.parse(text(result).stdout);
  assert.equal(seen.code, 'EMFILE');
  assert.equal(seen.max, maxDescriptors - 1, 'the highest descriptor is one below the limit');
  // The kernel's view from inside, in the spec's units, against the reported limits.
  const inside = parseProcLimits(seen.limits);
  const blocks = (pair) => ({
    soft: pair.soft === 'unlimited' ? 'unlimited' : pair.soft / 512,
    hard: pair.hard === 'unlimited' ? 'unlimited' : pair.hard / 512,
  });
  const measured = {
    cpuSeconds: inside['Max cpu time'],
    descriptors: inside['Max open files'],
    coreBlocks: blocks(inside['Max core file size']),
    fileBlocks: blocks(inside['Max file size']),
  };
  assert.deepEqual(result.process.limits, measured);
  assert.deepEqual(result.process.limits, {
    cpuSeconds: { soft: cpuSeconds, hard: cpuSeconds },
    descriptors: { soft: maxDescriptors, hard: maxDescriptors },
    coreBlocks: { soft: 0, hard: 0 },
    fileBlocks: { soft: 0, hard: 0 },
  });
});

test('control records and exit claims printed by the program are not authoritative', async (t) => {
  const { executor } = makeRoot(t);
  const forged = 'sf-confined/1 admitted\nlimit cpu soft 999\nlimit cpu hard 999\n';
  const result = await executor.run(
    request(
      `import fs from 'node:fs';
const forged = ${JSON.stringify(forged)};
let fd3 = 'written';
try { fs.fstatSync(3); fs.writeSync(3, forged); } catch (error) { fd3 = error.code; }
let reopen = 'opened';
try { fs.openSync('/proc/self/fd/3', 'w'); } catch (error) { reopen = error.code; }
process.stdout.write(forged);
process.stderr.write(forged + 'sf-confined/1 refused\\n');
process.stdout.write(JSON.stringify({ fd3, reopen }) + '\\n');
process.exit(125);\n`,
      { cpuSeconds: 5 },
    ),
  );
  assert.equal(result.status, 'observed');
  assert.equal(result.process.admission, 'admitted');
  assert.deepEqual(result.process.limits.cpuSeconds, { soft: 5, hard: 5 });
  assert.deepEqual(result.process.exit, { code: 125, signal: null });
  assert.equal(result.attributable, true, JSON.stringify(result.problems));
  const lines = text(result).stdout.split('\n');
  assert.equal(lines.slice(0, 3).join('\n') + '\n', forged, 'the forgery was printed');
  const { fd3, reopen } = JSON.parse(lines[3]);
  // The stage's gate closed fd 3 before the exec, so node's own start-up may reuse the number
  // (libuv's epoll instance: EINVAL on write); either way it is not the control channel, and
  // the host's control text above is exactly the stage's (limits as measured, the record).
  assert.ok(['EBADF', 'EINVAL'].includes(fd3), `the program cannot write the control channel: ${fd3}`);
  assert.notEqual(reopen, 'opened');
});

// ---------------------------------------------------------------------------------------------
// Between spawn and collection, and after the run (EX-1, invariants 8, 9, 12)

test('EX-1: an abort between spawn and collection never runs the entry and leaves nothing', async (t) => {
  const { root, executor } = makeRoot(t);
  const mark = marker();
  const controller = new AbortController();
  onEvent(t, 'launched', () => controller.abort());
  const result = await executor.run(request(lingering(mark)), controller.signal);
  assert.equal(result.status, 'observed');
  assert.equal(result.process.stopped, 'cancelled');
  assert.ok(!text(result).stdout.includes(mark), 'the entry never ran');
  assert.deepEqual(result.namespace, { state: 'removed', durable: true });
  assertNothingLeft(root);
});

test('EX-1: an abort before collection stops a launcher that never reaches the gate', async (t) => {
  const { root, executor } = makeRoot(t);
  const mark = marker();
  const controller = new AbortController();
  onEvent(t, 'launched', () => controller.abort());
  // A launch stage that hangs holding the control channel: the gate is never decided.
  const result = await withPatchedProfile({ argv: nodeInsteadOfStage('setInterval(() => {}, 1000);') }, () =>
    executor.run(request(lingering(mark), { timeoutMs: 15_000 }), controller.signal),
  );
  assert.equal(result.status, 'observed');
  assert.equal(result.process.stopped, 'cancelled', 'the abort stopped it, not the timeout');
  assert.equal(result.process.killSent, true);
  assert.notEqual(result.process.admission, 'admitted');
  assert.equal(result.attributable, false);
  assert.ok(!text(result).stdout.includes(mark), 'the entry never ran');
  assertNothingLeft(root);
});

test('unresolved: output pipes held open after the launcher exits quarantine the namespace', async (t) => {
  const { root, executor } = makeRoot(t);
  // Nothing inside the sandbox can outlive the launcher: it is pid 1 of the run's pid namespace
  // (native/spawn_linux.c). A writer outside it can: here a host process that inherited the
  // launcher's stdout (as a concurrent fork of the host would, until its exec). Its argument is
  // unique so that the test can find and end it.
  const tag = `4.${Date.now() % 100000}${process.pid}`;
  let slot = null;
  onEvent(t, 'materialised', (m) => (slot = m.namespace));
  const spawn = native.spawn;
  t.after(() => {
    native.spawn = spawn;
    for (const pid of processesOf(-1, tag)) process.kill(pid, 'SIGKILL');
  });
  native.spawn = (plan) => {
    childProcess.spawn('/bin/sleep', [tag], { stdio: ['ignore', plan.fds[1], 'ignore'] }).unref();
    return spawn(plan);
  };
  const result = await executor.run(request(HELLO));
  native.spawn = spawn;
  assert.equal(result.status, 'unresolved');
  assert.equal('attributable' in result, false);
  assert.equal(result.process.pipesClosed, false);
  assert.deepEqual(result.process.exit, { code: 0, signal: null }, 'the launcher itself was reaped');
  assert.ok(result.problems.some((p) => p.startsWith('pipes open')), result.problems.join());
  assert.equal(result.namespace.state, 'quarantined');
  assert.equal(result.namespace.path, slot);
  assert.deepEqual(listing(root), [path.basename(slot)], 'the namespace is preserved');
  assert.equal(processesOf(-1, tag).length, 1, 'the writer is still alive: resources are live');
});

test('nothing the launcher started outlives it: its pid namespace ends with it (control: unconfined, the child lives)', async (t) => {
  const { root, executor } = makeRoot(t);
  // A launcher that leaves a background child holding its stdout and exits at once: the shape
  // of bwrap killed during its setup, whose sandbox process is left without its monitor.
  const tag = `5.${Date.now() % 100000}${process.pid}`;
  t.after(() => {
    for (const pid of processesOf(-1, tag)) process.kill(pid, 'SIGKILL');
  });
  const shell = ['/bin/sh', '-c', `/bin/sleep ${tag} & exit 0`];
  // Control: the same launcher spawned by the host as a plain child leaves the sleep alive.
  const control = childProcess.spawnSync(shell[0], shell.slice(1), { stdio: 'ignore' });
  assert.equal(control.status, 0);
  assert.equal(processesOf(-1, tag).length, 1, 'unconfined, the background child outlives its parent');
  for (const pid of processesOf(-1, tag)) process.kill(pid, 'SIGKILL');
  const end = performance.now() + 5000;
  while (processesOf(-1, tag).length > 0 && performance.now() < end) await new Promise((r) => setTimeout(r, 10));
  assert.deepEqual(processesOf(-1, tag), []);

  const result = await withPatchedProfile({ argv: () => shell }, () => executor.run(request(HELLO)));
  assert.equal(result.status, 'observed', JSON.stringify(result));
  assert.equal(result.process.pipesClosed, true, 'the background child died with the launcher');
  assert.deepEqual(result.process.exit, { code: 0, signal: null });
  assert.equal(result.process.admission, 'absent');
  assert.deepEqual(result.problems, ['admission absent: the program never ran']);
  assert.deepEqual(result.namespace, { state: 'removed', durable: true });
  assert.deepEqual(listing(root), []);
  assert.deepEqual(processesOf(-1, tag), [], 'no process of the launcher is left');
});

test('a namespace changed during the run: observed, not attributable, quarantined', async (t) => {
  const { root, executor } = makeRoot(t);
  let slot = null;
  onEvent(t, 'admitted', (m) => {
    slot = m.namespace;
    fs.appendFileSync(path.join(slot, 'input', 'data.txt'), 'changed\n');
  });
  const result = await executor.run(request(HELLO));
  assert.equal(result.status, 'observed');
  assert.equal(result.attributable, false);
  assert.ok(result.problems.some((p) => p.startsWith('namespace changed')), result.problems.join());
  assert.equal(result.namespace.state, 'quarantined');
  assert.equal(result.namespace.path, slot);
  assert.deepEqual(listing(root), [path.basename(slot)]);
  assert.equal(fs.readFileSync(path.join(slot, 'input', 'data.txt'), 'utf8'), 'input data\nchanged\n');
});

test('a runtime changed during the run: observed, not attributable, the namespace still removed', async (t) => {
  // The stage helper is a pinned launcher of the runtime. Replacing it needs write access to
  // the build directory, which the nobody suite's root-owned copy does not give.
  const stage = toolPaths().stage;
  try {
    fs.accessSync(path.dirname(stage), fs.constants.W_OK);
  } catch {
    t.skip(`cannot replace ${stage} as this user (read-only package copy)`);
    return;
  }
  const { root, executor } = makeRoot(t);
  const req = request(HELLO);
  const backup = `${stage}.exectests-backup`;
  let replaced = false;
  const restore = () => {
    if (replaced) fs.renameSync(backup, stage);
    replaced = false;
  };
  t.after(restore);
  const off = onEvent(t, 'admitted', () => {
    // Same bytes plus one: a different runtime file under the same path.
    fs.renameSync(stage, backup);
    replaced = true;
    fs.copyFileSync(backup, stage);
    fs.appendFileSync(stage, Buffer.of(0));
  });
  const result = await executor.run(req);
  off();
  restore();
  assert.equal(result.status, 'observed');
  assert.equal(text(result).stdout, 'hello\n', 'the program ran');
  assert.equal(result.attributable, false);
  assert.ok(result.problems.some((p) => p.startsWith('runtime changed')), result.problems.join());
  assert.deepEqual(result.namespace, { state: 'removed', durable: true });
  assertNothingLeft(root);
  // Restored: the pin holds again.
  assert.equal((await executor.run(req)).attributable, true);
});

// ---------------------------------------------------------------------------------------------
// Capacity races between controllers (invariant 3)

const ROUNDS = 50;

/** Exactly one of two racing runs ran; the other found every slot taken. */
function assertOneRan(results, round) {
  const ran = results.filter((r) => r.status === 'observed');
  const refused = results.filter((r) => r.status === 'not-started');
  assert.equal(ran.length, 1, `round ${round}: ${JSON.stringify(results)}`);
  assert.equal(refused.length, 1, `round ${round}`);
  assert.equal(refused[0].reason, 'retained-limit', `round ${round}: ${refused[0].message}`);
  assert.match(refused[0].message, /every slot is taken/);
}

test('two controllers that both counted an empty root cannot both run with maxRetained 1 (one process)', { timeout: 600_000 }, async (t) => {
  const { root } = makeRoot(t);
  const first = new ConfinedExecutor({ root, maxRetained: 1 });
  const second = new ConfinedExecutor({ root, maxRetained: 1 });
  const req = request(HELLO);
  let racing = null;
  let raced = false;
  const counts = [];
  onEvent(t, 'counted', (m) => {
    counts.push(m.retained);
    // The first controller has counted but not claimed: the second counts and claims now.
    if (raced) return;
    raced = true;
    racing = second.run(req);
  });
  for (let round = 0; round < ROUNDS; round++) {
    racing = null;
    raced = false;
    counts.length = 0;
    const mine = await first.run(req);
    const theirs = await racing;
    assert.deepEqual(counts, [0, 0], 'both counted an empty root');
    const results = [mine, theirs].map((r) => ({ status: r.status, reason: r.reason, message: r.message }));
    assertOneRan(results, round);
    assert.equal([mine, theirs].find((r) => r.status === 'observed').attributable, true);
    assertNothingLeft(root);
  }
});

test('two controllers that both counted an empty root cannot both run with maxRetained 1 (two processes)', { timeout: 900_000 }, async (t) => {
  const { base, root, executor } = makeRoot(t, { maxRetained: 1 });
  const sync = path.join(base, 'sync');
  fs.mkdirSync(sync, { mode: 0o700 });
  const { spawn } = await import('node:child_process');
  const helper = new URL('./helpers/executor-race.mjs', import.meta.url).pathname;
  const child = spawn(process.execPath, [helper, root, sync, String(ROUNDS)], {
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  t.after(() => child.exitCode === null && child.signalCode === null && child.kill('SIGKILL'));
  let round = 0;
  onEvent(t, 'counted', () => {
    fs.writeFileSync(path.join(sync, `counted-parent-${round}`), '');
    awaitFile(path.join(sync, `counted-child-${round}`), 10_000);
  });
  const req = request(HELLO);
  let bothCounted = 0;
  for (; round < ROUNDS; round++) {
    fs.writeFileSync(path.join(sync, `start-${round}`), '');
    const mine = await executor.run(req);
    const resultFile = path.join(sync, `result-${round}`);
    while (!fs.existsSync(resultFile)) {
      assert.equal(child.exitCode, null, 'the other controller is alive');
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    const theirs = JSON.parse(fs.readFileSync(resultFile, 'utf8'));
    if (fs.existsSync(path.join(sync, `counted-child-${round}`))) bothCounted++;
    assertOneRan([{ status: mine.status, reason: mine.reason, message: mine.message }, theirs], round);
    assertNothingLeft(root, { except: [child.pid] });
  }
  assert.equal(bothCounted, ROUNDS, 'in every round both controllers counted before either claimed');
  assert.deepEqual(await exited, { code: 0, signal: null });
});

// ---------------------------------------------------------------------------------------------
// Results and the host after many runs (invariant 13, issue 3 "done when")

function assertDeeplyFrozen(value, where = 'result') {
  if (value === null || typeof value !== 'object') return;
  if (Buffer.isBuffer(value)) return;
  assert.ok(Object.isFrozen(value), `${where} is frozen`);
  for (const key of Reflect.ownKeys(value)) assertDeeplyFrozen(value[key], `${where}.${String(key)}`);
}

test('results are deeply frozen; stdout and stderr are Buffers', async (t) => {
  const { base, executor } = makeRoot(t);
  const observed = await executor.run(request('console.log("out"); console.error("err");\n'));
  assert.ok(Buffer.isBuffer(observed.process.stdout));
  assert.ok(Buffer.isBuffer(observed.process.stderr));
  assertDeeplyFrozen(observed);
  for (const key of ['problems', 'identities', 'process', 'namespace'])
    assert.ok(Object.isFrozen(observed[key]), key);
  assert.ok(Object.isFrozen(observed.process.limits.cpuSeconds));
  assert.ok(Object.isFrozen(observed.process.exit));
  assert.ok(Object.isFrozen(observed.process.resources));
  assert.ok(Object.isFrozen(observed.identities.program.args));
  assert.throws(() => {
    'use strict';
    observed.process.exit.code = 1;
  }, TypeError);
  const refused = await new ConfinedExecutor({ root: path.join(base, 'missing') }).run(request(HELLO));
  assertDeeplyFrozen(refused);
});

test('the result carries the reaped process’s resource usage', async (t) => {
  const { executor } = makeRoot(t);
  const result = await executor.run(
    request(
      `let x = 0;
while (process.cpuUsage().user < 300000) x++;
const big = Buffer.alloc(32 * 1024 * 1024, 1);
console.log(JSON.stringify({ cpu: process.cpuUsage(), rss: process.memoryUsage().rss, x: x > 0 && big[7] }));\n`,
    ),
  );
  assert.equal(result.attributable, true, JSON.stringify(result.problems));
  const inside = JSON.parse(text(result).stdout);
  const { userCpuMs, systemCpuMs, maxRssKiB } = result.process.resources;
  for (const v of [userCpuMs, systemCpuMs, maxRssKiB]) assert.equal(typeof v, 'number');
  // The reaped totals include everything the program measured of itself before it exited.
  assert.ok(userCpuMs >= inside.cpu.user / 1000, `${userCpuMs} >= ${inside.cpu.user / 1000}`);
  assert.ok(systemCpuMs >= inside.cpu.system / 1000, `${systemCpuMs} >= ${inside.cpu.system / 1000}`);
  assert.ok(maxRssKiB >= Math.floor(inside.rss / 1024), `${maxRssKiB} >= ${inside.rss / 1024}`);
  assert.ok(userCpuMs >= 300, 'it spent its busy loop');
});

test('after 200 sequential runs descriptors and RSS are flat and nothing is left', { timeout: 1_800_000 }, async (t) => {
  const { root, executor } = makeRoot(t);
  const v8 = await import('node:v8');
  const vm = await import('node:vm');
  v8.setFlagsFromString('--expose-gc');
  const gc = globalThis.gc ?? vm.runInNewContext('gc');
  const req = request(HELLO);
  const runOnce = async () => {
    const result = await executor.run(req);
    assert.equal(result.attributable, true, JSON.stringify(result.problems));
    assert.equal(text(result).stdout, 'hello\n');
  };
  for (let i = 0; i < 10; i++) await runOnce();
  await new Promise((resolve) => setTimeout(resolve, 50));
  gc();
  const fdsBefore = fs.readdirSync('/proc/self/fd').length;
  const rssBefore = process.memoryUsage().rss;
  for (let i = 0; i < 200; i++) await runOnce();
  await new Promise((resolve) => setTimeout(resolve, 50));
  gc();
  const fdsAfter = fs.readdirSync('/proc/self/fd').length;
  const rssAfter = process.memoryUsage().rss;
  t.diagnostic(`descriptors ${fdsBefore} -> ${fdsAfter}, rss ${rssBefore} -> ${rssAfter}`);
  assert.ok(Math.abs(fdsAfter - fdsBefore) <= Math.max(1, fdsBefore * 0.1), `${fdsBefore} -> ${fdsAfter}`);
  // Under ASan (npm run check:native) freed memory sits in the sanitizer's quarantine, so RSS
  // says nothing about leaks there; the plain suite judges it.
  if (!/libasan/.test(process.env.LD_PRELOAD ?? ''))
    assert.ok(Math.abs(rssAfter - rssBefore) <= rssBefore * 0.1, `${rssBefore} -> ${rssAfter}`);
  assertNothingLeft(root);
});
