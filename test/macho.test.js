// The Mach-O load-command reader (native/macho.c) on files built byte by byte, and the
// closure resolution (lib/darwin/closure.js) on a fake root. Runs on every platform.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { native } from '../lib/native.js';
import { resolveClosure, fsHost } from '../lib/darwin/closure.js';
import { buildSeatbeltProfile, executorProfileRequest } from '../lib/darwin/profile.js';
import {
  CPU,
  LC,
  MH_DYLIB,
  MH_EXECUTE,
  MH_MAGIC,
  dylib,
  dylibCommand,
  executable,
  fat,
  rawCommand,
  stringCommand,
  thin,
} from './helpers/macho-fixtures.js';

const parse = (bytes, cpu = 'arm64') => native.machoParse(bytes, cpu);

function assertRefused(r, pattern) {
  assert.equal(r.ok, false, `expected a refusal, got ${JSON.stringify(r)}`);
  assert.equal(typeof r.reason, 'string');
  if (pattern) assert.match(r.reason, pattern);
}

// A thin arm64 executable with one command of each reported kind, plus an LC_UUID the
// reader must skip.
const NAMES = {
  dylinker: '/usr/lib/dyld',
  load: '/usr/lib/libSystem.B.dylib',
  weak: '@rpath/libweak.dylib',
  reexport: '@loader_path/libre.dylib',
  upward: '/opt/x/libup.dylib',
  rpath: '@executable_path/../lib',
};
function sampleCommands() {
  return [
    stringCommand(LC.LOAD_DYLINKER, NAMES.dylinker),
    rawCommand(LC.UUID, 24),
    dylibCommand(LC.LOAD_DYLIB, NAMES.load),
    dylibCommand(LC.LOAD_WEAK_DYLIB, NAMES.weak),
    dylibCommand(LC.REEXPORT_DYLIB, NAMES.reexport),
    dylibCommand(LC.LOAD_UPWARD_DYLIB, NAMES.upward),
    stringCommand(LC.RPATH, NAMES.rpath),
  ];
}
const EXPECTED_COMMANDS = [
  { kind: 'dylinker', value: NAMES.dylinker },
  { kind: 'load', value: NAMES.load },
  { kind: 'weak', value: NAMES.weak },
  { kind: 'reexport', value: NAMES.reexport },
  { kind: 'upward', value: NAMES.upward },
  { kind: 'rpath', value: NAMES.rpath },
];

test('thin 64-bit executable: every load command kind, in order', () => {
  const bytes = thin({ commands: sampleCommands() });
  const r = parse(bytes);
  assert.equal(r.ok, true, r.reason);
  assert.equal(r.fat, false);
  assert.equal(r.fileType, 'execute');
  assert.equal(r.fileTypeCode, MH_EXECUTE);
  assert.equal(r.cputype, CPU.arm64.type);
  assert.equal(r.ncmds, 7);
  assert.equal(r.sliceOffset, 0);
  assert.equal(r.sliceSize, bytes.length);
  assert.deepEqual(
    r.commands.map((c) => ({ ...c })),
    EXPECTED_COMMANDS,
  );
});

test('thin dylib reports LC_ID_DYLIB; a second LC_ID_DYLIB is refused', () => {
  const r = parse(dylib({ id: '@rpath/libfoo.1.dylib', deps: [{ name: '/usr/lib/libc++.1.dylib' }] }));
  assert.equal(r.ok, true, r.reason);
  assert.equal(r.fileType, 'dylib');
  assert.equal(r.fileTypeCode, MH_DYLIB);
  assert.deepEqual(r.commands.map((c) => [c.kind, c.value]), [
    ['id', '@rpath/libfoo.1.dylib'],
    ['load', '/usr/lib/libc++.1.dylib'],
  ]);
  const twice = thin({
    filetype: MH_DYLIB,
    commands: [dylibCommand(LC.ID_DYLIB, '/a.dylib'), dylibCommand(LC.ID_DYLIB, '/b.dylib')],
  });
  assertRefused(parse(twice), /second LC_ID_DYLIB/);
});

