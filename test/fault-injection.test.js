// Fault injection (issue 10): for every EXECUTOR_CHANNEL event (counted, materialised, launched,
// admitted, collected) four synchronous subscribers inject one fault each: alter the namespace
// (or the root where no namespace exists yet, or any more), kill the child, abort the run's
// AbortController, stall the thread. Each of the 20 cases asserts the result and namespace
// disposition the spec prescribes (failure semantics, invariants 4, 8, 9, 12), then host-side
// facts: no process of the sandbox left (the run's unique marker is in its argv, so /proc finds
// every process of it), and the root holds exactly what the disposition says. No subscriber
// throws: node rethrows a subscriber's exception, so it is not a fault the executor can observe.
// Runs as root and as nobody.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { listing, makeRoot, marker, onEvent, processesOf, request, text } from './helpers/executor-fixture.js';

const STALL_MS = 300;

/** The program: prints its first argument (the run's marker) when its entry runs. */
const PROGRAM = 'console.log(process.argv[2]);\n';

/** The subscriber's stall: a synchronous busy-wait (not a sleep: the thread stays on CPU). */
function busyWait(ms) {
  const end = performance.now() + ms;
  while (performance.now() < end);
}

/**
 * Every entry under `dir`, recursively, with what identifies it on disk: type, mode, inode,
 * link count, and the sha256 of a file's bytes. Two equal trees are the same bytes in place.
 */
function tree(dir) {
  const out = [];
  const walk = (rel) => {
    const full = path.join(dir, rel);
    const st = fs.lstatSync(full);
    const entry = { path: rel, mode: st.mode, ino: st.ino, nlink: st.nlink, uid: st.uid };
    if (st.isDirectory()) {
      out.push({ ...entry, type: 'dir', entries: fs.readdirSync(full).sort() });
      for (const name of fs.readdirSync(full).sort()) walk(path.join(rel, name));
    } else {
      const sha = crypto.createHash('sha256').update(fs.readFileSync(full)).digest('hex');
      out.push({ ...entry, type: st.isFile() ? 'file' : 'other', size: st.size, sha });
    }
  };
  walk('.');
  return out;
}

/** The namespace alteration: one more line in an input file (same inode, new size and bytes). */
function alterNamespace(slot) {
  fs.appendFileSync(path.join(slot, 'input', 'data.txt'), 'changed\n');
}

/** Live launchers (children of this process) right now. */
function ourChildren() {
  return processesOf(process.pid);
}

/**
 * Runs PROGRAM with the run's marker as its argument and `fault(message, ctx)` subscribed to
 * `event`. ctx carries the run's AbortController, the slot (from materialised), the launcher
 * pid (from launched) and a `notes` object the fault fills with what it saw at that moment.
 */
async function faultedRun(t, event, fault) {
  const { root, executor } = makeRoot(t);
  const mark = marker();
  const ctx = {
    root,
    mark,
    controller: new AbortController(),
    slot: null,
    pid: null,
    treeAtLaunch: null,
    liveAtAdmission: null,
    events: [],
    notes: {},
  };
  // Registered first: the bookkeeping runs before the fault at the same publish.
  onEvent(t, null, (m) => {
    ctx.events.push(m.event);
    if (m.event === 'materialised') ctx.slot = m.namespace;
    if (m.event === 'launched') {
      ctx.pid = m.pid;
      ctx.treeAtLaunch = tree(m.namespace);
    }
    // Negative control for the host-side scan: while the program waits for go, the marker
    // finds the launcher and the processes inside the sandbox.
    if (m.event === 'admitted') ctx.liveAtAdmission = processesOf(-1, mark);
  });
  onEvent(t, event, (m) => fault(m, ctx));
  ctx.result = await executor.run(request(PROGRAM, { args: [mark] }), ctx.controller.signal);
  return ctx;
}

// ---------------------------------------------------------------------------------------------
// Expectations

