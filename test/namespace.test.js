// Namespace lifecycle (spec invariants 2, 3, 4, 12): root checks, capacity, slots,
// materialisation, the pre-launch verification and verify-first removal. Every expectation
// is computed independently of the code under test (fs.lstat, readdir, node:crypto).
// Runs as root and as an unprivileged user; the two cases that need root say so.
import { execFile } from 'node:child_process';
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import * as ns from '../lib/namespace.js';

const claimHelper = fileURLToPath(new URL('./helpers/claim-slot.mjs', import.meta.url));

const isRoot = process.geteuid() === 0;
const OTHER_UID = 65534;

/** A private base directory holding `root/` (the executor root) and `outside/`. */
function setup(t) {
  const base = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'confined-ns-')));
  t.after(() => fs.rmSync(base, { recursive: true, force: true }));
  const root = path.join(base, 'root');
  const outside = path.join(base, 'outside');
  fs.mkdirSync(root, { mode: 0o700 });
  fs.mkdirSync(outside, { mode: 0o700 });
  fs.chmodSync(root, 0o700);
  return { base, root, outside };
}

const bytes = (s) => new Uint8Array(Buffer.from(s));

function sampleTree() {
  return {
    program: [
      { path: 'index.mjs', content: bytes("import './lib/a.js';\n") },
      { path: 'lib/a.js', content: bytes('export const a = 1;\n') },
      { path: 'lib/deep/b.js', content: bytes('export const b = 2;\n') },
      { path: 'lib/deep/c.json', content: bytes('{"c":3}\n') },
      { path: 'lib/empty.js', content: new Uint8Array(0) },
    ],
    input: [
      { path: 'data.txt', content: bytes('input data\n') },
      { path: 'nested/blob.bin', content: new Uint8Array(crypto.randomBytes(300_000)) },
    ],
    launch: [{ path: 'preload.cjs', content: bytes('// preload\n') }],
  };
}

/** Materialises the sample tree in a fresh slot of a fresh root. */
function fresh(t) {
  const dirs = setup(t);
  const claim = ns.claimSlot(dirs.root, 4);
  assert.equal(claim.ok, true, claim.reason);
  const tree = sampleTree();
  const made = ns.materialise(claim.path, tree);
  assert.equal(made.ok, true, made.reason);
  assert.deepEqual(ns.verify(made.manifest), { ok: true });
  return { ...dirs, slot: claim.path, tree, manifest: made.manifest };
}

const sha256 = (data) => crypto.createHash('sha256').update(data).digest('hex');

/** Everything under dir, byte for byte: type, inode, mode, links, size, content/target. */
function treeState(dir) {
  const out = [];
  const walk = (rel) => {
    const abs = path.join(dir, rel);
    const st = fs.lstatSync(abs, { bigint: true });
    const item = { rel, ino: st.ino, mode: st.mode, nlink: st.nlink, size: st.size };
    if (st.isSymbolicLink()) item.target = fs.readlinkSync(abs);
    else if (st.isFile()) item.sha256 = sha256(fs.readFileSync(abs));
    out.push(item);
    if (st.isDirectory()) for (const name of fs.readdirSync(abs).sort()) walk(path.join(rel, name));
  };
  walk('.');
  return out;
}

/** The paths the namespace must hold, derived from the tree alone. */
function expectedPaths(tree) {
  const set = new Set(['program', 'input', 'home']);
  for (const [top, files] of Object.entries(tree)) {
    set.add(top);
    for (const f of files) {
      const segs = `${top}/${f.path}`.split('/');
      for (let i = 1; i <= segs.length; i++) set.add(segs.slice(0, i).join('/'));
    }
  }
  return [...set].sort();
}

function listAll(dir, rel = '') {
  const out = [];
  for (const name of fs.readdirSync(path.join(dir, rel))) {
    const r = rel ? `${rel}/${name}` : name;
    out.push(r);
    if (fs.lstatSync(path.join(dir, r)).isDirectory()) out.push(...listAll(dir, r));
  }
  return out.sort();
}

