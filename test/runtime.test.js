// describeRuntime(): closure equals ldd's, deep freezing, aliases, the pinning code
// noticing every byte change (on copies, never on system files), the memo noticing every
// change of a closure on the very next call (on fixtures), the ELF and ld.so.cache
// parsers on hand-built bytes, and timings.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  closeSync,
  readFileSync,
  readSync,
  readlinkSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ConfinedExecutorError } from '../lib/errors.js';
import { hostLaunchers, hostProblem } from '../lib/host.js';
import { helperPath, native } from '../lib/native.js';
import {
  buildIdentity,
  closureIdentity,
  describeRuntime,
  hashFiles,
  loaderConfig,
  parseLoaderHelp,
  verifyRuntime,
} from '../lib/runtime.js';
import { buildElf, buildLdCache, buildOldLdCache, DT } from './helpers/elf-builder.js';

const problem = process.platform === 'linux' ? hostProblem() : 'not Linux';
const skip = problem ? `host cannot run the Linux backend: ${problem}` : false;
const sha256 = (bytes) => createHash('sha256').update(bytes).digest('hex');
const hasGcc = spawnSync('gcc', ['--version'], { stdio: 'ignore' }).status === 0;

/** ldd's view of an executable, parsed here: real paths of every file it lists. */
function lddFiles(exe) {
  const out = execFileSync('ldd', [exe], { env: { PATH: '/usr/bin:/bin' }, encoding: 'utf8' });
  const files = new Set([realpathSync(exe)]);
  const opened = [];
  let interpreter = null;
  for (const line of out.split('\n')) {
    const t = line.trim();
    if (!t || /statically linked|not a dynamic executable/.test(t)) continue;
    assert.doesNotMatch(t, /not found/, `ldd ${exe}: ${t}`);
    let m = /^\S+ => (\/\S+) \(0x[0-9a-f]+\)$/.exec(t);
    if (m) {
      opened.push(m[1]);
      files.add(realpathSync(m[1]));
      continue;
    }
    m = /^(\/\S+) \(0x[0-9a-f]+\)$/.exec(t);
    if (m) {
      interpreter = realpathSync(m[1]);
      opened.push(m[1]);
      files.add(interpreter);
      continue;
    }
    assert.match(t, /^linux-(vdso|gate)\.so\.\d+ \(0x[0-9a-f]+\)$/, `unexpected ldd line: ${t}`);
  }
  return { files, interpreter, opened };
}

/** Symlinks met while resolving `p` component by component (independent of the C walk). */
function symlinksOf(p, acc = new Map(), depth = 0) {
  assert.ok(depth < 40);
  const parts = p.split('/').filter(Boolean);
  let cur = '';
  for (let i = 0; i < parts.length; i++) {
    const next = `${cur}/${parts[i]}`;
    if (lstatSync(next).isSymbolicLink()) {
      const target = readlinkSync(next);
      acc.set(`${next}\0${target}`, { link: next, target });
      const base = target.startsWith('/') ? target : `${cur}/${target}`;
      return symlinksOf([base, ...parts.slice(i + 1)].join('/'), acc, depth + 1);
    }
    cur = next;
  }
  return acc;
}

function assertDeepFrozen(value, where = 'identity') {
  if (value === null || typeof value !== 'object') return;
  assert.ok(Object.isFrozen(value), `${where} is frozen`);
  for (const key of Reflect.ownKeys(value)) assertDeepFrozen(value[key], `${where}.${String(key)}`);
}

test('describeRuntime() lists exactly what ldd lists for node and each launcher', { skip }, () => {
  const id = describeRuntime();
  const nodePath = realpathSync(process.execPath);
  const launchers = hostLaunchers();
  assert.equal(launchers.length, 2);
  assert.equal(launchers[0], realpathSync(existsSync('/usr/bin/bwrap') ? '/usr/bin/bwrap' : '/bin/bwrap'));
  assert.equal(launchers[1], realpathSync(helperPath('stage')));
  const expected = new Set();
  const interpreters = new Set();
  for (const exe of [nodePath, ...launchers]) {
    const { files, interpreter } = lddFiles(exe); // includes ldd of the stage helper
    for (const f of files) expected.add(f);
    if (interpreter) interpreters.add(interpreter);
  }
  const listed = id.files.map((f) => f.path);
  assert.deepEqual([...listed].sort(), [...expected].sort());
  assert.equal(new Set(listed).size, listed.length, 'one entry per real path');
  const sorted = [...listed].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  assert.deepEqual(listed, sorted, 'files are sorted by path');
  for (const f of id.files) {
    const want =
      f.path === nodePath
        ? 'node'
        : launchers.includes(f.path)
          ? 'launcher'
          : interpreters.has(f.path)
            ? 'interpreter'
            : 'library';
    assert.equal(f.role, want, f.path);
    const bytes = readFileSync(f.path);
    assert.equal(f.size, bytes.length, f.path);
    assert.equal(f.sha256, sha256(bytes), f.path);
  }
  assert.equal(id.platform, process.platform);
  assert.equal(id.arch, process.arch);
  assert.deepEqual({ ...id.node }, { path: nodePath, version: process.version });
  assert.equal(id.os.kernelRelease, os.release());
  assert.equal(id.os.kernelVersion, os.version());
  const osr = readFileSync('/etc/os-release', 'utf8');
  assert.equal(id.os.id, /^ID="?([^"\n]*)"?$/m.exec(osr)[1]);
  assert.equal(id.os.versionId, /^VERSION_ID="?([^"\n]*)"?$/m.exec(osr)?.[1] ?? null);
  assert.match(id.digest, /^sha256:[0-9a-f]{64}$/);
});

test('the identity is deeply frozen and its digest covers the canonical serialisation', { skip }, () => {
  const id = describeRuntime();
  assertDeepFrozen(id);
  const body = JSON.stringify([
    id.platform,
    id.arch,
    [id.node.path, id.node.version],
    [id.os.kernelRelease, id.os.kernelVersion, id.os.id, id.os.versionId],
    id.files.map((f) => [f.path, f.size, f.sha256, f.role]),
    id.aliases.map((a) => [a.link, a.target]),
  ]);
  assert.equal(id.digest, 'sha256:' + sha256(`confined-runtime/1\n${body}`));
  assert.equal(describeRuntime().digest, id.digest, 'stable across calls');
  assert.equal(describeRuntime({ rehash: true }).digest, id.digest, 'cache agrees with a full re-hash');
});