/** A run the fault did not touch: observed, attributable, the entry ran, namespace removed. */
function assertUnaffected(ctx) {
  const { result, mark, events } = ctx;
  assert.equal(result.status, 'observed', JSON.stringify(result));
  assert.deepEqual(result.problems, []);
  assert.equal(result.attributable, true);
  assert.equal(result.process.admission, 'admitted');
  assert.equal(result.process.stopped, null);
  assert.equal(result.process.killSent, false);
  assert.deepEqual(result.process.exit, { code: 0, signal: null });
  assert.equal(text(result).stdout, `${mark}\n`, 'the entry ran');
  assert.deepEqual(result.namespace, { state: 'removed', durable: true });
  assert.deepEqual(events, ['counted', 'materialised', 'launched', 'admitted', 'collected']);
  assertScanSawSandbox(ctx);
}

/** The marker scan saw the launcher and at least one process inside the sandbox. */
function assertScanSawSandbox({ liveAtAdmission, pid }) {
  assert.ok(liveAtAdmission.includes(pid), 'the scan finds the launcher by its marker');
  assert.ok(liveAtAdmission.length >= 2, `the scan finds the sandbox's processes: ${liveAtAdmission}`);
}

/** A run with a namespace changed after launch (invariants 9, 12). */
function assertChangedDuringRun(ctx) {
  const { result, slot, mark } = ctx;
  assert.equal(result.status, 'observed', JSON.stringify(result));
  assert.equal(result.attributable, false);
  assert.equal(result.process.admission, 'admitted');
  assert.equal(result.process.stopped, null);
  assert.deepEqual(result.process.exit, { code: 0, signal: null });
  assert.equal(text(result).stdout, `${mark}\n`, 'the program ran; its output cannot be credited');
  assert.equal(result.problems.length, 1, result.problems.join());
  assert.match(result.problems[0], /^namespace changed/);
  assert.equal(result.namespace.state, 'quarantined');
  assert.equal(result.namespace.path, slot);
  assert.equal(typeof result.namespace.reason, 'string');
}

/**
 * Host-side facts after every case: no process of the run left anywhere on the host (its marker
 * is in the argv of bwrap, the stage and node), no child of this process left, and the root
 * holds exactly `expected` (names). `preserved`, when given, is the quarantined namespace's
 * tree as the fault left it: it must still be on disk byte for byte.
 */
function assertHost(ctx, expected, { preserved = null } = {}) {
  assert.deepEqual(processesOf(-1, ctx.mark), [], 'no process of the sandbox is left');
  assert.deepEqual(ourChildren(), [], 'no launcher is left');
  assert.deepEqual(listing(ctx.root), expected.slice().sort(), 'the root holds what the disposition says');
  if (preserved) assert.deepEqual(tree(ctx.slot), preserved, 'the quarantined namespace is preserved byte for byte');
}

// ---------------------------------------------------------------------------------------------
// counted {root, retained}: after the count, before the slot claim. No namespace exists yet.

test('counted + alter: a slot-0 created after the count is skipped by the exclusive claim', async (t) => {
  const ctx = await faultedRun(t, 'counted', (m, c) => {
    c.notes.retained = m.retained;
    fs.mkdirSync(path.join(m.root, 'slot-0'), { mode: 0o700 });
  });
  assert.equal(ctx.notes.retained, 0);
  assert.equal(ctx.slot, path.join(ctx.root, 'slot-1'), 'the claim skipped the taken slot-0');
  assertUnaffected(ctx);
  // The foreign slot-0 is untouched and still counts; the run's own slot is gone.
  assertHost(ctx, ['slot-0']);
  assert.deepEqual(listing(path.join(ctx.root, 'slot-0')), []);
});

test('counted + kill: no child exists yet, the run is unaffected', async (t) => {
  const ctx = await faultedRun(t, 'counted', (m, c) => {
    // Nothing to kill: no launcher of this run (or any other) exists at the count.
    c.notes.children = ourChildren();
  });
  assert.deepEqual(ctx.notes.children, []);
  assertUnaffected(ctx);
  assertHost(ctx, []);
});

test('counted + abort: not-started aborted before launch, the namespace removed', async (t) => {
  const ctx = await faultedRun(t, 'counted', (m, c) => c.controller.abort());
  const { result } = ctx;
  assert.equal(result.status, 'not-started', JSON.stringify(result));
  assert.equal(result.reason, 'aborted');
  assert.deepEqual(result.namespace, { state: 'removed', durable: true });
  assert.deepEqual(ctx.events, ['counted', 'materialised'], 'nothing was launched');
  assertHost(ctx, []);
});

