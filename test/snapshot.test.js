// snapshotDigest: agreement with an independent node:crypto implementation, and every rule
// of the spec's snapshot paths and contents. Also copySnapshot, the copy run() validation takes.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MAX_SNAPSHOT_BYTES, MAX_SNAPSHOT_FILES } from '../lib/constants.js';
import { native } from '../lib/native.js';
import { copySnapshot, snapshotDigest } from '../lib/snapshot.js';
import {
  prng,
  randomSnapshot,
  referenceDigest,
  SEGMENT_CHARS,
} from './helpers/snapshot-reference.js';

const bytes = (...values) => new Uint8Array(values);
const file = (path, content = bytes(1)) => ({ path, content });
const PREFIX = 'invalid snapshot: ';

/** Asserts that files are refused with a TypeError starting PREFIX and matching reason. */
function refuses(files, reason) {
  assert.throws(
    () => snapshotDigest(files),
    (error) => {
      assert.equal(error.name, 'TypeError');
      assert.ok(error.message.startsWith(PREFIX), error.message);
      assert.match(error.message, reason);
      return true;
    },
  );
}

/** Asserts that files are accepted and hash as the reference implementation says. */
function accepts(files) {
  assert.equal(snapshotDigest(files), referenceDigest(files));
}

test('snapshotDigest agrees with node:crypto on 1,200 random valid snapshots', () => {
  const random = prng(0x5eed);
  const seen = { files: 0, empty: 0, sizes0: 0, long: 0, deep: 0, chars: new Set() };
  for (let i = 0; i < 1200; i++) {
    const files = randomSnapshot(random);
    seen.files += files.length;
    if (files.length === 0) seen.empty++;
    for (const { path, content } of files) {
      if (content.length === 0) seen.sizes0++;
      if (path.length === 256) seen.long++;
      if (path.split('/').length === 16) seen.deep++;
      for (const c of path) seen.chars.add(c);
    }
    assert.equal(snapshotDigest(files), referenceDigest(files), `snapshot ${i}`);
  }
  // The generator really produced the shapes the rules allow at their edges.
  assert.ok(seen.files > 5000, `${seen.files} files`);
  assert.ok(seen.empty > 10 && seen.sizes0 > 100 && seen.long > 10 && seen.deep > 10, seen);
  for (const c of `${SEGMENT_CHARS}/`) assert.ok(seen.chars.has(c), `character ${c} never used`);
});

test('the digest covers each path, size and content, in byte order of the paths', () => {
  const base = [file('b', bytes(1, 2)), file('C', bytes(3)), file('a/c', bytes())];
  const digest = snapshotDigest(base);
  accepts(base);
  // Input order does not matter; byte order ('C' < 'a/c' < 'b') is the protocol's.
  assert.equal(snapshotDigest([...base].reverse()), digest);
  assert.notEqual(snapshotDigest([file('b', bytes(1, 3)), base[1], base[2]]), digest);
  assert.notEqual(snapshotDigest([file('d', bytes(1, 2)), base[1], base[2]]), digest);
  assert.notEqual(snapshotDigest([file('b', bytes(1, 2, 0)), base[1], base[2]]), digest);
  assert.match(digest, /^sha256:[0-9a-f]{64}$/);
});

test('an empty list is a snapshot', () => {
  accepts([]);
});

test('a Buffer and a view at an offset are Uint8Arrays; only the viewed bytes count', () => {
  const backing = new Uint8Array([9, 9, 1, 2, 3, 9]);
  accepts([file('view', backing.subarray(2, 5))]);
  assert.equal(
    snapshotDigest([file('view', backing.subarray(2, 5))]),
    snapshotDigest([file('view', Buffer.from([1, 2, 3]))]),
  );
  accepts([file('empty', Buffer.alloc(0)), file('pooled', Buffer.from('pooled'))]);
});