test('a thin file of another CPU is ENOENT; a variant subtype is refused', () => {
  const x = thin({ cpu: CPU.x86_64, commands: sampleCommands() });
  const r = parse(x, 'arm64');
  assertRefused(r);
  assert.equal(r.error, 'ENOENT');
  assert.equal(parse(x, 'x86_64').ok, true);
  assertRefused(parse(thin({ cpu: CPU.arm64e }), 'arm64'), /not arm64/);
  assertRefused(parse(thin({ cpu: CPU.x86_64h }), 'x86_64'), /not x86_64/);
});

for (const is64 of [false, true]) {
  test(`fat${is64 ? '64' : ''} with two slices: each CPU selects its own slice`, () => {
    const arm = thin({ cpu: CPU.arm64, commands: [dylibCommand(LC.LOAD_DYLIB, '/opt/arm/libA.dylib')] });
    const intel = thin({
      cpu: CPU.x86_64,
      commands: [dylibCommand(LC.LOAD_DYLIB, '/opt/intel/libB.dylib'), stringCommand(LC.RPATH, '/opt/rp')],
    });
    const { bytes, offsets } = fat({ is64, slices: [{ cpu: CPU.x86_64, bytes: intel }, { cpu: CPU.arm64, bytes: arm }] });
    const a = parse(bytes, 'arm64');
    assert.equal(a.ok, true, a.reason);
    assert.equal(a.fat, true);
    assert.equal(a.sliceOffset, offsets[1]);
    assert.equal(a.sliceSize, arm.length);
    assert.deepEqual(a.commands.map((c) => c.value), ['/opt/arm/libA.dylib']);
    const i = parse(bytes, 'x86_64');
    assert.equal(i.ok, true, i.reason);
    assert.equal(i.sliceOffset, offsets[0]);
    assert.deepEqual(i.commands.map((c) => [c.kind, c.value]), [
      ['load', '/opt/intel/libB.dylib'],
      ['rpath', '/opt/rp'],
    ]);
  });
}

test('fat: a missing CPU is ENOENT; duplicate or variant slices are refused', () => {
  const intel = thin({ cpu: CPU.x86_64 });
  const none = parse(fat({ slices: [{ cpu: CPU.x86_64, bytes: intel }] }).bytes, 'arm64');
  assertRefused(none, /no arm64 slice/);
  assert.equal(none.error, 'ENOENT');
  const arm = thin({ cpu: CPU.arm64 });
  assertRefused(
    parse(fat({ slices: [{ cpu: CPU.arm64, bytes: arm }, { cpu: CPU.arm64, bytes: arm }] }).bytes),
    /two arm64 slices/,
  );
  assertRefused(
    parse(fat({ slices: [{ cpu: CPU.arm64, bytes: arm }, { cpu: CPU.arm64e, bytes: thin({ cpu: CPU.arm64e }) }] }).bytes),
    /variant/,
  );
  // The fat entry says arm64 but the slice's own header says x86_64.
  assertRefused(parse(fat({ slices: [{ cpu: CPU.arm64, bytes: intel }] }).bytes), /arm64 slice: slice is cputype/);
});

test('32-bit is refused with a reason: thin MH_MAGIC and a 32-bit slice in a fat file', () => {
  assertRefused(parse(thin({ magic: MH_MAGIC, cpu: CPU.arm })), /32-bit/);
  const slice32 = thin({ magic: MH_MAGIC, cpu: CPU.arm64 });
  assertRefused(parse(fat({ slices: [{ cpu: CPU.arm64, bytes: slice32 }] }).bytes), /32-bit/);
  // A fat file with only 32-bit CPUs has no arm64 slice at all.
  const only32 = fat({ slices: [{ cpu: CPU.i386, bytes: thin({ magic: MH_MAGIC, cpu: CPU.i386 }) }] });
  assertRefused(parse(only32.bytes), /no arm64 slice/);
});

test('big-endian Mach-O and unknown magic are refused', () => {
  assertRefused(parse(thin({ bigEndian: true })), /big-endian/);
  assertRefused(parse(Buffer.from('#!/bin/sh\necho hi\n')), /not a Mach-O/);
});