test('aliases record every symlink traversed (interpreter link, merged-/usr links)', { skip }, () => {
  const id = describeRuntime();
  const expected = new Map();
  for (const exe of [realpathSync(process.execPath), ...hostLaunchers()])
    for (const p of lddFiles(exe).opened) symlinksOf(p, expected);
  const got = id.aliases.map((a) => `${a.link}\0${a.target}`).sort();
  assert.deepEqual(got, [...expected.keys()].sort());
  for (const a of id.aliases) {
    assert.ok(lstatSync(a.link).isSymbolicLink(), a.link);
    assert.equal(readlinkSync(a.link), a.target);
  }
  const interp = native.elfInfoFile(realpathSync(process.execPath)).interp;
  if (lstatSync(interp).isSymbolicLink() || realpathSync(interp) !== interp)
    assert.ok(
      id.aliases.some((a) => interp.startsWith(a.link + '/') || interp === a.link),
      `an alias covers ${interp}`,
    );
});

test('verifyRuntime() accepts the pin, reports a mismatch, never throws', { skip }, () => {
  const id = describeRuntime();
  const ok = verifyRuntime(id.digest);
  assert.equal(ok.ok, true);
  assert.equal(ok.problem, null);
  assert.equal(ok.digest, id.digest);
  const bad = verifyRuntime('sha256:' + '0'.repeat(64));
  assert.equal(bad.ok, false);
  assert.match(bad.problem, /runtime changed/);
  assert.equal(bad.digest, id.digest);
});

// The pinning code on a copy of the closure: every single-byte change is noticed, also
// one that keeps size and mtime (only ctime changes), and a same-size replacement.
test('the pinning digest changes when any pinned file changes, through the cache', { skip, timeout: 300000 }, async (t) => {
  const id = describeRuntime();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'confined-runtime-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  // Whole seconds, so that utimes can restore mtime exactly.
  const stamp = Math.floor(Date.now() / 1000) - 100;
  const copies = id.files.map((f, i) => {
    const to = path.join(dir, `${i}-${path.basename(f.path)}`);
    copyFileSync(f.path, to);
    chmodSync(to, 0o755);
    utimesSync(to, stamp, stamp);
    return { to, role: f.role };
  });
  // Entries younger than the cache's settle time are never cached: wait it out.
  await new Promise((r) => setTimeout(r, 2200));
  const digestOf = (hashed) =>
    buildIdentity(
      {
        files: hashed.files.map((f, i) => ({ ...f, role: copies[i].role })),
        aliases: [],
      },
      { platform: 'linux', arch: process.arch, node: { path: 'n', version: 'v' }, os: id.os },
    ).digest;
  const cacheable = process.getuid() === 0; // only root-owned files are cached
  hashFiles(copies.map((c) => c.to));
  const first = hashFiles(copies.map((c) => c.to));
  if (cacheable) assert.ok(first.files.every((f) => f.cached), 'second pass is served by the cache');
  else t.diagnostic('not root: copies are not root-owned, so the cache never serves them');
  for (const [i, f] of first.files.entries()) assert.equal(f.sha256, id.files[i].sha256);
  const d0 = digestOf(first);
  assert.equal(d0, digestOf(hashFiles(copies.map((c) => c.to), { rehash: true })));
  for (const [i, c] of copies.entries()) {
    const before = statSync(c.to, { bigint: true });
    const fd = openSync(c.to, 'r+');
    const pos = Math.floor(before.size === 0n ? 0 : Number(before.size) / 2);
    const b = Buffer.alloc(1);
    readSync(fd, b, 0, 1, pos);
    writeSync(fd, Buffer.from([b[0] ^ 0x01]), 0, 1, pos);
    closeSync(fd);
    utimesSync(c.to, stamp, stamp);
    const after = statSync(c.to, { bigint: true });
    assert.equal(after.size, before.size);
    assert.equal(after.mtimeNs, before.mtimeNs, 'mtime restored');
    assert.notEqual(after.ctimeNs, before.ctimeNs, 'only ctime tells');
    const h = hashFiles(copies.map((x) => x.to));
    assert.equal(h.files[i].cached, false, `${c.to}: the cache noticed`);
    assert.equal(h.files[i].sha256, sha256(readFileSync(c.to)));
    assert.notEqual(digestOf(h), d0, `changing ${path.basename(c.to)} changes the digest`);
    // Put the byte back: the digest returns to the original.
    const fd2 = openSync(c.to, 'r+');
    writeSync(fd2, b, 0, 1, pos);
    closeSync(fd2);
    utimesSync(c.to, stamp, stamp);
    assert.equal(digestOf(hashFiles(copies.map((x) => x.to))), d0);
  }
  // Replacement by rename with the same size and mtime: a new inode.
  const small = copies.findIndex((c, i) => id.files[i].size < 1 << 20);
  const victim = copies[small].to;
  const bytes = readFileSync(victim);
  bytes[0] ^= 0xff;
  writeFileSync(`${victim}.new`, bytes);
  chmodSync(`${victim}.new`, 0o755);
  utimesSync(`${victim}.new`, stamp, stamp);
  renameSync(`${victim}.new`, victim);
  assert.notEqual(digestOf(hashFiles(copies.map((x) => x.to))), d0);
});