test('counted + stall: the run is unaffected', async (t) => {
  const ctx = await faultedRun(t, 'counted', () => busyWait(STALL_MS));
  assertUnaffected(ctx);
  assertHost(ctx, []);
});

// ---------------------------------------------------------------------------------------------
// materialised {namespace}: written, not yet verified; no process exists.

test('materialised + alter: not-started snapshot-mismatch, quarantined and preserved', async (t) => {
  const ctx = await faultedRun(t, 'materialised', (m, c) => {
    alterNamespace(m.namespace);
    c.notes.tree = tree(m.namespace);
  });
  const { result } = ctx;
  assert.equal(result.status, 'not-started', JSON.stringify(result));
  assert.equal(result.reason, 'snapshot-mismatch');
  assert.equal(result.namespace.state, 'quarantined');
  assert.equal(result.namespace.path, ctx.slot);
  assert.equal(typeof result.namespace.reason, 'string');
  assert.deepEqual(ctx.events, ['counted', 'materialised'], 'nothing was launched');
  assertHost(ctx, [path.basename(ctx.slot)], { preserved: ctx.notes.tree });
  assert.equal(fs.readFileSync(path.join(ctx.slot, 'input', 'data.txt'), 'utf8'), 'input data\nchanged\n');
});

test('materialised + kill: no child exists yet, the run is unaffected', async (t) => {
  const ctx = await faultedRun(t, 'materialised', (m, c) => {
    // Nothing to kill: the launcher is spawned only after the pre-launch verification.
    c.notes.children = ourChildren();
  });
  assert.deepEqual(ctx.notes.children, []);
  assertUnaffected(ctx);
  assertHost(ctx, []);
});

test('materialised + abort: not-started aborted, the namespace removed', async (t) => {
  const ctx = await faultedRun(t, 'materialised', (m, c) => c.controller.abort());
  const { result } = ctx;
  assert.equal(result.status, 'not-started', JSON.stringify(result));
  assert.equal(result.reason, 'aborted');
  assert.deepEqual(result.namespace, { state: 'removed', durable: true });
  assert.deepEqual(ctx.events, ['counted', 'materialised'], 'nothing was launched');
  assertHost(ctx, []);
});

test('materialised + stall: the run is unaffected', async (t) => {
  const ctx = await faultedRun(t, 'materialised', () => busyWait(STALL_MS));
  assertUnaffected(ctx);
  assertHost(ctx, []);
});

// ---------------------------------------------------------------------------------------------
// launched {namespace, pid, profile}: the launcher is spawned, collection not yet attached.

test('launched + alter: observed, not attributable, the namespace quarantined and preserved', async (t) => {
  const ctx = await faultedRun(t, 'launched', (m, c) => {
    alterNamespace(m.namespace);
    c.notes.tree = tree(m.namespace);
  });
  assertChangedDuringRun(ctx);
  assertHost(ctx, [path.basename(ctx.slot)], { preserved: ctx.notes.tree });
});

/**
 * The result of a run whose launcher was killed from outside after `launched`: observed, not
 * attributable, the entry never ran, and nothing of the sandbox left. The launcher is pid 1 of
 * the run's pid namespace (native/spawn_linux.c), so its death ends every process of the run,
 * wherever in bwrap's own start the kill lands, before the host can reap it.
 */