test('path grammar: only A-Z a-z 0-9 . _ - and / are allowed', () => {
  accepts([file(SEGMENT_CHARS), file('...'), file('.a'), file('a./-_')]);
  for (const bad of [
    'a b',
    'a\\b',
    'é',
    'a:b',
    'a*',
    'a\0b',
    'a\nb',
    '~',
    'a+b',
    'a@b',
    '\u{1f600}',
  ]) {
    refuses([file(bad)], /path has a character other than A-Z a-z 0-9 \. _ - and \//);
  }
});

test('path shape: relative, non-empty segments, not . or ..', () => {
  refuses([file('')], /files\[0\] "": path is empty/);
  refuses([file('/a')], /files\[0\] "\/a": path is absolute/);
  for (const bad of ['a/', 'a//b', '/']) {
    refuses([file(bad)], bad === '/' ? /path is absolute/ : /path has an empty segment/);
  }
  for (const bad of ['.', '..', './a', 'a/.', 'a/./b', '../a', 'a/..', 'a/../b']) {
    refuses([file(bad)], /path has a "\." or "\.\." segment/);
  }
});

test('paths are at most 256 characters and 16 segments', () => {
  accepts([file('a'.repeat(256))]);
  refuses([file('a'.repeat(257))], /path is longer than 256 characters/);
  accepts([file(Array(16).fill('d').join('/'))]);
  refuses([file(Array(17).fill('d').join('/'))], /path has more than 16 segments/);
});

test('case-insensitive duplicates are refused', () => {
  accepts([file('a/b.txt'), file('a/c.txt')]);
  refuses(
    [file('a/B.txt'), file('A/b.TXT')],
    /files\[1\] "A\/b\.TXT": path duplicates files\[0\] "a\/B\.txt"/,
  );
  refuses([file('x'), file('x')], /path duplicates/);
});

test('file/directory clashes are refused in both orders and across case', () => {
  const clash = /path is a file and also a directory of/;
  refuses(
    [file('a'), file('a/b')],
    /files\[0\] "a": path is a file and also a directory of files\[1\] "a\/b"/,
  );
  refuses(
    [file('a/b'), file('a')],
    /files\[1\] "a": path is a file and also a directory of files\[0\] "a\/b"/,
  );
  refuses([file('A'), file('a/b')], clash);
  refuses([file('a/b'), file('A')], clash);
  refuses([file('x/Y'), file('X/y/z/w')], clash);
  // Names that sort between "a" and "a/..." in byte order do not hide the clash.
  refuses([file('a'), file('a-b'), file('a.c'), file('a/b')], clash);
  refuses([file('a/b'), file('a.c'), file('a-b'), file('A')], clash);
  // Controls: a shared prefix that is not a directory is no clash.
  accepts([file('a-b'), file('a/b')]);
  accepts([file('ab'), file('a/b'), file('a.b/c')]);
});

test('content must be a Uint8Array', () => {
  accepts([file('buffer', Buffer.from('x'))]);
  const notBytes = [
    [1, 2, 3],
    new DataView(new ArrayBuffer(3)),
    new ArrayBuffer(3),
    new Uint16Array(3),
    new Int8Array(3),
    new Uint8ClampedArray(3),
    'abc',
    null,
    undefined,
    { length: 0 },
    new Proxy(new Uint8Array(3), {}),
  ];
  for (const content of notBytes) {
    refuses([{ path: 'f', content }], /files\[0\] "f": content is not a Uint8Array/);
  }
  refuses([{ path: 'f' }], /content is not a Uint8Array/);
});

test('a path must be a string', () => {
  for (const path of [1, null, undefined, new String('a'), Symbol('a'), ['a']]) {
    refuses([{ path, content: bytes() }], /files\[0\]: path is not a string/);
  }
  refuses(null, /files must be an array/);
  refuses({ length: 0 }, /files must be an array/);
  refuses([null], /files\[0\] is not an object/);
  refuses([file('a'), 'a'], /files\[1\] is not an object/);
});

test('the total size is bounded (MAX_SNAPSHOT_BYTES through the public API)', () => {
  // Exactly at a limit passes, one byte over is refused; a small limit through the addon
  // avoids allocating 512 MiB.
  const two = () => [bytes(1, 2, 3), bytes(4, 5)];
  assert.equal(
    native.snapshotDigest(['a', 'b'], two(), 5),
    referenceDigest([file('a', bytes(1, 2, 3)), file('b', bytes(4, 5))]),
  );
  assert.throws(() => native.snapshotDigest(['a', 'b'], two(), 4), {
    name: 'TypeError',
    message: 'files[1] "b": contents total more than 4 bytes',
  });
  assert.throws(() => native.snapshotValidate(['a'], [bytes(1)], 0), /more than 0 bytes/);
  assert.equal(native.snapshotValidate(['a'], [bytes()], 0), undefined);
  // Through the public API: two views of one zero-filled buffer total MAX_SNAPSHOT_BYTES + 2
  // bytes, refused before anything is hashed (the pages are never touched).
  const half = new ArrayBuffer(MAX_SNAPSHOT_BYTES / 2 + 1);
  refuses(
    [file('a', new Uint8Array(half)), file('b', new Uint8Array(half))],
    new RegExp(`files\\[1\\] "b": contents total more than ${MAX_SNAPSHOT_BYTES} bytes`),
  );
});

test('the file count is bounded by MAX_SNAPSHOT_FILES (the C limit equals the constant)', () => {
  const empty = bytes();
  const files = Array.from({ length: MAX_SNAPSHOT_FILES }, (_, i) => file(`f${i}`, empty));
  assert.equal(snapshotDigest(files), referenceDigest(files));
  files.push(file('g', empty));
  refuses(
    files,
    new RegExp(`files\\[${MAX_SNAPSHOT_FILES}\\] "g": more than ${MAX_SNAPSHOT_FILES} files`),
  );
});

test('each rule has its own reason', () => {
  const cases = [
    [file('a b')],
    [file('')],
    [file('a'.repeat(257))],
    [file('/a')],
    [file(Array(17).fill('d').join('/'))],
    [file('a//b')],
    [file('a/..')],
    [{ path: 1, content: bytes() }],
    [{ path: 'a', content: [] }],
    [file('a'), file('A')],
    [file('a'), file('A/b')],
  ];
  const reasons = cases.map((files) => {
    try {
      snapshotDigest(files);
    } catch (error) {
      return error.message.replace(/^.*?: /, '').replace(/files\[\d+\]( "[^"]*")?/g, '');
    }
    assert.fail(`accepted ${JSON.stringify(files)}`);
  });
  assert.equal(new Set(reasons).size, cases.length, reasons.join('\n'));
});

test('a long or odd offending path is quoted escaped and cut', () => {
  refuses([file(`${'x'.repeat(300)} `)], /"x{96}\.\.\.": path has a character/);
  refuses([file('a"\n')], /"a\\"\\x0a": path has a character/);
});

test('snapshotDigest reads files.length, each element and its two fields once', () => {
  const reads = [];
  const counted = (target, name) =>
    new Proxy(target, {
      get(t, key, receiver) {
        reads.push(`${name}.${String(key)}`);
        return Reflect.get(t, key, receiver);
      },
    });
  const files = counted([counted(file('a'), 'f0'), counted(file('b'), 'f1')], 'files');
  accepts([file('a'), file('b')]);
  assert.equal(snapshotDigest(files), snapshotDigest([file('a'), file('b')]));
  assert.deepEqual(reads.sort(), [
    'f0.content',
    'f0.path',
    'f1.content',
    'f1.path',
    'files.0',
    'files.1',
    'files.length',
  ]);
});

test('copySnapshot copies, validates, hashes and freezes', () => {
  const a = Buffer.from('alpha');
  const b = new Uint8Array([1, 2, 3, 4]).subarray(1);
  const files = [file('x/a', a), file('b', b)];
  const expected = referenceDigest(files);
  const copy = copySnapshot(files, 'L: ');
  assert.equal(copy.digest, expected);
  assert.equal(copy.totalBytes, 8);
  assert.ok(Object.isFrozen(copy) && Object.isFrozen(copy.files));
  assert.ok(copy.files.every((f) => Object.isFrozen(f)));
  assert.deepEqual(
    copy.files.map((f) => f.path),
    ['x/a', 'b'],
  );
  for (const [i, original] of [a, b].entries()) {
    const c = copy.files[i].content;
    assert.ok(c instanceof Uint8Array && Object.getPrototypeOf(c) === Uint8Array.prototype);
    assert.notEqual(c.buffer, original.buffer);
    assert.equal(c.buffer, copy.files[0].content.buffer, 'one block for all copies');
    assert.deepEqual([...c], [...original]);
  }
  // Changing the caller's bytes afterwards changes neither the copy nor what it hashes to.
  a.fill(0);
  b[0] = 99;
  assert.equal(Buffer.from(copy.files[0].content).toString(), 'alpha');
  assert.equal(copy.files[1].content[0], 2);
  assert.equal(snapshotDigest(copy.files), expected);
  assert.notEqual(snapshotDigest(files), expected);
});

test('copySnapshot copies the bytes without calling a subclass or a patched prototype', () => {
  class Sneaky extends Uint8Array {
    get length() {
      throw new Error('length getter called');
    }
    static get [Symbol.species]() {
      throw new Error('species called');
    }
  }
  const content = new Sneaky([5, 6, 7]);
  const copy = copySnapshot([file('s', content)], '');
  assert.deepEqual([...copy.files[0].content], [5, 6, 7]);
  assert.equal(copy.digest, referenceDigest([file('s', bytes(5, 6, 7))]));
});

test('copySnapshot refuses what snapshotDigest refuses, with the label as prefix', () => {
  const label = 'invalid confined run request: input.';
  assert.throws(() => copySnapshot([file('a'), file('A')], label), {
    name: 'TypeError',
    message:
      'invalid confined run request: input.files[1] "A": path duplicates files[0] "a" (paths compare case-insensitively)',
  });
  assert.throws(() => copySnapshot([{ path: 'a', content: [1] }], label), {
    name: 'TypeError',
    message: 'invalid confined run request: input.files[0] "a": content is not a Uint8Array',
  });
  assert.deepEqual(copySnapshot([], label), {
    files: [],
    digest: referenceDigest([]),
    totalBytes: 0,
  });
});

test('copySnapshot reads own data properties only, each once', () => {
  const L = 'P: ';
  const refusesCopy = (files, message) =>
    assert.throws(() => copySnapshot(files, L), { name: 'TypeError', message });
  refusesCopy({ 0: file('a'), length: 1 }, 'P: files must be a plain array');
  class List extends Array {}
  refusesCopy(List.from([file('a')]), 'P: files must be a plain array');
  refusesCopy(Object.assign([file('a')], { extra: 1 }), 'P: files has an unexpected key "extra"');
  const symbolKey = [file('a')];
  symbolKey[Symbol('s')] = 1;
  refusesCopy(symbolKey, 'P: files has an unexpected key Symbol(s)');
  // eslint-disable-next-line no-sparse-arrays
  refusesCopy([file('a'), , file('b')], 'P: files[1] is a hole');
  const getterIndex = [file('a')];
  Object.defineProperty(getterIndex, 0, { get: () => file('a'), enumerable: true });
  refusesCopy(getterIndex, 'P: files[0] is an accessor property');
  refusesCopy([{ ...file('a'), mode: 0o644 }], 'P: files[0] has an unexpected key "mode"');
  refusesCopy([{ path: 'a' }], 'P: files[0].content is missing');
  refusesCopy([{ content: bytes() }], 'P: files[0].path is missing');
  refusesCopy(
    [Object.defineProperty({ path: 'a' }, 'content', { get: () => bytes(), enumerable: true })],
    'P: files[0].content is an accessor property',
  );
  refusesCopy(
    [Object.create({ path: 'a', content: bytes() })],
    'P: files[0] must be a plain object',
  );
  class File {
    constructor() {
      this.path = 'a';
      this.content = bytes();
    }
  }
  refusesCopy([new File()], 'P: files[0] must be a plain object');
  refusesCopy([[]], 'P: files[0] must be a plain object');
  refusesCopy([null], 'P: files[0] must be a plain object');
  // A null-prototype element is plain.
  const bare = Object.assign(Object.create(null), file('a'));
  assert.equal(copySnapshot([bare], L).digest, referenceDigest([file('a')]));

  // A Proxy at each level sees one ownKeys and one descriptor read per field, and no get.
  const traps = [];
  const counted = (target, name) =>
    new Proxy(target, {
      get(t, key, receiver) {
        traps.push(`get ${name}.${String(key)}`);
        return Reflect.get(t, key, receiver);
      },
      getOwnPropertyDescriptor(t, key) {
        traps.push(`read ${name}.${String(key)}`);
        return Reflect.getOwnPropertyDescriptor(t, key);
      },
      ownKeys(t) {
        traps.push(`keys ${name}`);
        return Reflect.ownKeys(t);
      },
    });
  const files = counted(
    [counted(file('a', bytes(1)), 'f0'), counted(file('b', bytes(2)), 'f1')],
    'files',
  );
  const copy = copySnapshot(files, L);
  assert.equal(copy.digest, referenceDigest([file('a', bytes(1)), file('b', bytes(2))]));
  assert.deepEqual(traps.sort(), [
    'keys f0',
    'keys f1',
    'keys files',
    'read f0.content',
    'read f0.path',
    'read f1.content',
    'read f1.path',
    'read files.0',
    'read files.1',
    'read files.length',
  ]);
});