test('a closure that cannot be resolved is runtime-unavailable', { skip }, () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'confined-runtime-'));
  try {
    const bwrap = hostLaunchers()[0];
    const info = native.elfInfoFile(bwrap);
    const victim = info.needed.find((n) => n !== 'libc.so.6');
    assert.ok(victim, 'bwrap needs a library besides libc');
    const bytes = readFileSync(bwrap);
    const at = bytes.indexOf(Buffer.from(`\0${victim}\0`)) + 1;
    assert.ok(at > 0);
    bytes[at + 3] = bytes[at + 3] === 0x71 ? 0x72 : 0x71; // e.g. libcap -> libqap
    const copy = path.join(dir, 'bwrap-broken');
    writeFileSync(copy, bytes, { mode: 0o755 });
    const loaders = [loaderConfig(info.interp)];
    assert.throws(
      () => native.runtimeClosure([copy], ['launcher'], loaders, '/etc/ld.so.cache', false),
      (err) => err.code === 'runtime-unavailable' && /not found/.test(err.message),
    );
    assert.equal(
      spawnSync('ldd', [copy], { encoding: 'utf8' }).stdout.includes('not found'),
      true,
      'ldd agrees that it cannot be loaded',
    );
    // Unknown interpreter configuration and unreadable files fail closed too.
    assert.throws(
      () => native.runtimeClosure([copy], ['launcher'], [], '/etc/ld.so.cache', false),
      (err) => err.code === 'runtime-unavailable' && /no loader configuration/.test(err.message),
    );
    assert.throws(
      () => native.runtimeClosure([path.join(dir, 'missing')], ['node'], loaders, '/etc/ld.so.cache', false),
      (err) => err.code === 'runtime-unavailable',
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('DT_RUNPATH/DT_RPATH with $ORIGIN and symlinked directories resolve as ldd does', {
  skip: skip || (!hasGcc && 'gcc is not installed (needed to build the fixtures)'),
}, () => {
  const dir = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'confined-runtime-')));
  try {
    const interp = native.elfInfoFile(realpathSync(process.execPath)).interp;
    const loaders = [loaderConfig(interp)];
    mkdirSync(path.join(dir, 'real', 'sub'), { recursive: true });
    symlinkSync('real', path.join(dir, 'link'));
    writeFileSync(path.join(dir, 'b.c'), 'int b(void){return 2;}\n');
    writeFileSync(path.join(dir, 'a.c'), 'int b(void); int a(void){return b();}\n');
    writeFileSync(path.join(dir, 'm.c'), 'int a(void); int main(void){return a();}\n');
    const cc = (...args) => execFileSync('gcc', args, { cwd: dir, stdio: 'pipe' });
    cc('-shared', '-fPIC', '-o', 'real/sub/libb.so', 'b.c', '-Wl,-soname,libb.so');
    // liba finds libb through its own DT_RUNPATH, relative to where it was opened.
    cc('-shared', '-fPIC', '-o', 'real/liba.so', 'a.c', '-Lreal/sub', '-lb', '-Wl,-soname,liba.so',
      '-Wl,--enable-new-dtags,-rpath,$ORIGIN/sub');
    // Two executables: one with DT_RUNPATH through a symlinked directory, one with an
    // old-style DT_RPATH (searched also for liba's dependencies).
    cc('-o', 'm-runpath', 'm.c', '-Lreal', '-la', `-Wl,--enable-new-dtags,-rpath,${dir}/link`);
    cc('-o', 'm-rpath', 'm.c', '-Lreal', '-la', '-Wl,--disable-new-dtags,-rpath,$ORIGIN/link');
    for (const exe of ['m-runpath', 'm-rpath']) {
      const full = path.join(dir, exe);
      const r = native.runtimeClosure([full], ['launcher'], loaders, '/etc/ld.so.cache', true);
      const { files, opened } = lddFiles(full);
      assert.deepEqual(r.files.map((f) => f.path).sort(), [...files].sort(), exe);
      const want = new Map();
      for (const p of opened) symlinksOf(p, want);
      const got = new Set(r.aliases.map((a) => `${a.link}\0${a.target}`));
      for (const k of want.keys()) assert.ok(got.has(k), `${exe}: alias ${k.replace('\0', ' -> ')}`);
      assert.ok(got.has(`${dir}/link\0real`), `${exe}: the symlinked directory is an alias`);
    }
    // A glibc-hwcaps subdirectory of a searched directory wins over the directory.
    const hw = loaders[0].hwcaps.at(-1);
    if (hw) {
      mkdirSync(path.join(dir, 'real', 'glibc-hwcaps', hw), { recursive: true });
      cc('-shared', '-fPIC', '-o', `real/glibc-hwcaps/${hw}/liba.so`, 'a.c', '-Lreal/sub', '-lb',
        '-Wl,-soname,liba.so', '-Wl,--enable-new-dtags,-rpath,$ORIGIN/../../sub');
      const full = path.join(dir, 'm-runpath');
      const r = native.runtimeClosure([full], ['launcher'], loaders, '/etc/ld.so.cache', true);
      const { files } = lddFiles(full);
      assert.ok(files.has(path.join(dir, 'real', 'glibc-hwcaps', hw, 'liba.so')), 'ldd takes the hwcaps copy');
      assert.deepEqual(r.files.map((f) => f.path).sort(), [...files].sort(), 'glibc-hwcaps');
    }
    // DF_1_NODEFLIB: neither the cache's system entries nor the default directories.
    cc('-o', 'm-nodeflib', 'm.c', '-Lreal', '-la', '-Wl,-z,nodefaultlib', `-Wl,-rpath,${dir}/real`);
    const nd = path.join(dir, 'm-nodeflib');
    assert.match(execFileSync('ldd', [nd], { encoding: 'utf8' }), /libc\.so\.6 => not found/);
    assert.throws(
      () => native.runtimeClosure([nd], ['launcher'], loaders, '/etc/ld.so.cache', true),
      (err) => err.code === 'runtime-unavailable' && /libc\.so\.6' not found/.test(err.message),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// The memo (closureIdentity, native closure_memo_holds) on a closure of fixtures:
//   dir/m       NEEDED liba.so.1, DT_RUNPATH $ORIGIN/first:$ORIGIN/lib
//   dir/first/  empty: searched before lib/
//   dir/lib/liba.so.1 -> liba.so.1.0 (an alias), dir/lib/liba.so.1.0 (soname liba.so.1)
//   dir/q       NEEDED libq.so.1, no search path: found through dir/ld.so.cache (a cache
//               built here; /etc/ld.so.cache is never written), c1/ or c2/libq.so.1
// Each change must be noticed by the very next call; before it (the control) the memo
// serves the call (the very same frozen identity) and the digest equals the pin.
test('the memo notices every change of the closure on the very next call', {
  skip: skip || (!hasGcc && 'gcc is not installed (needed to build the fixtures)'),
  timeout: 120000,
}, async (t) => {
  const dir = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'confined-memo-')));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const settle = () => new Promise((r) => setTimeout(r, 2200)); // the cache's settle time
  const interp = native.elfInfoFile(realpathSync(process.execPath)).interp;
  const { hwcaps } = loaderConfig(interp);
  for (const d of ['first', 'lib', 'c1', 'c2']) mkdirSync(path.join(dir, d));
  writeFileSync(path.join(dir, 'a.c'), 'int a(void){return 1;}\n');
  writeFileSync(path.join(dir, 'q.c'), 'int q(void){return 3;}\n');
  writeFileSync(path.join(dir, 'm.c'), 'int a(void); int main(void){return a();}\n');
  writeFileSync(path.join(dir, 'mq.c'), 'int q(void); int main(void){return q();}\n');
  const cc = (...args) => execFileSync('gcc', args, { cwd: dir, stdio: 'pipe' });
  cc('-shared', '-fPIC', '-o', 'lib/liba.so.1.0', 'a.c', '-Wl,-soname,liba.so.1');
  symlinkSync('liba.so.1.0', path.join(dir, 'lib', 'liba.so.1'));
  cc('-o', 'm', 'm.c', 'lib/liba.so.1.0', '-Wl,--enable-new-dtags,-rpath,$ORIGIN/first:$ORIGIN/lib');
  cc('-shared', '-fPIC', '-o', 'c1/libq.so.1', 'q.c', '-Wl,-soname,libq.so.1');
  copyFileSync(path.join(dir, 'c1', 'libq.so.1'), path.join(dir, 'c2', 'libq.so.1'));
  cc('-o', 'q', 'mq.c', 'c1/libq.so.1');
  const cachePath = path.join(dir, 'ld.so.cache');
  const cacheTo = (sub) =>
    buildLdCache([{ key: 'libq.so.1', value: path.join(dir, sub, 'libq.so.1'), flags: native.ldcacheHostFlags }]);
  writeFileSync(cachePath, cacheTo('c1'));
  const liba = path.join(dir, 'lib', 'liba.so.1.0');
  const stamp = Math.floor(Date.now() / 1000) - 100; // whole seconds: utimes restores mtime exactly
  for (const f of [cachePath, liba]) utimesSync(f, stamp, stamp);
  const facts = { platform: 'linux', arch: process.arch, node: { path: 'n', version: 'v' }, os: describeRuntime().os };
  const describe = (exe, options) => closureIdentity([path.join(dir, exe)], ['launcher'], facts, { cachePath, ...options });
  const paths = (id) => id.files.map((f) => f.path);

  /** The control: served by the memo, equal to the pin (and to a full re-hash). */
  const control = (exe, pin) => {
    const before = describe(exe);
    assert.equal(before.digest, pin, 'before the change the digest equals the pin');
    assert.equal(describe(exe), before, 'the memo serves the call before the change');
    return before;
  };
  /** The very next call after a change. */
  const changed = (exe, pin, before, what) => {
    const after = describe(exe);
    assert.notEqual(after, before, `${what}: not served by the memo`);
    assert.notEqual(after.digest, pin, `${what}: the digest changed on the very next call`);
    return after;
  };

  await settle(); // every file is now old enough for its stat key to vouch for its bytes
  const pinM = describe('m', { rehash: true }).digest;
  const pinQ = describe('q', { rehash: true }).digest;
  assert.deepEqual(paths(describe('q')).filter((p) => p.startsWith(dir)), [path.join(dir, 'c1', 'libq.so.1'), path.join(dir, 'q')]);
  assert.ok(paths(describe('m')).includes(liba));

  await t.test('one byte changed, same size and mtime (only ctime tells)', async () => {
    for (const when of ['settled', 'just changed']) {
      // 'just changed': the file was written < 2 s ago, so the memo re-hashes it.
      const before = control('m', pinM);
      const st0 = statSync(liba, { bigint: true });
      const fd = openSync(liba, 'r+');
      const pos = Math.floor(Number(st0.size) / 2);
      const b = Buffer.alloc(1);
      readSync(fd, b, 0, 1, pos);
      writeSync(fd, Buffer.from([b[0] ^ 0x01]), 0, 1, pos);
      closeSync(fd);
      utimesSync(liba, stamp, stamp);
      const st1 = statSync(liba, { bigint: true });
      assert.equal(st1.size, st0.size);
      assert.equal(st1.mtimeNs, st0.mtimeNs, 'mtime restored');
      assert.notEqual(st1.ctimeNs, st0.ctimeNs, 'only ctime tells');
      const after = changed('m', pinM, before, `${when}: one byte`);
      assert.equal(after.files.find((f) => f.path === liba).sha256, sha256(readFileSync(liba)));
      const fd2 = openSync(liba, 'r+');
      writeSync(fd2, b, 0, 1, pos);
      closeSync(fd2);
      utimesSync(liba, stamp, stamp);
      assert.equal(describe('m').digest, pinM, `${when}: the byte put back gives the pin again`);
    }
    await settle();
  });

  await t.test('a library appearing earlier in the search order (search path, hwcaps subdirectory)', async () => {
    const hw = hwcaps.at(-1);
    const earlier = [path.join(dir, 'first', 'liba.so.1')];
    if (hw) earlier.push(path.join(dir, 'lib', 'glibc-hwcaps', hw, 'liba.so.1'));
    else t.diagnostic('this ld.so searches no glibc-hwcaps subdirectory: that case is not run');
    for (const p of earlier) {
      mkdirSync(path.dirname(p), { recursive: true });
      const before = control('m', pinM); // an empty directory appearing changes nothing
      copyFileSync(liba, p); // the same bytes: only where the name resolves changes
      const after = changed('m', pinM, before, p);
      assert.ok(paths(after).includes(p), `${p} is in the closure`);
      assert.ok(!paths(after).includes(liba), `${liba} no longer is`);
      rmSync(p);
      assert.equal(describe('m').digest, pinM, 'removed: the pin again');
    }
  });

  await t.test('an alias symlink retargeted', () => {
    const link = path.join(dir, 'lib', 'liba.so.1');
    const other = path.join(dir, 'lib', 'liba.so.1.1');
    copyFileSync(liba, other); // same bytes, another name
    const before = control('m', pinM);
    assert.ok(before.aliases.some((a) => a.link === link && a.target === 'liba.so.1.0'));
    symlinkSync('liba.so.1.1', `${link}.new`);
    renameSync(`${link}.new`, link);
    const after = changed('m', pinM, before, 'retargeted alias');
    assert.ok(after.aliases.some((a) => a.link === link && a.target === 'liba.so.1.1'));
    assert.ok(paths(after).includes(other));
    symlinkSync('liba.so.1.0', `${link}.new`);
    renameSync(`${link}.new`, link);
    assert.equal(describe('m').digest, pinM, 'pointed back: the pin again');
    // Another spelling of the same target: the same file, only the alias differs.
    const again = control('m', pinM);
    symlinkSync('./liba.so.1.0', `${link}.new`);
    renameSync(`${link}.new`, link);
    const respelt = changed('m', pinM, again, 'alias respelt');
    assert.deepEqual(paths(respelt), paths(again));
    assert.ok(respelt.aliases.some((a) => a.link === link && a.target === './liba.so.1.0'));
    symlinkSync('liba.so.1.0', `${link}.new`);
    renameSync(`${link}.new`, link);
    assert.equal(describe('m').digest, pinM);
  });

  await t.test('the ld.so.cache changed in place (same size and mtime) or replaced', () => {
    const before = control('q', pinQ);
    const st0 = statSync(cachePath, { bigint: true });
    const fd = openSync(cachePath, 'r+');
    const bytes = readFileSync(cachePath);
    const at = bytes.indexOf(Buffer.from('/c1/libq.so.1'));
    assert.ok(at > 0);
    writeSync(fd, Buffer.from('2'), 0, 1, at + 2); // c1 -> c2, same length
    closeSync(fd);
    utimesSync(cachePath, stamp, stamp);
    assert.equal(statSync(cachePath, { bigint: true }).size, st0.size);
    assert.deepEqual(readFileSync(cachePath), cacheTo('c2'));
    const after = changed('q', pinQ, before, 'ld.so.cache edited in place');
    assert.ok(paths(after).includes(path.join(dir, 'c2', 'libq.so.1')));
    // Replaced by rename (a new inode) back to c1: noticed again.
    writeFileSync(`${cachePath}.new`, cacheTo('c1'));
    utimesSync(`${cachePath}.new`, stamp, stamp);
    renameSync(`${cachePath}.new`, cachePath);
    assert.equal(describe('q').digest, pinQ, 'the cache replaced by the original: the pin again');
    // The cache disappearing: q then cannot be loaded (c1 is in no searched directory).
    renameSync(cachePath, `${cachePath}.away`);
    assert.throws(() => describe('q'), (err) => err.code === 'runtime-unavailable' && /libq\.so\.1' not found/.test(err.message));
    renameSync(`${cachePath}.away`, cachePath);
    assert.equal(describe('q').digest, pinQ);
  });

  await t.test('rehash bypasses the memo', () => {
    const before = control('m', pinM);
    const fresh = describe('m', { rehash: true });
    assert.notEqual(fresh, before);
    assert.equal(fresh.digest, pinM);
  });
});

// /etc/ld.so.preload and /etc/ld.so.cache are fixed paths: they are changed only inside a
// private mount namespace, on an overlay over /etc (the real /etc is never written), by
// a child node that pins the runtime there first.
test('the memo notices /etc/ld.so.preload appearing and /etc/ld.so.cache replaced (private mount namespace)', {
  skip:
    skip ||
    (process.getuid() !== 0 && 'needs root: a private mount namespace with an overlay on /etc') ||
    (spawnSync('unshare', ['--version']).status !== 0 && 'unshare(1) is not installed'),
  timeout: 60000,
}, (t) => {
  const runtimeJs = new URL('../lib/runtime.js', import.meta.url).href;
  const libc = describeRuntime().files.find((f) => /\/libc\.so\.6$/.test(f.path)).path;
  const script = `
    import { copyFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
    import { describeRuntime, verifyRuntime } from ${JSON.stringify(runtimeJs)};
    const out = [];
    const step = (name, pin) => {
      const a = describeRuntime();
      const served = describeRuntime() === a;
      out.push({ name, control: a.digest === pin && served });
      return a;
    };
    const pin = describeRuntime().digest;
    step('start', pin);
    writeFileSync('/etc/ld.so.preload', ''); // empty: allowed, the same runtime
    const e = describeRuntime();
    out.push({ name: 'empty preload', same: e.digest === pin });
    step('empty preload', pin);
    writeFileSync('/etc/ld.so.preload', ${JSON.stringify(libc + '\n')});
    const v = verifyRuntime(pin);
    out.push({ name: 'preload', ok: v.ok, problem: v.problem });
    rmSync('/etc/ld.so.preload');
    out.push({ name: 'preload removed', ok: verifyRuntime(pin).ok });
    const b = step('before cache', pin);
    // The same bytes under a new inode: noticed (the stat answer changed), same digest.
    copyFileSync('/etc/ld.so.cache', '/etc/ld.so.cache.new');
    renameSync('/etc/ld.so.cache.new', '/etc/ld.so.cache');
    const c = describeRuntime();
    out.push({ name: 'cache replaced', same: c.digest === pin, fresh: c !== b });
    // No cache at all: the libraries come from the system directories (same files here).
    rmSync('/etc/ld.so.cache');
    const n = describeRuntime();
    out.push({ name: 'cache removed', fresh: n !== c });
    console.log(JSON.stringify(out));
  `;
  const up = mkdtempSync(path.join(os.tmpdir(), 'confined-etc-'));
  try {
    const sh = [
      'set -e',
      `mount -t tmpfs none "${up}"`,
      `mkdir "${up}/u" "${up}/w"`,
      `mount -t overlay overlay -o "lowerdir=/etc,upperdir=${up}/u,workdir=${up}/w" /etc`,
      'exec "$0" --input-type=module -e "$1"',
    ].join('\n');
    const r = spawnSync('unshare', ['--mount', '--propagation', 'private', 'sh', '-c', sh, process.execPath, script], {
      encoding: 'utf8',
      timeout: 50000,
    });
    if (r.status !== 0 && /mount|unshare/.test(r.stderr) && !/runtime/.test(r.stderr)) {
      t.skip(`no private mount namespace with an overlay on /etc here: ${r.stderr.trim().split('\n').pop()}`);
      return;
    }
    assert.equal(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout.trim().split('\n').pop());
    const at = (name) => out.find((o) => o.name === name && !('control' in o)) ?? assert.fail(name);
    for (const o of out.filter((x) => 'control' in x)) assert.equal(o.control, true, `control (${o.name}): memo serves the pin`);
    assert.equal(at('empty preload').same, true);
    assert.equal(at('preload').ok, false, 'a non-empty /etc/ld.so.preload is noticed on the very next call');
    assert.match(at('preload').problem, /ld\.so\.preload exists/);
    assert.equal(at('preload removed').ok, true);
    assert.equal(at('cache replaced').fresh, true, 'a replaced /etc/ld.so.cache is noticed');
    assert.equal(at('cache replaced').same, true, 'the same bytes: the same runtime');
    assert.equal(at('cache removed').fresh, true, 'a removed /etc/ld.so.cache is noticed');
  } finally {
    rmSync(up, { recursive: true, force: true });
  }
  assert.equal(existsSync('/etc/ld.so.preload'), false, 'the real /etc was not written');
});

test('ld.so --help parsing gives the search path this ld.so prints', { skip }, () => {
  const interp = native.elfInfoFile(realpathSync(process.execPath)).interp;
  const cfg = loaderConfig(interp);
  const text = execFileSync(interp, ['--help'], { env: {}, encoding: 'utf8' });
  for (const d of cfg.dirs) assert.ok(text.includes(`  ${d} (system search path)`));
  assert.ok(cfg.dirs.length > 0);
  const sample = [
    'Shared library search path:',
    '  (libraries located via /etc/ld.so.cache)',
    '  /lib/x (system search path)',
    '  /usr/lib (system search path)',
    '',
    'Subdirectories of glibc-hwcaps directories, in priority order:',
    '  x86-64-v4',
    '  x86-64-v3 (supported, searched)',
    '',
    'Legacy HWCAP subdirectories under library search path directories:',
    '  haswell (AT_PLATFORM; supported, searched)',
    '  tls (supported, searched)',
  ].join('\n');
  const parsed = parseLoaderHelp(sample, '/ld', Buffer.from('\0lib/x\0'));
  assert.deepEqual(parsed, {
    interp: '/ld',
    dirs: ['/lib/x', '/usr/lib'],
    hwcaps: ['x86-64-v3'],
    legacy: ['haswell', 'tls'],
    platform: 'haswell',
    lib: 'lib/x',
  });
  assert.equal(parseLoaderHelp(sample, '/ld', Buffer.from('lib/x')).lib, null);
  assert.throws(() => parseLoaderHelp('nothing', '/ld', Buffer.alloc(0)));
});

// ------------------------------------------------------------------ ELF parser ----

const elfErr = (err) => err instanceof Error && typeof err.code === 'string';

test('the ELF parser reads all four class/byte-order combinations', () => {
  const dyn = [
    [DT.NEEDED, 'libfoo.so.1'],
    [DT.NEEDED, 'libbar.so.2'],
    [DT.RUNPATH, '$ORIGIN/../lib'],
    [DT.RPATH, '/opt/x'],
    [DT.SONAME, 'libme.so.3'],
    [DT.FLAGS_1, 0x800],
  ];
  for (const is64 of [true, false])
    for (const msb of [false, true]) {
      const { bytes } = buildElf({ is64, msb, dyn, machine: 183 });
      const info = native.elfInfo(bytes);
      assert.deepEqual(
        { ...info },
        {
          class: is64 ? 2 : 1,
          data: msb ? 2 : 1,
          osabi: 0,
          type: 3,
          machine: 183,
          dynamic: true,
          flags1: 0x800,
          extraLoadTag: 0,
          interp: '/lib/ld-test.so.1',
          soname: 'libme.so.3',
          rpath: '/opt/x',
          runpath: '$ORIGIN/../lib',
          needed: ['libfoo.so.1', 'libbar.so.2'],
        },
      );
    }
});

test('the ELF parser reports tags that make ld.so load more than DT_NEEDED', () => {
  for (const tag of [0x6ffffefc, 0x6ffffefb, 0x7ffffffd, 0x7fffffff]) {
    const { bytes } = buildElf({ dyn: [[DT.NEEDED, 'libfoo.so.1'], [tag, 'libaudit.so']] });
    assert.equal(native.elfInfo(bytes).extraLoadTag, tag);
  }
});

test('the ELF parser returns errors on malformed input, never crashes', () => {
  const dyn = [[DT.NEEDED, 'libfoo.so.1'], [DT.SONAME, 'libme.so']];
  for (const is64 of [true, false]) {
    const { bytes, layout, writer } = buildElf({ is64, dyn });
    const w = writer;
    const bad = (mutate, why) => {
      const copy = Buffer.from(bytes);
      const cw = Object.assign(Object.create(Object.getPrototypeOf(w)), w, { buf: copy });
      mutate(cw, copy);
      assert.throws(() => native.elfInfo(copy), elfErr, why);
    };
    // Truncated headers, at every length up to the end of the program headers.
    for (let n = 0; n < layout.phoff + layout.phnum * layout.phentsize; n++)
      assert.throws(() => native.elfInfo(bytes.subarray(0, n)), elfErr, `truncated at ${n}`);
    // Every truncation of the whole image: an error or a result, never a crash.
    for (let n = 0; n <= bytes.length; n++) {
      try {
        native.elfInfo(bytes.subarray(0, n));
      } catch (err) {
        assert.ok(elfErr(err));
      }
    }
    const phoffAt = is64 ? 32 : 28;
    const phnumAt = is64 ? 56 : 44;
    const ph = (i) => layout.phoff + i * layout.phentsize;
    const field = (i, f) => ph(i) + (is64 ? { offset: 8, vaddr: 16, filesz: 32 } : { offset: 4, vaddr: 8, filesz: 16 })[f];
    bad((c) => c.word(is64, phoffAt, 0xfffffff0), 'e_phoff out of range');
    bad((c) => c.u16(phnumAt, 0xfffe), 'huge e_phnum');
    bad((c) => c.u16(phnumAt - 2, 7), 'wrong e_phentsize');
    bad((c) => c.word(is64, field(2, 'offset'), 0x7ffffff0), 'PT_DYNAMIC offset out of range');
    bad((c) => c.word(is64, field(2, 'filesz'), 0x7ffffff0), 'PT_DYNAMIC size out of range');
    bad((c) => c.word(is64, field(0, 'offset'), bytes.length - 2), 'PT_INTERP runs past the end');
    bad((c, b) => b.fill(0x41, layout.interpOff, layout.strtabOff), 'PT_INTERP not terminated');
    bad((c) => c.word(is64, field(1, 'filesz'), 16), 'DT_STRTAB outside any PT_LOAD');
    bad((c) => c.word(is64, layout.dynOff + layout.dynent / 2, 0x10), 'DT_STRTAB points at the header only');
    bad((c) => c.word(is64, layout.dynOff + layout.dynent + layout.dynent / 2, 0x7fffffff), 'huge DT_STRSZ');
    bad((c) => c.word(is64, layout.dynOff + 2 * layout.dynent + layout.dynent / 2, 0x7fffffff), 'DT_NEEDED outside the string table');
    bad((c, b) => b.fill(0x41, layout.strtabOff, layout.dynOff), 'unterminated strings');
    bad((c, b) => b.write('\x7fELG', 0, 'latin1'), 'bad magic');
    bad((c, b) => (b[4] = 3), 'bad class');
    // A DT_STRTAB outside any PT_LOAD, built that way from the start.
    assert.throws(() => native.elfInfo(buildElf({ is64, dyn, strtabInLoad: false }).bytes), /PT_LOAD/);
    // PN_XNUM: the count comes from section header 0, outside the file or huge.
    const shoffAt = is64 ? 40 : 32;
    bad((c) => (c.u16(phnumAt, 0xffff), c.word(is64, shoffAt, 0x7ffffff0)), 'PN_XNUM, e_shoff out of range');
    bad((c) => {
      c.u16(phnumAt, 0xffff);
      c.word(is64, shoffAt, layout.strtabOff); // a "section header" whose sh_info is huge
      c.u32(layout.strtabOff + (is64 ? 44 : 28), 0xffffff);
    }, 'PN_XNUM with a huge count');
  }
  // Random corruption: thousands of images with a few random bytes changed.
  const { bytes } = buildElf({ dyn });
  for (let i = 0; i < 5000; i++) {
    const copy = Buffer.from(bytes);
    for (let k = 0; k < 1 + (i % 4); k++) copy[randomBytes(2).readUInt16LE() % copy.length] = randomBytes(1)[0];
    try {
      const info = native.elfInfo(copy);
      assert.ok(Array.isArray(info.needed));
    } catch (err) {
      assert.ok(elfErr(err), String(err));
    }
  }
  assert.throws(() => native.elfInfo('not bytes'), TypeError);
});

test('the ELF parser agrees with readelf on the launchers and node', {
  skip: skip || (spawnSync('readelf', ['--version']).status !== 0 && 'readelf is not installed'),
}, () => {
  for (const exe of [realpathSync(process.execPath), ...hostLaunchers()]) {
    const info = native.elfInfoFile(exe);
    const out = execFileSync('readelf', ['-d', '-l', '-W', exe], { encoding: 'utf8', maxBuffer: 1 << 26 });
    const needed = [...out.matchAll(/\(NEEDED\)\s+Shared library: \[(.*)\]/g)].map((m) => m[1]);
    assert.deepEqual(info.needed, needed, exe);
    const interp = /\[Requesting program interpreter: (.*)\]/.exec(out)?.[1] ?? null;
    assert.equal(info.interp, interp, exe);
    assert.equal(info.runpath, /\(RUNPATH\)\s+Library runpath: \[(.*)\]/.exec(out)?.[1] ?? null);
    assert.equal(info.rpath, /\(RPATH\)\s+Library rpath: \[(.*)\]/.exec(out)?.[1] ?? null);
    // The in-memory parser on the same bytes gives the same answer.
    assert.deepEqual({ ...native.elfInfo(readFileSync(exe)) }, { ...info });
  }
});

// ------------------------------------------------------------ ld.so.cache parser ----

test('a hand-built ld.so.cache resolves as ld.so would', () => {
  const entries = [
    { key: 'libfoo.so.1', value: '/a/libfoo.so.1', flags: 0x303 },
    { key: 'libfoo.so.1', value: '/a32/libfoo.so.1', flags: 0x3 },
    { key: 'libfoo.so.1', value: '/a/glibc-hwcaps/x86-64-v3/libfoo.so.1', flags: 0x303, hwcapName: 'x86-64-v3' },
    { key: 'libfoo.so.1', value: '/a/glibc-hwcaps/x86-64-v2/libfoo.so.1', flags: 0x303, hwcapName: 'x86-64-v2' },
    { key: 'libbar.so.10', value: '/a/libbar.so.10', flags: 0x303 },
    { key: 'libbar.so.9', value: '/a/libbar.so.9', flags: 0x303 },
    { key: 'libleg.so.1', value: '/a/tls/libleg.so.1', flags: 0x303, hwcap: 1n << 63n },
  ];
  const cache = buildLdCache(entries, { hwcapNames: ['x86-64-v2', 'x86-64-v3'] });
  const look = (name, flags, hw = []) => native.ldcacheLookup(cache, name, flags, hw);
  assert.equal(look('libfoo.so.1', 0x303), '/a/libfoo.so.1');
  assert.equal(look('libfoo.so.1', 0x3), '/a32/libfoo.so.1');
  assert.equal(look('libfoo.so.1', 0x303, ['x86-64-v3', 'x86-64-v2']), '/a/glibc-hwcaps/x86-64-v3/libfoo.so.1');
  assert.equal(look('libfoo.so.1', 0x303, ['x86-64-v2']), '/a/glibc-hwcaps/x86-64-v2/libfoo.so.1');
  assert.equal(look('libbar.so.9', 0x303), '/a/libbar.so.9');
  assert.equal(look('libbar.so.10', 0x303), '/a/libbar.so.10');
  assert.equal(look('libnone.so.1', 0x303), null);
  assert.equal(look('libfoo.so.1', 0xa03), null);
  assert.throws(() => look('libleg.so.1', 0x303), /legacy hwcap/);
  const listed = native.ldcacheEntries(cache);
  assert.equal(listed.length, entries.length);
  assert.deepEqual(new Set(listed.map((e) => e.value)), new Set(entries.map((e) => e.value)));
  // The old format in front of the new one, and the old format alone.
  const both = buildLdCache(entries.slice(0, 2), { old: true });
  assert.equal(native.ldcacheLookup(both, 'libfoo.so.1', 0x303, []), '/a/libfoo.so.1');
  const old = buildOldLdCache([{ key: 'libold.so.2', value: '/o/libold.so.2', flags: 0x303 }]);
  assert.equal(native.ldcacheLookup(old, 'libold.so.2', 0x303, []), '/o/libold.so.2');
  // Corruption: counts beyond the file, strings out of range, every truncation.
  const huge = Buffer.from(cache);
  huge.writeUInt32LE(0x10000000, 20);
  assert.throws(() => native.ldcacheEntries(huge), /exceeds/);
  const badKey = Buffer.from(cache);
  badKey.writeUInt32LE(0xfffffff0, 48 + 4);
  assert.throws(() => native.ldcacheEntries(badKey), /out of bounds/);
  for (let n = 0; n <= cache.length; n++) {
    try {
      native.ldcacheLookup(cache.subarray(0, n), 'libfoo.so.1', 0x303, ['x86-64-v3']);
      native.ldcacheEntries(cache.subarray(0, n));
    } catch (err) {
      assert.ok(elfErr(err), String(err));
    }
  }
  for (let i = 0; i < 3000; i++) {
    const copy = Buffer.from(cache);
    copy[randomBytes(2).readUInt16LE() % copy.length] = randomBytes(1)[0];
    try {
      native.ldcacheLookup(copy, 'libfoo.so.1', 0x303, ['x86-64-v3']);
      native.ldcacheEntries(copy);
    } catch (err) {
      assert.ok(elfErr(err), String(err));
    }
  }
});

test('the system ld.so.cache reads as ldconfig -p prints it', {
  skip: !existsSync('/etc/ld.so.cache') ? 'no /etc/ld.so.cache' : spawnSync('ldconfig', ['-p']).status !== 0 && 'ldconfig -p unavailable',
}, () => {
  const bytes = readFileSync('/etc/ld.so.cache');
  const out = execFileSync('ldconfig', ['-p'], { encoding: 'utf8' });
  const want = [...out.matchAll(/^\t(\S+) \(([^)]*)\) => (\S+)$/gm)].map((m) => `${m[1]} ${m[3]}`);
  const got = native.ldcacheEntries(bytes).map((e) => `${e.key} ${e.value}`);
  assert.deepEqual(got.sort(), want.sort());
  for (const e of native.ldcacheEntries(bytes).filter((x) => x.flags === native.ldcacheHostFlags && x.hwcap === '0')) {
    const found = native.ldcacheLookup(bytes, e.key, native.ldcacheHostFlags, []);
    assert.ok(found !== null, e.key);
  }
});