test('every truncation of a thin and of a fat file is a clean refusal', () => {
  const whole = thin({ commands: sampleCommands(), tail: 0 });
  const headerAndCommands = whole.length; // tail 0: the commands end the file
  for (let n = 0; n < headerAndCommands; n++) {
    assertRefused(parse(whole.subarray(0, n)));
  }
  assert.equal(parse(whole).ok, true);
  const f = fat({ is64: true, slices: [{ cpu: CPU.x86_64, bytes: thin({ cpu: CPU.x86_64, tail: 0 }) }, { cpu: CPU.arm64, bytes: whole }] }).bytes;
  for (let n = 0; n < f.length; n++) {
    const r = parse(f.subarray(0, n));
    assertRefused(r);
  }
  assert.equal(parse(f).ok, true);
});

test('load command sizes: 0, not a multiple of 8, past the end, header past sizeofcmds', () => {
  const good = dylibCommand(LC.LOAD_DYLIB, '/a.dylib');
  const zero = rawCommand(LC.UUID, 0);
  zero.writeUInt32LE(0, 4);
  assertRefused(parse(thin({ commands: [good, zero] })), /cmdsize 0 is smaller than 8/);
  const odd = Buffer.concat([rawCommand(LC.UUID, 12), Buffer.alloc(4)]);
  assertRefused(parse(thin({ commands: [odd] })), /not a multiple of 8/);
  const past = rawCommand(LC.UUID, 24);
  past.writeUInt32LE(4096, 4);
  assertRefused(parse(thin({ commands: [past] })), /extends past sizeofcmds/);
  // ncmds says 2 but sizeofcmds holds exactly one command.
  assertRefused(parse(thin({ commands: [good, good], ncmds: 3, sizeofcmds: good.length * 2 })), /ncmds 3 cannot fit|header extends past/);
  assertRefused(parse(thin({ commands: [good], ncmds: 2, sizeofcmds: good.length + 8 })), /extends past|smaller than|not a multiple of 8/);
  // sizeofcmds larger than the file.
  assertRefused(parse(thin({ commands: [good], sizeofcmds: 1 << 20, tail: 0 })), /sizeofcmds/);
});

test('huge ncmds is refused before anything is allocated for it', () => {
  assertRefused(parse(thin({ commands: [dylibCommand(LC.LOAD_DYLIB, '/a.dylib')], ncmds: 0xffffffff })), /ncmds 4294967295 cannot fit/);
});

test('string offsets out of range, unterminated and invalid UTF-8 strings are refused', () => {
  assertRefused(parse(thin({ commands: [dylibCommand(LC.LOAD_DYLIB, '/a.dylib', { nameOffset: 4096 })] })), /string offset 4096 outside/);
  assertRefused(parse(thin({ commands: [dylibCommand(LC.LOAD_DYLIB, '/a.dylib', { nameOffset: 8 })] })), /string offset 8 outside/);
  assertRefused(parse(thin({ commands: [stringCommand(LC.RPATH, '/r', { offset: 4 })] })), /string offset 4 outside/);
  assertRefused(parse(thin({ commands: [dylibCommand(LC.LOAD_DYLIB, '/a.dylib', { terminate: false })] })), /not NUL-terminated/);
  assertRefused(parse(thin({ commands: [stringCommand(LC.RPATH, '', { raw: Buffer.from([0x2f, 0xc3, 0x28]) })] })), /UTF-8/);
  assertRefused(parse(thin({ commands: [stringCommand(LC.RPATH, '', { raw: Buffer.from([0x2f, 0xe0, 0x80, 0xaf]) })] })), /UTF-8/);
  assertRefused(parse(thin({ commands: [stringCommand(LC.RPATH, '')] })), /empty string/);
  // A dylib command too small to hold its fixed part.
  const small = rawCommand(LC.LOAD_DYLIB, 16);
  assertRefused(parse(thin({ commands: [small] })), /smaller than 24/);
  // Non-ASCII but valid UTF-8 is kept exactly.
  const name = '/Users/zoë/lib/libé.dylib';
  const r = parse(thin({ commands: [dylibCommand(LC.LOAD_DYLIB, name)] }));
  assert.equal(r.ok, true, r.reason);
  assert.equal(r.commands[0].value, name);
});