function assertKilledFromOutside(t, ctx) {
  const { result, mark } = ctx;
  assert.equal(result.status, 'observed', JSON.stringify(result));
  assert.equal(result.attributable, false);
  assert.equal(result.process.pipesClosed, true);
  assert.equal(result.process.stopped, null);
  assert.equal(result.process.killSent, false, 'the executor sent no kill');
  assert.ok(!text(result).stdout.includes(mark), 'the entry never ran');
  assert.deepEqual(result.process.exit, { code: null, signal: 'SIGKILL' });
  if (result.process.admission === 'admitted') {
    // The gate runs within milliseconds of bwrap's start, so the kill can land after the
    // admission record. The go byte then goes out if the host wrote it before the kill had
    // ended the reader (a pipe write succeeds while a reader lives), else its write fails.
    t.diagnostic('the gate admitted, then the sandbox died with its launcher');
    const status = 'lost contact: the program exit status was not reported';
    const go = 'lost contact: the go byte could not be sent';
    assert.ok(
      [JSON.stringify([status]), JSON.stringify([go, status])].includes(JSON.stringify(result.problems)),
      result.problems.join(),
    );
  } else {
    t.diagnostic('the sandbox died with its launcher before admission');
    assert.equal(result.process.admission, 'absent');
    assert.deepEqual(result.problems, ['admission absent: the program never ran']);
  }
  assert.deepEqual(result.namespace, { state: 'removed', durable: true });
  assertHost(ctx, []);
}

test('launched + kill: the entry never ran, observed, nothing of the sandbox left', async (t) => {
  const ctx = await faultedRun(t, 'launched', (m, c) => {
    // The launcher is this process's unreaped child at this synchronous moment.
    c.notes.child = ourChildren().includes(m.pid);
    process.kill(m.pid, 'SIGKILL');
  });
  assert.equal(ctx.notes.child, true, 'the launcher was alive and unreaped when killed');
  assertKilledFromOutside(t, ctx);
});

test('launched + kill after 0-36 ms: wherever it lands in bwrap\'s start, nothing outlives the launcher', async (t) => {
  // bwrap's sandbox arms --die-with-parent only at the end of its setup, and one whose monitor
  // dies before releasing it blocks forever (seen in CI before the launcher had a pid namespace
  // of its own: an orphan alive 30 s later). The sweep lands kills across that setup (~5 ms
  // here) and the gate.
  const outcomes = new Map();
  for (let i = 0; i < 25; i++) {
    const delay = (i % 13) * 3;
    const ctx = await faultedRun(t, 'launched', (m) => {
      busyWait(delay);
      process.kill(m.pid, 'SIGKILL');
    });
    assertKilledFromOutside(t, ctx);
    const key = ctx.result.process.admission;
    outcomes.set(key, (outcomes.get(key) ?? 0) + 1);
  }
  t.diagnostic(`admission at the kill: ${JSON.stringify(Object.fromEntries(outcomes))}`);
});

test("the host's death ends every process of a run, executor and command runner (control: a plain child tree outlives its host)", async (t) => {
  const helper = fileURLToPath(new URL('./helpers/host-child.mjs', import.meta.url));
  for (const mode of ['plain', 'executor', 'command']) {
    const mark = `60.${crypto.randomInt(1e9)}`;
    const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'confined-host-')));
    t.after(() => {
      for (const pid of processesOf(-1, mark)) process.kill(pid, 'SIGKILL');
      fs.rmSync(dir, { recursive: true, force: true });
    });
    const host = spawn(process.execPath, [helper, mode, mark, dir], { stdio: ['ignore', 'pipe', 'inherit'] });
    const exited = new Promise((r) => host.once('exit', (code, signal) => r({ code, signal })));
    await new Promise((resolve, reject) => {
      host.stdout.on('data', (d) => String(d).includes('started') && resolve());
      exited.then((e) => reject(new Error(`${mode} host exited before its work started: ${JSON.stringify(e)}`)));
    });
    // The work is under way: the program (after go) or both sleeps of the tree.
    const comm = (pid) => {
      try {
        return fs.readFileSync(`/proc/${pid}/comm`, 'latin1').trim();
      } catch {
        return '';
      }
    };
    const work = () => processesOf(-1, mark).filter((pid) => pid !== host.pid && /^(sleep|node)$/.test(comm(pid)));
    const ready = () => work().length >= (mode === 'executor' ? 1 : 2);
    for (const end = performance.now() + 10_000; !ready(); await sleep(25)) {
      assert.ok(performance.now() < end, `${mode}: the work never showed up`);
    }
    host.kill('SIGKILL');
    assert.deepEqual(await exited, { code: null, signal: 'SIGKILL' });
    if (mode === 'plain') {
      await sleep(300);
      assert.equal(work().length, 2, 'unconfined, both sleeps outlive their killed host');
      for (const pid of processesOf(-1, mark)) process.kill(pid, 'SIGKILL');
      continue;
    }
    // The launcher has the parent-death signal: it dies with the host, and its pid namespace
    // with it. Nobody reaps it here (its parent is gone), hence a bounded wait.
    for (const end = performance.now() + 5000; processesOf(-1, mark).length > 0; await sleep(25)) {
      assert.ok(performance.now() < end, `${mode}: left alive: ${processesOf(-1, mark)}`);
    }
  }
});