describe('root checks', () => {
  test('a private directory owned by this user (mode 0o700) is accepted', (t) => {
    const { root } = setup(t);
    assert.equal(fs.statSync(root).mode & 0o777, 0o700);
    assert.deepEqual(ns.checkRoot(root), { ok: true });
  });

  test('a relative root is refused', () => {
    const r = ns.checkRoot('relative/root');
    assert.equal(r.ok, false);
    assert.match(r.reason, /not an absolute path/);
  });

  test('an aliased root is refused: a symlinked path, a trailing slash, a dot-dot', (t) => {
    const { base, root } = setup(t);
    const link = path.join(base, 'alias');
    fs.symlinkSync(root, link);
    assert.equal(fs.realpathSync(link), root);
    for (const alias of [link, `${root}/`, `${root}/../root`]) {
      const r = ns.checkRoot(alias);
      assert.equal(r.ok, false, alias);
      assert.match(r.reason, /not canonical/);
    }
  });

  test('a root that is not a directory is refused', (t) => {
    const { base } = setup(t);
    const file = path.join(base, 'file');
    fs.writeFileSync(file, 'x', { mode: 0o600 });
    const r = ns.checkRoot(file);
    assert.equal(r.ok, false);
    assert.match(r.reason, /not a directory/);
  });

  test('a missing root is refused', (t) => {
    const { base } = setup(t);
    const r = ns.checkRoot(path.join(base, 'absent'));
    assert.equal(r.ok, false);
    assert.match(r.reason, /cannot be resolved/);
  });

  test('a root owned by another user is refused', (t) => {
    let dir;
    if (isRoot) {
      dir = path.join(setup(t).base, 'foreign');
      fs.mkdirSync(dir, { mode: 0o700 });
      fs.chownSync(dir, OTHER_UID, OTHER_UID);
    } else {
      // Unprivileged: "/" is canonical, a directory, and owned by someone else (root).
      dir = '/';
    }
    const owner = fs.statSync(dir).uid;
    assert.notEqual(owner, process.geteuid());
    const r = ns.checkRoot(dir);
    assert.equal(r.ok, false);
    assert.match(r.reason, new RegExp(`owned by uid ${owner}, not by this user`));
  });

  test('a shared root is refused: mode 0o750, 0o701, 0o707', (t) => {
    const { root } = setup(t);
    for (const mode of [0o750, 0o701, 0o707]) {
      fs.chmodSync(root, mode);
      const r = ns.checkRoot(root);
      assert.equal(r.ok, false);
      assert.match(r.reason, new RegExp(`mode 0${mode.toString(8)}`));
    }
    fs.chmodSync(root, 0o700);
    assert.deepEqual(ns.checkRoot(root), { ok: true });
  });
});

describe('capacity', () => {
  test('every root entry counts: foreign files, leftovers, dot-files, links', (t) => {
    const { root, outside } = setup(t);
    assert.deepEqual(ns.countEntries(root), { ok: true, count: 0 });
    fs.writeFileSync(path.join(root, 'foreign.txt'), 'x');
    fs.writeFileSync(path.join(root, '.hidden'), 'x');
    fs.mkdirSync(path.join(root, 'slot-5'));
    fs.symlinkSync(outside, path.join(root, 'link'));
    const r = ns.countEntries(root);
    assert.deepEqual(r, { ok: true, count: fs.readdirSync(root).length });
    assert.equal(r.count, 4);
  });

  test('a slot is claimed by exclusive mkdir: taken names are skipped, full gives null', (t) => {
    const { root } = setup(t);
    fs.mkdirSync(path.join(root, 'slot-0')); // a leftover
    fs.writeFileSync(path.join(root, 'slot-1'), 'not even a directory');
    const first = ns.claimSlot(root, 4);
    assert.deepEqual(first, { ok: true, path: path.join(root, 'slot-2') });
    const st = fs.lstatSync(first.path);
    assert.ok(st.isDirectory());
    assert.equal(st.mode & 0o777, 0o700);
    assert.equal(st.uid, process.geteuid());
    assert.equal(ns.claimSlot(root, 4).path, path.join(root, 'slot-3'));
    const before = fs.readdirSync(root).sort();
    const full = ns.claimSlot(root, 4);
    assert.deepEqual(full, { ok: false, full: true, reason: 'every slot is taken' });
    // maxRetained bounds n even when a higher name is free.
    assert.equal(ns.claimSlot(root, 2).full, true);
    assert.deepEqual(fs.readdirSync(root).sort(), before);
  });

  test('racing claimers never exceed maxRetained: 8 processes, 3 slots', async (t) => {
    const { base, root } = setup(t);
    const go = path.join(base, 'go');
    const runs = Array.from({ length: 8 }, () =>
      promisify(execFile)(process.execPath, [claimHelper, root, '3', go]),
    );
    await new Promise((resolve) => setTimeout(resolve, 300));
    fs.writeFileSync(go, '');
    const results = (await Promise.all(runs)).map((r) => JSON.parse(r.stdout));
    const won = results.filter((r) => r.ok).map((r) => r.path).sort();
    assert.deepEqual(won, ['slot-0', 'slot-1', 'slot-2'].map((n) => path.join(root, n)));
    assert.equal(results.filter((r) => !r.ok && r.full).length, 5);
    assert.deepEqual(fs.readdirSync(root).sort(), ['slot-0', 'slot-1', 'slot-2']);
  });

  test('a failure other than EEXIST is not reported as full', (t) => {
    const { base } = setup(t);
    const r = ns.claimSlot(path.join(base, 'absent'), 2);
    assert.equal(r.ok, false);
    assert.equal(r.full, false);
  });
});