test('commands dyld must understand but the reader does not model are refused', () => {
  assertRefused(parse(thin({ commands: [rawCommand(LC.UNKNOWN_REQ, 16)] })), /requires dyld/);
  assertRefused(parse(thin({ commands: [dylibCommand(LC.LAZY_LOAD_DYLIB, '/a.dylib')] })), /LC_LAZY_LOAD_DYLIB/);
  const env = parse(thin({ commands: [stringCommand(LC.DYLD_ENVIRONMENT, 'DYLD_LIBRARY_PATH=/tmp')] }));
  assert.equal(env.ok, true, env.reason);
  assert.deepEqual(env.commands.map((c) => c.kind), ['dyld-environment']);
});

test('fat header: huge nfat_arch, slices past the end or over the header are refused', () => {
  const arm = thin({ cpu: CPU.arm64 });
  const base = fat({ slices: [{ cpu: CPU.arm64, bytes: arm }] }).bytes;
  const huge = Buffer.from(base);
  huge.writeUInt32BE(0xffffffff, 4);
  assertRefused(parse(huge), /slices/);
  const many = Buffer.from(base);
  many.writeUInt32BE(30, 4);
  assertRefused(parse(many), /truncated fat header/);
  const zero = Buffer.from(base);
  zero.writeUInt32BE(0, 4);
  assertRefused(parse(zero), /no slices/);
  const pastEnd = Buffer.from(base);
  pastEnd.writeUInt32BE(base.length, 8 + 12); // size
  assertRefused(parse(pastEnd), /extends past/);
  const offPast = Buffer.from(base);
  offPast.writeUInt32BE(0xfffffff0, 8 + 8);
  assertRefused(parse(offPast), /extends past/);
  const over = Buffer.from(base);
  over.writeUInt32BE(4, 8 + 8);
  assertRefused(parse(over), /overlaps the fat header/);
  const f64 = fat({ is64: true, slices: [{ cpu: CPU.arm64, bytes: arm }] }).bytes;
  f64.writeBigUInt64BE(0xffffffffffffff00n, 8 + 8);
  assertRefused(parse(f64), /extends past/);
});

test('random corruption of valid files never crashes and never yields malformed output', () => {
  // Deterministic xorshift so that a failure is reproducible.
  let s = 0x9e3779b9;
  const rnd = () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s;
  };
  const seeds = [
    thin({ commands: sampleCommands() }),
    fat({ slices: [{ cpu: CPU.x86_64, bytes: thin({ cpu: CPU.x86_64, commands: sampleCommands() }) }, { cpu: CPU.arm64, bytes: thin({ commands: sampleCommands() }) }] }).bytes,
    fat({ is64: true, slices: [{ cpu: CPU.arm64, bytes: thin({ commands: sampleCommands() }) }] }).bytes,
  ];
  let ok = 0;
  let refused = 0;
  for (let iter = 0; iter < 6000; iter++) {
    const b = Buffer.from(seeds[iter % seeds.length]);
    const flips = 1 + (rnd() % 4);
    for (let k = 0; k < flips; k++) b[rnd() % b.length] = rnd() & 0xff;
    const cut = rnd() % 8 === 0 ? rnd() % b.length : b.length;
    const r = parse(b.subarray(0, cut), rnd() % 2 ? 'arm64' : 'x86_64');
    if (r.ok) {
      ok++;
      assert.ok(Array.isArray(r.commands));
      for (const c of r.commands) {
        assert.equal(typeof c.value, 'string');
        assert.ok(c.value.length > 0);
        assert.ok(!c.value.includes('\0'));
      }
      assert.ok(r.sliceOffset + r.sliceSize <= cut);
    } else {
      refused++;
      assert.equal(typeof r.reason, 'string');
    }
  }
  assert.ok(ok > 0 && refused > 0, `both outcomes occur (ok ${ok}, refused ${refused})`);
});