test('timing: describeRuntime() cold (full hash) and warm (cache)', { skip }, (t) => {
  let t0 = performance.now();
  describeRuntime({ rehash: true });
  const cold = performance.now() - t0;
  const warm = [];
  for (let i = 0; i < 30; i++) {
    t0 = performance.now();
    describeRuntime();
    warm.push(performance.now() - t0);
  }
  warm.sort((a, b) => a - b);
  const median = warm[15];
  t.diagnostic(`describeRuntime cold (rehash) ${cold.toFixed(1)} ms; warm median ${median.toFixed(2)} ms, max ${warm.at(-1).toFixed(2)} ms`);
  const files = describeRuntime().files;
  const cachedAll = process.getuid() === 0 || files.every((f) => statSync(f.path).uid === 0);
  if (cachedAll) assert.ok(median < 20, `warm median ${median} ms`);
});

test('an unsupported platform or architecture is unsupported-host; verifyRuntime reports it', () => {
  for (const [key, value, why] of [
    // macOS has its own host checks (sandbox-exec, dash, env): on this Linux host they fail.
    ['platform', 'darwin', /sandbox-exec|host tools refused/],
    ['platform', 'freebsd', /platform freebsd is not supported/],
    ['arch', 'ia32', /architecture ia32 is not supported/],
  ]) {
    const saved = Object.getOwnPropertyDescriptor(process, key);
    Object.defineProperty(process, key, { ...saved, value });
    try {
      assert.match(hostProblem(), why);
      assert.throws(describeRuntime, (err) => err instanceof ConfinedExecutorError && err.code === 'unsupported-host' && why.test(err.message));
      const v = verifyRuntime('sha256:' + '0'.repeat(64));
      assert.equal(v.ok, false);
      assert.equal(v.digest, null);
      assert.match(v.problem, /^runtime cannot be verified: unsupported-host: /);
    } finally {
      Object.defineProperty(process, key, saved);
    }
  }
});

test('rehash bypasses the cache (option and CONFINED_RUNTIME_REHASH=1) and agrees with it', { skip }, () => {
  const id = describeRuntime();
  const paths = id.files.map((f) => f.path);
  hashFiles(paths);
  assert.ok(hashFiles(paths, { rehash: true }).files.every((f) => !f.cached));
  process.env.CONFINED_RUNTIME_REHASH = '1';
  try {
    assert.equal(describeRuntime().digest, id.digest);
  } finally {
    delete process.env.CONFINED_RUNTIME_REHASH;
  }
});

test('describeRuntime() refuses an unsupported host with unsupported-host', { skip: !skip && 'this host is supported' }, () => {
  assert.throws(describeRuntime, (err) => err instanceof ConfinedExecutorError && err.code === 'unsupported-host');
});