test('launched + abort: stopped cancelled, the entry never runs, the namespace removed', async (t) => {
  const ctx = await faultedRun(t, 'launched', (m, c) => c.controller.abort());
  const { result, mark } = ctx;
  assert.equal(result.status, 'observed', JSON.stringify(result));
  assert.equal(result.process.stopped, 'cancelled');
  assert.ok(!text(result).stdout.includes(mark), 'the entry never ran');
  // The stop closes stdin and kills the launcher at once (lib/collect.js). What the sandbox got
  // done before the kill reached it depends on scheduling: nothing, the admission record, or
  // the gate's refusal at end-of-file on stdin (exit 125, reported by the stage). In no case
  // did the go byte go out.
  const { exit, admission, killSent } = result.process;
  if (exit.signal === null) {
    t.diagnostic('the gate refused at end-of-file before the kill reached it');
    assert.deepEqual(exit, { code: 125, signal: null });
  } else {
    assert.deepEqual(exit, { code: null, signal: 'SIGKILL' });
    assert.equal(killSent, true);
  }
  if (admission === 'admitted') {
    t.diagnostic('the gate admitted before the kill reached it');
    // Invariant 9: a cancellation after admission is a fact, not a problem.
    assert.deepEqual(result.problems, []);
    assert.equal(result.attributable, true);
    assert.ok(ctx.events.includes('admitted'));
  } else {
    assert.equal(admission, 'absent');
    assert.deepEqual(result.problems, ['admission absent: the program never ran']);
    assert.equal(result.attributable, false);
    assert.ok(!ctx.events.includes('admitted'));
  }
  assert.deepEqual(result.namespace, { state: 'removed', durable: true });
  assertHost(ctx, []);
});

test('launched + stall: the run is unaffected', async (t) => {
  const ctx = await faultedRun(t, 'launched', () => busyWait(STALL_MS));
  assertUnaffected(ctx);
  assertHost(ctx, []);
});

// ---------------------------------------------------------------------------------------------
// admitted {namespace, pid}: the admission record arrived; the go byte is not yet sent.

test('admitted + alter: observed, not attributable, the namespace quarantined and preserved', async (t) => {
  const ctx = await faultedRun(t, 'admitted', (m, c) => {
    alterNamespace(m.namespace);
    c.notes.tree = tree(m.namespace);
  });
  assertChangedDuringRun(ctx);
  assertHost(ctx, [path.basename(ctx.slot)], { preserved: ctx.notes.tree });
});

test('admitted + kill: observed, not attributable (lost contact), nothing left running', async (t) => {
  const ctx = await faultedRun(t, 'admitted', (m, c) => {
    c.notes.child = ourChildren().includes(m.pid);
    process.kill(m.pid, 'SIGKILL');
  });
  const { result } = ctx;
  assert.equal(ctx.notes.child, true, 'the launcher was alive and unreaped when killed');
  assertScanSawSandbox(ctx); // the sandbox was alive just before the kill
  assert.equal(result.status, 'observed', JSON.stringify(result));
  assert.equal(result.process.admission, 'admitted');
  assert.equal(result.process.stopped, null);
  assert.equal(result.process.killSent, false, 'the executor sent no kill');
  assert.equal(result.process.pipesClosed, true);
  assert.deepEqual(result.namespace, { state: 'removed', durable: true });
  if (result.attributable) {
    // On a loaded host bwrap may get the CPU to die only after the program already ran and
    // the stage reported its exit: then nothing was lost, and the run is complete.
    t.diagnostic('the program completed before the kill reached the sandbox');
    assert.deepEqual(result.problems, []);
    assert.deepEqual(result.process.exit, { code: 0, signal: null });
    assert.equal(text(result).stdout, `${ctx.mark}\n`);
    assertHost(ctx, []);
    return;
  }
  assert.ok(result.problems.length > 0);
  // Whether the go byte still reached the pipe before the sandbox died is a race; either way
  // contact was lost, and nothing else is wrong.
  for (const p of result.problems) assert.match(p, /^lost contact: /, result.problems.join());
  assert.ok(result.problems.includes('lost contact: the program exit status was not reported'));
  assert.deepEqual(result.process.exit, { code: null, signal: 'SIGKILL' });
  assert.equal(result.attributable, false);
  assertHost(ctx, []);
});