test('machoParse rejects arguments of the wrong type with TypeError', () => {
  assert.throws(() => native.machoParse('not bytes', 'arm64'), TypeError);
  assert.throws(() => native.machoParse(Buffer.alloc(64), 'ppc'), TypeError);
  assert.throws(() => native.machoParse(Buffer.alloc(64)), TypeError);
  assertRefused(native.machoParse(new Uint8Array(0), 'arm64'), /truncated/);
});

// ---- closure resolution on a fake root --------------------------------------------------

function fakeRoot(files, links = {}) {
  const root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'confined-macho-')));
  for (const [p, bytes] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(root + p), { recursive: true });
    fs.writeFileSync(root + p, bytes);
  }
  for (const [link, target] of Object.entries(links)) {
    fs.mkdirSync(path.dirname(root + link), { recursive: true });
    fs.symlinkSync(target, root + link);
  }
  return root;
}

const closureOf = (root, exe, cpu = 'arm64') =>
  resolveClosure({ executable: exe, cpu, host: fsHost(root), parse: native.machoParse });

test('closure: @rpath over the loading chain, @loader_path, @executable_path, system left out', (t) => {
  const root = fakeRoot(
    {
      '/opt/app/bin/node': executable({
        rpaths: ['@executable_path/../lib', '/opt/extra'],
        deps: [
          { name: '/usr/lib/libSystem.B.dylib' },
          { name: '/System/Library/Frameworks/CoreFoundation.framework/Versions/A/CoreFoundation' },
          { name: '@rpath/libnode.dylib' },
          { name: '@executable_path/../lib/libuv.dylib' },
          { name: '@rpath/libmissing.dylib', kind: 'weak' },
        ],
      }),
      '/opt/app/lib/libnode.dylib': dylib({
        id: '@rpath/libnode.dylib',
        rpaths: ['@loader_path/private'],
        deps: [
          { name: '@rpath/libhelper.dylib' }, // own rpath first
          { name: '@rpath/libicu.dylib' }, // only in /opt/extra: the executable's rpath
          { name: '/usr/lib/libc++.1.dylib' },
        ],
      }),
      '/opt/app/lib/private/libhelper.dylib': dylib({ id: '@rpath/libhelper.dylib' }),
      '/opt/extra/libicu.dylib': dylib({
        id: '@rpath/libicu.dylib',
        deps: [{ name: '@rpath/libnode.dylib', kind: 'upward' }, { name: '@loader_path/libdata.dylib', kind: 'reexport' }],
      }),
      '/opt/extra/libdata.dylib': dylib({ id: '/opt/extra/libdata.dylib' }),
      '/opt/app/lib/libuv.1.dylib': dylib({ id: '@rpath/libuv.1.dylib' }),
    },
    { '/opt/app/lib/libuv.dylib': 'libuv.1.dylib' },
  );
  t.after(() => fs.rmSync(root, { recursive: true, force: true }));
  const c = closureOf(root, '/opt/app/bin/node');
  assert.equal(c.ok, true, c.reason);
  assert.equal(c.executable, '/opt/app/bin/node');
  assert.deepEqual(
    c.images.map((i) => [i.path, i.role]),
    [
      ['/opt/app/bin/node', 'executable'],
      ['/opt/app/lib/libnode.dylib', 'library'],
      ['/opt/app/lib/private/libhelper.dylib', 'library'],
      ['/opt/extra/libicu.dylib', 'library'],
      ['/opt/extra/libdata.dylib', 'library'],
      ['/opt/app/lib/libuv.1.dylib', 'library'],
    ],
  );
  // Every image file the fixture holds is in the closure, and nothing else.
  const onDisk = [];
  const walk = (d) => {
    for (const e of fs.readdirSync(root + d, { withFileTypes: true })) {
      const p = `${d === '/' ? '' : d}/${e.name}`;
      if (e.isDirectory()) walk(p);
      else if (e.isFile()) onDisk.push(p);
    }
  };
  walk('/');
  assert.deepEqual(c.images.map((i) => i.path).sort(), onDisk.sort());
  assert.deepEqual(c.system, [
    '/System/Library/Frameworks/CoreFoundation.framework/Versions/A/CoreFoundation',
    '/usr/lib/libSystem.B.dylib',
    '/usr/lib/libc++.1.dylib',
  ]);
  // Every path dyld opens that is not the real path: a '..' spelling and a symlink.
  assert.deepEqual(c.aliases.map((a) => ({ ...a })), [
    { link: '/opt/app/bin/../lib/libnode.dylib', target: '/opt/app/lib/libnode.dylib' },
    { link: '/opt/app/bin/../lib/libuv.dylib', target: '/opt/app/lib/libuv.1.dylib' },
  ]);
  for (const a of c.aliases) assert.equal(fs.realpathSync(root + a.link), root + a.target);
  // The executor's profile request: libraries and plain alias links, never a '..' spelling.
  const req = executorProfileRequest({ closure: c, program: '/ns/program', input: '/ns/input' });
  assert.equal(req.exec, '/opt/app/bin/node');
  assert.deepEqual([...req.runtimeFiles], c.images.slice(1).map((i) => i.path));
  const built = buildSeatbeltProfile(req);
  assert.equal(built.ok, true, built.reason);
  assert.equal(c.weakAbsent.length, 1);
  assert.equal(c.weakAbsent[0].name, '@rpath/libmissing.dylib');
  assert.deepEqual(c.weakAbsent[0].tried, ['/opt/app/bin/../lib/libmissing.dylib', '/opt/extra/libmissing.dylib']);
  const node = c.images.find((i) => i.path === '/opt/app/lib/libnode.dylib');
  assert.deepEqual(node.requestedAs, ['@rpath/libnode.dylib']);
  assert.equal(node.installName, '@rpath/libnode.dylib');
  assert.ok(Object.isFrozen(c) && Object.isFrozen(c.images) && Object.isFrozen(c.images[0]));
});