describe('materialise and verify', () => {
  test('the namespace holds exactly the tree, private, and every record matches lstat', (t) => {
    const { slot, tree, manifest } = fresh(t);
    assert.equal(manifest.path, slot);
    assert.deepEqual(listAll(slot), expectedPaths(tree));
    for (const [top, files] of Object.entries(tree))
      for (const f of files)
        assert.deepEqual(new Uint8Array(fs.readFileSync(path.join(slot, top, f.path))), f.content);
    const entries = ns.recordedEntries(manifest);
    assert.deepEqual(entries.map((e) => e.path).sort(), ['.', ...expectedPaths(tree)].sort());
    for (const e of entries) {
      const abs = path.join(slot, e.path);
      const st = fs.lstatSync(abs, { bigint: true });
      assert.equal(e.type, st.isDirectory() ? 'directory' : 'file', e.path);
      assert.equal(e.dev, st.dev, e.path);
      assert.equal(e.ino, st.ino, e.path);
      assert.equal(e.uid, Number(st.uid), e.path);
      assert.equal(e.mode, Number(st.mode), e.path);
      assert.equal(e.mode & 0o777, e.type === 'directory' ? 0o700 : 0o600, e.path);
      if (e.type === 'file') {
        assert.equal(e.size, Number(st.size));
        assert.equal(e.nlink, 1);
        assert.equal(e.sha256, sha256(fs.readFileSync(abs)), e.path);
      }
    }
    assert.deepEqual(fs.readdirSync(path.join(slot, 'home')), []);
    assert.deepEqual(ns.verify(manifest), { ok: true });
    assert.deepEqual(ns.verify(manifest), { ok: true });
  });

  test('a failed materialise records what it made, and remove takes exactly that away', (t) => {
    for (const program of [
      [
        { path: 'a.js', content: bytes('1') },
        { path: 'a.js', content: bytes('2') },
      ],
      [
        { path: 'x/y.js', content: bytes('1') },
        { path: 'x', content: bytes('2') },
      ],
      [
        { path: 'x', content: bytes('1') },
        { path: 'x/y.js', content: bytes('2') },
      ],
      [
        { path: 'ok.js', content: bytes('1') },
        { path: '../escape.js', content: bytes('2') },
      ],
      [{ path: `${'d/'.repeat(70)}deep.js`, content: bytes('1') }],
    ]) {
      const { base, root } = setup(t);
      fs.writeFileSync(path.join(root, 'foreign.txt'), 'keep');
      const slot = ns.claimSlot(root, 2).path;
      const outsideBefore = listAll(base);
      const made = ns.materialise(slot, { program });
      assert.equal(made.ok, false, JSON.stringify(program.map((f) => f.path)));
      assert.ok(made.manifest);
      assert.ok(!fs.existsSync(path.join(slot, 'escape.js')));
      const gone = ns.remove(made.manifest);
      assert.deepEqual(gone, { state: 'removed', durable: true });
      assert.deepEqual(fs.readdirSync(root), ['foreign.txt']);
      assert.deepEqual(
        listAll(base),
        outsideBefore.filter((p) => !p.startsWith('root/slot-')),
      );
    }
  });

  test('materialise refuses a slot that is not empty; removal then quarantines it', (t) => {
    const { root } = setup(t);
    const slot = ns.claimSlot(root, 2).path;
    fs.writeFileSync(path.join(slot, 'foreign'), 'keep');
    const made = ns.materialise(slot, sampleTree());
    assert.equal(made.ok, false);
    assert.match(made.reason, /not empty/);
    const before = treeState(root);
    const gone = ns.remove(made.manifest);
    assert.equal(gone.state, 'quarantined');
    assert.match(gone.reason, /unexpected entry foreign/);
    assert.deepEqual(treeState(root), before);
  });

  test('quarantine changes nothing on disk and the slot stays claimed', (t) => {
    const { root, slot, manifest } = fresh(t);
    const before = treeState(root);
    const q = ns.quarantine(manifest, 'snapshot-mismatch');
    assert.deepEqual(q, { state: 'quarantined', path: slot, reason: 'snapshot-mismatch' });
    assert.ok(Object.isFrozen(q));
    assert.deepEqual(treeState(root), before);
    assert.equal(ns.claimSlot(root, 1).full, true);
  });
});