test('admitted + abort: stopped cancelled at the gate, the entry never runs, still attributable', async (t) => {
  const ctx = await faultedRun(t, 'admitted', (m, c) => c.controller.abort());
  const { result, mark } = ctx;
  assertScanSawSandbox(ctx); // the sandbox was alive just before the abort
  assert.equal(result.status, 'observed', JSON.stringify(result));
  assert.equal(result.process.admission, 'admitted');
  assert.equal(result.process.stopped, 'cancelled');
  assert.equal(result.process.killSent, true);
  // The stop closes stdin, then kills. The stage's gate, waiting for go, either dies by the kill or,
  // when it gets the CPU first (a loaded host), reads end-of-file and refuses (exit 125, which
  // the stage reports before the kill reaches it). Either way the entry never loaded.
  if (result.process.exit.signal === null) {
    t.diagnostic('the gate refused at end-of-file before the kill reached it');
    assert.deepEqual(result.process.exit, { code: 125, signal: null });
  } else {
    assert.deepEqual(result.process.exit, { code: null, signal: 'SIGKILL' });
  }
  assert.ok(!text(result).stdout.includes(mark), 'the go byte was never sent: the entry never ran');
  // Invariant 9: a cancellation after admission is a fact, not a problem.
  assert.deepEqual(result.problems, []);
  assert.equal(result.attributable, true);
  assert.deepEqual(result.namespace, { state: 'removed', durable: true });
  assertHost(ctx, []);
});

test('admitted + stall: the run is unaffected', async (t) => {
  const ctx = await faultedRun(t, 'admitted', () => busyWait(STALL_MS));
  assertUnaffected(ctx);
  assertHost(ctx, []);
});

// ---------------------------------------------------------------------------------------------
// collected {namespace}: the result is decided, the namespace already disposed of.

test('collected + alter: the namespace is already gone; a foreign entry in its place changes nothing', async (t) => {
  const ctx = await faultedRun(t, 'collected', (m, c) => {
    c.notes.gone = !fs.existsSync(m.namespace);
    // Someone else creates an entry under the freed name: foreign, the executor's result stands.
    fs.mkdirSync(m.namespace, { mode: 0o700 });
    fs.writeFileSync(path.join(m.namespace, 'foreign'), 'foreign\n');
  });
  assert.equal(ctx.notes.gone, true, 'the namespace was removed before collected');
  assertUnaffected(ctx);
  assertHost(ctx, [path.basename(ctx.slot)]);
  assert.deepEqual(listing(ctx.slot), ['foreign']);
});

test('collected + kill: the launcher is already reaped, nothing to kill, the result unaffected', async (t) => {
  const ctx = await faultedRun(t, 'collected', (m, c) => {
    // No child exists: the launcher was reaped before the result was decided.
    c.notes.children = ourChildren();
    c.notes.launcherAlive = processesOf(-1, c.mark);
  });
  assert.deepEqual(ctx.notes.children, []);
  assert.deepEqual(ctx.notes.launcherAlive, []);
  assertUnaffected(ctx);
  assertHost(ctx, []);
});

test('collected + abort: the result is already decided and unaffected', async (t) => {
  const ctx = await faultedRun(t, 'collected', (m, c) => c.controller.abort());
  assert.equal(ctx.controller.signal.aborted, true);
  assertUnaffected(ctx);
  assertHost(ctx, []);
});

test('collected + stall: the result is already decided and unaffected', async (t) => {
  const ctx = await faultedRun(t, 'collected', () => busyWait(STALL_MS));
  assertUnaffected(ctx);
  assertHost(ctx, []);
});