test('closure: the first LC_RPATH that holds the file wins', (t) => {
  const root = fakeRoot({
    '/a/bin/tool': executable({ rpaths: ['/first', '/second'], deps: [{ name: '@rpath/libx.dylib' }] }),
    '/first/libx.dylib': dylib({ id: '@rpath/libx.dylib' }),
    '/second/libx.dylib': dylib({ id: '@rpath/libx.dylib' }),
  });
  t.after(() => fs.rmSync(root, { recursive: true, force: true }));
  const c = closureOf(root, '/a/bin/tool');
  assert.equal(c.ok, true, c.reason);
  assert.deepEqual(c.images.map((i) => i.path), ['/a/bin/tool', '/first/libx.dylib']);
});

test("closure: a sibling's LC_RPATH is not searched (only the loading chain)", (t) => {
  const root = fakeRoot({
    '/a/bin/tool': executable({ deps: [{ name: '/a/lib/libA.dylib' }, { name: '/a/lib/libB.dylib' }] }),
    '/a/lib/libA.dylib': dylib({ id: '/a/lib/libA.dylib', rpaths: ['/only-a'] }),
    '/a/lib/libB.dylib': dylib({ id: '/a/lib/libB.dylib', deps: [{ name: '@rpath/libC.dylib' }] }),
    '/only-a/libC.dylib': dylib({ id: '@rpath/libC.dylib' }),
  });
  t.after(() => fs.rmSync(root, { recursive: true, force: true }));
  const c = closureOf(root, '/a/bin/tool');
  assert.equal(c.ok, false);
  assert.match(c.reason, /libB\.dylib: "@rpath\/libC\.dylib" not found \(tried no LC_RPATH\)/);
});

