// ConfinedExecutor.run on Linux (issue 3): one test per claim of the spec's contract suite,
// each judged from host-side facts (the root's listing, /proc, the program's own report of
// what it saw) rather than from the executor's word alone. Runs as root and as nobody.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { ConfinedExecutor } from '../lib/executor.js';
import { CONFINED_ENVIRONMENT_KEYS } from '../lib/constants.js';
import { PRELOAD_TEMPLATE, ADMISSION_RECORD, toolPaths } from '../lib/profile.js';
import { withPatchedProfile } from '../lib/testing.js';
import {
  assertNothingLeft,
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