// Each tamper: what to do, how to prove independently that it happened, and what verify
// must name. After the failed verify, remove must quarantine and change nothing.
const A = 'program/lib/a.js';
const tampers = [
  {
    name: 'a changed byte, same size and inode',
    apply({ slot }) {
      const file = path.join(slot, A);
      const ino = fs.statSync(file).ino;
      const fd = fs.openSync(file, 'r+');
      const b = Buffer.alloc(1);
      fs.readSync(fd, b, 0, 1, 0);
      b[0] ^= 1;
      fs.writeSync(fd, b, 0, 1, 0);
      fs.closeSync(fd);
      assert.equal(fs.statSync(file).ino, ino);
    },
    reason: /program\/lib\/a\.js: content changed/,
  },
  {
    name: 'an appended byte',
    apply({ slot }) {
      fs.appendFileSync(path.join(slot, A), 'x');
    },
    reason: /program\/lib\/a\.js: size changed/,
  },
  {
    name: 'a file replaced by a symlink to identical content',
    apply({ slot, outside }) {
      const copy = path.join(outside, 'a.js');
      fs.copyFileSync(path.join(slot, A), copy);
      fs.unlinkSync(path.join(slot, A));
      fs.symlinkSync(copy, path.join(slot, A));
      assert.ok(fs.lstatSync(path.join(slot, A)).isSymbolicLink());
    },
    reason: /program\/lib\/a\.js: is now a symbolic link/,
  },
  {
    name: 'a file replaced by a directory',
    apply({ slot }) {
      fs.unlinkSync(path.join(slot, A));
      fs.mkdirSync(path.join(slot, A), { mode: 0o700 });
    },
    reason: /program\/lib\/a\.js: is now a directory/,
  },
  {
    name: 'an inode swap: a copy renamed over the file',
    apply({ slot }) {
      const file = path.join(slot, A);
      const ino = fs.statSync(file).ino;
      fs.copyFileSync(file, `${file}.tmp`);
      fs.renameSync(`${file}.tmp`, file);
      assert.notEqual(fs.statSync(file).ino, ino);
    },
    reason: /program\/lib\/a\.js: replaced \(device:inode/,
  },
  {
    name: 'a hard link added outside the namespace',
    apply({ slot, outside }) {
      fs.linkSync(path.join(slot, A), path.join(outside, 'hardlink'));
      assert.equal(fs.statSync(path.join(slot, A)).nlink, 2);
    },
    reason: /program\/lib\/a\.js: has 2 hard links/,
  },
  {
    name: 'an extra file in a directory',
    apply({ slot }) {
      fs.writeFileSync(path.join(slot, 'program/lib/extra.js'), 'x');
    },
    reason: /program\/lib: unexpected entry extra\.js/,
  },
  {
    name: 'an extra dot-file in the namespace directory itself',
    apply({ slot }) {
      fs.writeFileSync(path.join(slot, '.extra'), 'x');
    },
    reason: /slot-0: unexpected entry \.extra/,
  },
  {
    name: 'a missing file',
    apply({ slot }) {
      fs.unlinkSync(path.join(slot, 'program/lib/deep/b.js'));
    },
    reason: /program\/lib\/deep\/b\.js: missing/,
  },
  {
    name: 'a directory made group and other readable (0o755)',
    apply({ slot }) {
      fs.chmodSync(path.join(slot, 'program/lib'), 0o755);
    },
    reason: /program\/lib: directory mode 0755/,
  },
  {
    name: 'the namespace directory made 0o750',
    apply({ slot }) {
      fs.chmodSync(slot, 0o750);
    },
    reason: /slot-0: directory mode 0750/,
  },
  {
    name: 'a directory replaced by a symlink to a faithful copy outside',
    apply({ slot, outside }) {
      const dir = path.join(slot, 'program/lib/deep');
      fs.cpSync(dir, path.join(outside, 'deep'), { recursive: true });
      fs.rmSync(dir, { recursive: true });
      fs.symlinkSync(path.join(outside, 'deep'), dir);
    },
    reason: /program\/lib\/deep: is now a symbolic link/,
  },
  {
    name: 'an input file changed',
    apply({ slot }) {
      const file = path.join(slot, 'input/nested/blob.bin');
      const data = fs.readFileSync(file);
      data[data.length - 1] ^= 0x80;
      fs.writeFileSync(file, data);
    },
    reason: /input\/nested\/blob\.bin: content changed/,
  },
  {
    name: 'a file given to another owner',
    needsRoot: true,
    apply({ slot }) {
      fs.chownSync(path.join(slot, A), OTHER_UID, OTHER_UID);
    },
    reason: /program\/lib\/a\.js: owner changed \(uid 65534/,
  },
];

describe('verify detects tampering, and removal then quarantines and deletes nothing', () => {
  for (const c of tampers) {
    const skip = c.needsRoot && !isRoot ? 'needs root to give a file to another uid' : false;
    test(c.name, { skip }, (t) => {
      const ctx = fresh(t);
      fs.writeFileSync(path.join(ctx.root, 'foreign.txt'), 'foreign');
      fs.writeFileSync(path.join(ctx.outside, 'keep.txt'), 'keep');
      c.apply(ctx);
      const v = ns.verify(ctx.manifest);
      assert.equal(v.ok, false);
      assert.match(v.reason, c.reason);
      const before = treeState(ctx.base);
      const gone = ns.remove(ctx.manifest);
      assert.deepEqual(gone, { state: 'quarantined', path: ctx.slot, reason: v.reason });
      assert.ok(Object.isFrozen(gone));
      assert.deepEqual(treeState(ctx.base), before);
      // The slot stays claimed.
      assert.ok(fs.lstatSync(ctx.slot).isDirectory());
    });
  }

  test('a change of file mode alone is not detected (as the spec says)', (t) => {
    const { slot, manifest, root } = fresh(t);
    fs.chmodSync(path.join(slot, A), 0o644);
    fs.chmodSync(path.join(slot, 'program/index.mjs'), 0o400);
    assert.equal(fs.statSync(path.join(slot, A)).mode & 0o777, 0o644);
    assert.deepEqual(ns.verify(manifest), { ok: true });
    assert.deepEqual(ns.remove(manifest), { state: 'removed', durable: true });
    assert.deepEqual(fs.readdirSync(root), []);
  });
});

describe('removal', () => {
  test('after a clean run it leaves nothing, is durable, and spares every foreign entry', (t) => {
    const { base, root, outside, manifest, slot } = fresh(t);
    fs.writeFileSync(path.join(root, 'foreign.txt'), 'foreign');
    fs.writeFileSync(path.join(outside, 'keep.txt'), 'keep');
    fs.mkdirSync(path.join(root, 'slot-3'), { mode: 0o700 });
    fs.writeFileSync(path.join(root, 'slot-3', 'leftover'), 'leftover');
    const spared = treeState(base).filter((e) => !`${e.rel}/`.startsWith('root/slot-0/'));
    const gone = ns.remove(manifest);
    assert.deepEqual(gone, { state: 'removed', durable: true });
    assert.ok(Object.isFrozen(gone));
    assert.ok(!fs.existsSync(slot));
    assert.deepEqual(fs.readdirSync(root).sort(), ['foreign.txt', 'slot-3']);
    assert.deepEqual(
      treeState(base),
      spared.map((e) => (e.rel === 'root' ? { ...e, ...pick(fs.lstatSync(root, { bigint: true })) } : e)),
    );
    // The slot is free again.
    assert.equal(ns.claimSlot(root, 1).path, slot);
  });

  test('a removed namespace no longer verifies and cannot be removed twice', (t) => {
    const { manifest } = fresh(t);
    assert.equal(ns.remove(manifest).state, 'removed');
    const v = ns.verify(manifest);
    assert.equal(v.ok, false);
    assert.match(v.reason, /already removed/);
    assert.throws(() => ns.remove(manifest), /already removed/);
  });

  test('no descriptor is left open, on success or on a surprise', { skip: process.platform !== 'linux' && 'counts /proc/self/fd' }, (t) => {
    const open = () => fs.readdirSync('/proc/self/fd').length;
    const before = open();
    for (let i = 0; i < 20; i++) {
      const ctx = fresh(t);
      if (i % 2) fs.writeFileSync(path.join(ctx.slot, 'program/lib/deep/extra'), 'x');
      ns.verify(ctx.manifest);
      ns.remove(ctx.manifest);
    }
    assert.equal(open(), before);
  });

  test('a forged manifest is refused', () => {
    assert.throws(() => ns.verify({ path: '/tmp' }), TypeError);
    assert.throws(() => ns.remove({}), TypeError);
  });
});

// The root's own nlink and size change when slot-0 goes; everything else must not.
function pick(st) {
  return { ino: st.ino, mode: st.mode, nlink: st.nlink, size: st.size };
}