test('closure: refusals (missing, bare name, 32-bit, wrong type, foreign dylinker, DYLD env, system via @rpath first)', (t) => {
  const cases = [
    [{ '/b/exe': executable({ deps: [{ name: '/opt/none/libz.dylib' }] }) }, /not found/],
    [{ '/b/exe': executable({ deps: [{ name: 'libz.dylib' }] }) }, /not absolute/],
    [{ '/b/exe': executable({ deps: [{ name: 'lib/libz.dylib' }] }) }, /not absolute/],
    [{ '/b/exe': executable({ deps: [{ name: '@foo/libz.dylib' }] }) }, /unsupported install name/],
    [{ '/b/exe': executable({ rpaths: ['lib'], deps: [] }) }, /LC_RPATH "lib"/],
    [
      { '/b/exe': executable({ deps: [{ name: '/b/lib32.dylib' }] }), '/b/lib32.dylib': thin({ magic: MH_MAGIC, cpu: CPU.arm }) },
      /\/b\/lib32\.dylib: 32-bit/,
    ],
    [
      { '/b/exe': executable({ deps: [{ name: '/b/bundle.so' }] }), '/b/bundle.so': dylib({ filetype: 8 }) },
      /not a dylib/,
    ],
    [{ '/b/exe': dylib({ id: '/b/exe' }) }, /not an executable/],
    [{ '/b/exe': executable({ dylinker: '/tmp/evil-dyld' }) }, /dynamic linker/],
    [{ '/b/exe': executable({ extra: [stringCommand(LC.DYLD_ENVIRONMENT, 'DYLD_LIBRARY_PATH=/x')] }) }, /LC_DYLD_ENVIRONMENT/],
    [
      {
        '/b/exe': executable({ rpaths: ['/usr/lib/swift', '/b/lib'], deps: [{ name: '@rpath/libswiftCore.dylib' }] }),
        '/b/lib/libswiftCore.dylib': dylib({ id: '@rpath/libswiftCore.dylib' }),
      },
      /shared cache holds it cannot be decided/,
    ],
    [{ '/b/exe': executable({ deps: [{ name: '/opt/../usr/lib/libz.dylib' }] }) }, /through '\.\.'/],
    [{ '/b/exe': executable({ cpu: CPU.x86_64 }) }, /not arm64/],
    // The data volume is not system content: a library there must exist and be pinned.
    [{ '/b/exe': executable({ deps: [{ name: '/System/Volumes/Data/opt/evil.dylib' }] }) }, /evil\.dylib" not found/],
  ];
  for (const [files, pattern] of cases) {
    const root = fakeRoot(files);
    t.after(() => fs.rmSync(root, { recursive: true, force: true }));
    const c = closureOf(root, '/b/exe');
    assert.equal(c.ok, false, `expected refusal ${pattern}`);
    assert.match(c.reason, pattern);
  }
});

test('closure: @rpath into a system location with nothing on disk after it is a system library', (t) => {
  const root = fakeRoot({
    '/b/exe': executable({ rpaths: ['/usr/lib/swift'], deps: [{ name: '@rpath/libswiftCore.dylib' }] }),
  });
  t.after(() => fs.rmSync(root, { recursive: true, force: true }));
  const c = closureOf(root, '/b/exe');
  assert.equal(c.ok, true, c.reason);
  assert.deepEqual(c.system, ['/usr/lib/swift/libswiftCore.dylib']);
  assert.deepEqual(c.images.map((i) => i.path), ['/b/exe']);
});

test('closure: cycles terminate; symlinked executable with @executable_path across directories is refused', (t) => {
  const root = fakeRoot(
    {
      '/c/bin/exe': executable({ deps: [{ name: '@executable_path/libA.dylib' }] }),
      '/c/bin/libA.dylib': dylib({ id: '/c/bin/libA.dylib', deps: [{ name: '/c/bin/libB.dylib' }] }),
      '/c/bin/libB.dylib': dylib({ id: '/c/bin/libB.dylib', deps: [{ name: '/c/bin/libA.dylib' }] }),
    },
    { '/usr/local/bin/exe': '../../../c/bin/exe', '/c/bin/same': 'exe' },
  );
  t.after(() => fs.rmSync(root, { recursive: true, force: true }));
  const ok = closureOf(root, '/c/bin/exe');
  assert.equal(ok.ok, true, ok.reason);
  assert.deepEqual(ok.images.map((i) => i.path), ['/c/bin/exe', '/c/bin/libA.dylib', '/c/bin/libB.dylib']);
  const sameDir = closureOf(root, '/c/bin/same');
  assert.equal(sameDir.ok, true, sameDir.reason);
  const withLink = closureOf(root, '/c/bin/exe');
  assert.deepEqual(withLink.aliases, []);
  assert.deepEqual(sameDir.aliases.map((a) => ({ ...a })), [{ link: '/c/bin/same', target: '/c/bin/exe' }]);
  const linked = closureOf(root, '/usr/local/bin/exe');
  assert.equal(linked.ok, false);
  assert.match(linked.reason, /@executable_path/);
});

test('closure: a library under /System/Volumes/Data is pinned like any other file', (t) => {
  const root = fakeRoot({
    '/b/exe': executable({ deps: [{ name: '/System/Volumes/Data/opt/lib.dylib' }] }),
    '/System/Volumes/Data/opt/lib.dylib': dylib({ id: '/System/Volumes/Data/opt/lib.dylib' }),
  });
  t.after(() => fs.rmSync(root, { recursive: true, force: true }));
  const c = closureOf(root, '/b/exe');
  assert.equal(c.ok, true, c.reason);
  assert.deepEqual(c.images.map((i) => i.path), ['/b/exe', '/System/Volumes/Data/opt/lib.dylib']);
  assert.deepEqual(c.system, []);
});

test('closure: a plain symlink alias is kept for the profile; the executable is not a runtime file', (t) => {
  const root = fakeRoot(
    {
      '/h/Cellar/node/26/bin/node': executable({ deps: [{ name: '/h/opt/icu/lib/libicuuc.77.dylib' }] }),
      '/h/Cellar/icu/77/lib/libicuuc.77.dylib': dylib({ id: '/h/opt/icu/lib/libicuuc.77.dylib' }),
    },
    { '/h/opt/icu': '../Cellar/icu/77', '/h/bin/node': '../Cellar/node/26/bin/node' },
  );
  t.after(() => fs.rmSync(root, { recursive: true, force: true }));
  const c = closureOf(root, '/h/bin/node');
  assert.equal(c.ok, true, c.reason);
  assert.deepEqual(c.aliases.map((a) => ({ ...a })), [
    { link: '/h/bin/node', target: '/h/Cellar/node/26/bin/node' },
    { link: '/h/opt/icu/lib/libicuuc.77.dylib', target: '/h/Cellar/icu/77/lib/libicuuc.77.dylib' },
  ]);
  const req = executorProfileRequest({ closure: c, program: '/ns/program', input: '/ns/input' });
  assert.equal(req.exec, '/h/Cellar/node/26/bin/node');
  assert.deepEqual([...req.runtimeFiles], ['/h/Cellar/icu/77/lib/libicuuc.77.dylib', '/h/opt/icu/lib/libicuuc.77.dylib']);
});

test('closure: fat runtime files resolve per CPU', (t) => {
  const armExe = executable({ deps: [{ name: '/f/libarm.dylib' }] });
  const intelExe = executable({ cpu: CPU.x86_64, deps: [{ name: '/f/libintel.dylib' }] });
  const root = fakeRoot({
    '/f/exe': fat({ slices: [{ cpu: CPU.arm64, bytes: armExe }, { cpu: CPU.x86_64, bytes: intelExe }] }).bytes,
    '/f/libarm.dylib': dylib({ id: '/f/libarm.dylib' }),
    '/f/libintel.dylib': dylib({ cpu: CPU.x86_64, id: '/f/libintel.dylib' }),
  });
  t.after(() => fs.rmSync(root, { recursive: true, force: true }));
  assert.deepEqual(closureOf(root, '/f/exe', 'arm64').images.map((i) => i.path), ['/f/exe', '/f/libarm.dylib']);
  assert.deepEqual(closureOf(root, '/f/exe', 'x86_64').images.map((i) => i.path), ['/f/exe', '/f/libintel.dylib']);
});
