// Deterministic property-based fuzz of run() request validation (spec invariant 1; issue 10).
//
// Property: every request, random or a mutation of a valid one, either throws a TypeError
// synchronously from `new ConfinedExecutor({ root }).run(request, signal)` or is a valid
// request; nothing is created on disk before validation passes; an accessor is never called.
// Each mutation declares whether it always breaks a request (`true`), never does (`false`)
// or may (`null`); a request with a breaking mutation must be refused, one with only neutral
// mutations must be accepted. An accepted request is checked independently: its digests are
// recomputed with node:crypto (test/helpers/snapshot-reference.js), its bytes are the caller's,
// copied, and it is deeply frozen.
//
// The bulk goes through lib/validate.js validateRunRequest (a valid request is not run); every
// refused request also goes through run(), which must throw the same error synchronously, and
// the executor root (a real 0700 directory) is listed after a sample of them and at the end.
// A handful of valid requests are really run, and the root is checked after each.
//
// CONFINED_FUZZ_ITERATIONS (default 100000) and CONFINED_FUZZ_SEED (default 0x5eed) select
// the run; a failure prints the seed and iteration so it can be replayed, and
// CONFINED_FUZZ_TRACE=1 prints every iteration and mutation on stderr.
import assert from 'node:assert/strict';
import { mkdtempSync, chmodSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import {
  MAX_ARGS,
  MAX_CPU_SECONDS,
  MAX_DESCRIPTORS,
  MAX_OUTPUT_BYTES,
  MAX_TIMEOUT_MS,
  MIN_DESCRIPTORS,
} from '../lib/constants.js';
import { ConfinedExecutor } from '../lib/executor.js';
import { hostProblem } from '../lib/host.js';
import { confinedProfile } from '../lib/profile.js';
import { describeRuntime } from '../lib/runtime.js';
import { MAX_ARG_CHARS, REQUEST_PREFIX, SIGNAL_MESSAGE, validateRunRequest } from '../lib/validate.js';
import { prng, referenceDigest } from './helpers/snapshot-reference.js';

const ITERATIONS = Number(process.env.CONFINED_FUZZ_ITERATIONS ?? 100_000);
const SEED = Number(process.env.CONFINED_FUZZ_SEED ?? 0x5eed);
/** Every how many refusals the root is listed (and always at the end). */
const LIST_EVERY = 97;

const SEGMENT = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-';
const EXTENSIONS = ['.mjs', '.cjs', '.js', '.mts', '.cts', '.ts'];
const NUMERIC = {
  timeoutMs: [1, MAX_TIMEOUT_MS],
  maxOutputBytes: [0, MAX_OUTPUT_BYTES],
  cpuSeconds: [1, MAX_CPU_SECONDS],
  maxDescriptors: [MIN_DESCRIPTORS, MAX_DESCRIPTORS],
};
const DIGEST_RE = /^sha256:[0-9a-f]{64}$/;

function makeRoot() {
  const root = mkdtempSync(path.join(os.tmpdir(), 'confined-vfuzz-'));
  chmodSync(root, 0o700);
  return root;
}

/** A fuzz context: the PRNG and small generators over it. */
function generators(random) {
  const int = (n) => Math.floor(random() * n);
  const pick = (list) => list[int(list.length)];
  const chance = (p) => random() < p;
  const word = () => (Math.floor(random() * 2 ** 32) >>> 0).toString(16).padStart(8, '0');
  const hex = () => word() + word() + word() + word() + word() + word() + word() + word();
  const digest = () => `sha256:${hex()}`;
  function segment() {
    for (;;) {
      const n = 1 + int(chance(0.1) ? 20 : 6);
      let s = '';
      for (let i = 0; i < n; i++) s += pick(SEGMENT);
      if (s !== '.' && s !== '..') return s;
    }
  }
  function bytes(max) {
    const b = Buffer.allocUnsafe(int(max + 1));
    for (let i = 0; i < b.length; i += 4) {
      const w = Math.floor(random() * 2 ** 32);
      for (let k = 0; k < 4 && i + k < b.length; k++) b[i + k] = (w >>> (8 * k)) & 0xff;
    }
    return chance(0.5) ? b : new Uint8Array(b);
  }
  /** A valid snapshot: distinct paths (case-insensitively), no file that is also a directory. */
  function files(count, entry) {
    const out = [];
    const taken = new Set();
    const ok = (p) => {
      const lower = p.toLowerCase();
      if (taken.has(lower)) return false;
      for (const t of taken) if (t.startsWith(`${lower}/`) || lower.startsWith(`${t}/`)) return false;
      taken.add(lower);
      return true;
    };
    if (entry !== undefined) {
      ok(entry);
      out.push({ path: entry, content: bytes(64) });
    }
    for (let guard = 0; out.length < count && guard < 50; guard++) {
      const depth = 1 + int(chance(0.2) ? 4 : 2);
      const p = Array.from({ length: depth }, segment).join('/');
      if (ok(p)) out.push({ path: p, content: bytes(64) });
    }
    // Unordered: the digest sorts.
    for (let i = out.length - 1; i > 0; i--) {
      const j = int(i + 1);
      [out[i], out[j]] = [out[j], out[i]];
    }
    return out;
  }
  function arg() {
    const n = int(chance(0.05) ? 300 : 12);
    let s = '';
    for (let i = 0; i < n; i++) {
      s += chance(0.9) ? String.fromCharCode(32 + int(95)) : String.fromCodePoint(0x80 + int(0x2ffff));
    }
    return s;
  }
  function valid() {
    const entry = `${segment()}${pick(EXTENSIONS)}`;
    const programFiles = files(1 + int(4), entry);
    const inputFiles = files(int(4));
    const numbers = {};
    for (const [key, [min, max]] of Object.entries(NUMERIC)) {
      numbers[key] = chance(0.2) ? pick([min, max]) : min + int(Math.min(max - min + 1, 100_000));
    }
    return {
      runtime: digest(),
      profile: digest(),
      program: {
        files: programFiles,
        digest: referenceDigest(programFiles),
        entry,
        args: Array.from({ length: int(5) }, arg),
      },
      input: { files: inputFiles, digest: referenceDigest(inputFiles) },
      ...numbers,
    };
  }
  return { int, pick, chance, digest, segment, bytes, files, arg, valid };
}

// ---- Mutations -----------------------------------------------------------------------------
// Each returns `true` (the request is now invalid), `false` (still valid) or `null` (either).
// They mutate the freshly built request in place; `g` is the generator context, `log` the
// accessor-call log.

/** Fresh junk values each call, so no mutation pollutes a shared object. */
const junk = () => [
  null,
  undefined,
  true,
  false,
  '',
  'x',
  '5',
  Symbol('s'),
  10n,
  [],
  {},
  () => 1,
  new Date(0),
  new Number(5),
  new String('sha256:'),
  Object.create(null),
  new Map(),
  Buffer.from('x'),
  NaN,
  Infinity,
  -Infinity,
];
const BAD_NUMBERS = [NaN, Infinity, -Infinity, 1.5, -1, 2 ** 53, 2 ** 53 + 2, 1e308, -1e308, Number.MIN_VALUE, Number.EPSILON];

/** The containers of a request an object-level mutation can target: [holder, key] pairs. */
function objectSlots(req) {
  const slots = [
    ['request', req],
    ['program', req.program],
    ['input', req.input],
  ];
  for (const part of [req.program, req.input]) {
    const files = part?.files;
    if (Array.isArray(files) && files.length <= 1000) for (const f of files) slots.push(['file', f]);
  }
  return slots.filter(([, o]) => o !== null && typeof o === 'object' && !Array.isArray(o));
}

function parentOf(req, kind) {
  if (kind === 'request') return [null, null];
  if (kind === 'program' || kind === 'input') return [req, kind];
  return [null, null];
}

/** Replaces an object (request, program, input) by f(object) where it is held. */
function replaceObject(req, g, f) {
  const target = g.pick(['program', 'input', 'file']);
  if (target === 'file') {
    const files = g.pick([req.program.files, req.input.files]);
    if (!Array.isArray(files) || files.length === 0) return false;
    const i = g.int(files.length);
    if (files[i] === null || typeof files[i] !== 'object') return false;
    files[i] = f(files[i]);
    return true;
  }
  const [holder, key] = parentOf(req, target);
  if (holder[key] === null || typeof holder[key] !== 'object') return false;
  holder[key] = f(holder[key]);
  return true;
}

function fileLists(req) {
  // Only small lists: a mutation may have left a 2**32-1 long sparse one.
  return [req.program.files, req.input.files].filter((l) => Array.isArray(l) && l.length <= 1000);
}

const KNOWN_KEYS = new Set([
  ...Object.keys(NUMERIC),
  'runtime',
  'profile',
  'program',
  'input',
  'files',
  'digest',
  'entry',
  'args',
  'path',
  'content',
]);

const MUTATIONS = [
  {
    name: 'numeric field: wrong type or out of range',
    apply(req, g) {
      const key = g.pick(Object.keys(NUMERIC));
      const [min, max] = NUMERIC[key];
      const value = g.pick([
        ...junk(),
        ...BAD_NUMBERS,
        min - 1,
        max + 1,
        BigInt(min),
        new Number(min),
        String(min),
        min + 0.5,
      ]);
      // -1 and the small bad numbers may be in range of nothing here; min - 1 never is.
      req[key] = value;
      return true;
    },
  },
  {
    name: 'numeric field: a boundary or negative zero',
    apply(req, g) {
      const key = g.pick(Object.keys(NUMERIC));
      const [min, max] = NUMERIC[key];
      const value = g.pick([min, max, min + 1, max - 1, -0]);
      req[key] = value;
      // Valid values overwrite the field, so they may repair an earlier break ('copy').
      return Object.is(value, -0) && min > 0 ? true : 'copy';
    },
  },
  {
    name: 'digest field: malformed',
    apply(req, g) {
      const where = g.pick(['runtime', 'profile', 'program', 'input']);
      const good = `${'0123456789abcdef'.repeat(4)}`;
      const value = g.pick([
        ...junk(),
        `sha256:${good.toUpperCase()}`,
        `sha256:${good.slice(1)}`,
        `sha256:${good}0`,
        `sha1:${good}`,
        `SHA256:${good}`,
        ` sha256:${good}`,
        `sha256:${good}\n`,
        `sha256:${good.slice(0, 63)}g`,
        `sha256:${good.slice(0, 63)}\u0660`,
        good,
      ]);
      if (where === 'runtime' || where === 'profile') req[where] = value;
      else if (req[where] && typeof req[where] === 'object') req[where].digest = value;
      else return null;
      return true;
    },
  },
  {
    name: 'runtime or profile: another well-formed digest',
    apply(req, g) {
      req[g.pick(['runtime', 'profile'])] = g.digest();
      return 'copy';
    },
  },
  {
    name: 'snapshot digest: mismatch',
    apply(req, g) {
      const part = req[g.pick(['program', 'input'])];
      if (!part || typeof part !== 'object') return null;
      const other = g.digest();
      if (other === part.digest) return null;
      part.digest = other;
      return true;
    },
  },
  {
    name: 'extra key',
    apply(req, g) {
      const [, o] = g.pick(objectSlots(req));
      const key = g.pick(['extra', '__proto__x', 'constructor', 'toString', '0', '', Symbol('k'), Symbol.iterator]);
      Object.defineProperty(o, key, { value: 1, enumerable: g.chance(0.5), configurable: true });
      return true;
    },
  },
  {
    name: 'missing key',
    apply(req, g) {
      const [, o] = g.pick(objectSlots(req));
      // Only the request's own names (every one is required), never an extra key.
      const keys = Reflect.ownKeys(o).filter((k) => KNOWN_KEYS.has(k));
      if (keys.length === 0) return null;
      delete o[g.pick(keys)];
      return true;
    },
  },
  {
    name: 'accessor in place of a data property',
    apply(req, g, log) {
      const [, o] = g.pick(objectSlots(req));
      const keys = Reflect.ownKeys(o);
      if (keys.length === 0) return null;
      const key = g.pick(keys);
      const value = o[key];
      Object.defineProperty(o, key, {
        get() {
          if (log.armed) log.calls++;
          return value;
        },
        enumerable: true,
        configurable: true,
      });
      return true;
    },
  },
  {
    name: 'transparent proxy',
    apply(req, g) {
      if (g.chance(0.3)) {
        const list = g.pick(fileLists(req));
        const holder = list === req.program.files ? req.program : req.input;
        if (!holder || typeof holder !== 'object') return null;
        if (list === undefined) return null;
        holder.files = new Proxy(list, {});
        return false;
      }
      return replaceObject(req, g, (o) => new Proxy(o, {})) ? false : null;
    },
  },
  {
    name: 'proxy with an extra or a hidden key',
    apply(req, g) {
      // A hidden key may be a required one (breaks) or an earlier extra one (repairs): open.
      const extra = g.chance(0.5);
      return replaceObject(req, g, (o) =>
        extra
          ? new Proxy(o, { ownKeys: (t) => [...Reflect.ownKeys(t), 'ghost'] })
          : new Proxy(o, { ownKeys: (t) => Reflect.ownKeys(t).slice(1) }),
      )
        ? extra || 'open'
        : null;
    },
  },
  {
    name: 'proxy whose descriptor changes on every read',
    apply(req, g) {
      // Read once: the first answer is the one validated, so the request may stay valid.
      return replaceObject(req, g, (o) => {
        let reads = 0;
        return new Proxy(o, {
          getOwnPropertyDescriptor(t, k) {
            const d = Reflect.getOwnPropertyDescriptor(t, k);
            if (reads++ > 0 && d) d.value = 'changed';
            return d;
          },
        });
      })
        ? null
        : null;
    },
  },
  {
    name: 'proxy whose trap throws',
    apply(req, g) {
      const trap = g.pick(['ownKeys', 'getOwnPropertyDescriptor', 'getPrototypeOf', 'get', 'has']);
      return replaceObject(req, g, (o) => new Proxy(o, { [trap]: () => { throw new RangeError('trap'); } }))
        ? // `get` and `has` are never used by validation.
          trap === 'get' || trap === 'has'
          ? false
          : 'trap'
        : null;
    },
  },
  {
    name: 'revoked proxy',
    apply(req, g) {
      return replaceObject(req, g, (o) => {
        const { proxy, revoke } = Proxy.revocable(o, {});
        revoke();
        return proxy;
      })
        ? true
        : null;
    },
  },
  {
    name: 'prototype: null (allowed) or foreign',
    apply(req, g) {
      const kind = g.int(4);
      return replaceObject(req, g, (o) => {
        if (kind === 0) return Object.assign(Object.create(null), o);
        if (kind === 1) return Object.assign(Object.create({ inherited: 1 }), o);
        if (kind === 2) return Object.assign(new (class Request {})(), o);
        return Object.assign([], o);
      })
        ? kind !== 0 || 'copy'
        : null;
    },
  },
  {
    name: 'object replaced by junk',
    apply(req, g) {
      const value = g.pick(junk().filter((j) => j === null || typeof j !== 'object' || j instanceof Date || j instanceof Map || Array.isArray(j) || j instanceof Number));
      return replaceObject(req, g, () => value) ? true : null;
    },
  },
  {
    name: 'path: invalid',
    apply(req, g) {
      const list = g.pick(fileLists(req));
      if (list.length === 0 || !list[0] || typeof list[0] !== 'object') return null;
      const file = list[g.int(list.length)];
      if (!file || typeof file !== 'object') return null;
      const s = g.segment();
      file.path = g.pick([
        '',
        '.',
        '..',
        `${s}/..`,
        `./${s}`,
        `/${s}`,
        `${s}/`,
        `${s}//${s}`,
        `${s}\u00e9`,
        `\u{1f600}${s}`,
        `${s}\uff0fx`,
        `${s}\u0000`,
        `${s}\\x`,
        `${s} x`,
        `${s}\ud800`,
        'a'.repeat(257),
        Array.from({ length: 17 }, () => 'a').join('/'),
        ...junk().filter((j) => typeof j !== 'string'),
      ]);
      return true;
    },
  },
  {
    name: 'path: duplicate or clash',
    apply(req, g) {
      const list = g.pick(fileLists(req));
      if (list.length === 0) return null;
      const file = list[g.int(list.length)];
      if (!file || typeof file !== 'object' || typeof file.path !== 'string') return null;
      const shape = g.int(3);
      const p =
        shape === 0
          ? file.path
          : shape === 1
            ? file.path.toUpperCase() === file.path
              ? file.path.toLowerCase()
              : file.path.toUpperCase()
            : `${file.path}/${g.segment()}`;
      if (shape === 1 && p === file.path) return null;
      list.push({ path: p, content: g.bytes(8) });
      return true;
    },
  },
  {
    name: 'content: not a Uint8Array',
    apply(req, g) {
      const list = g.pick(fileLists(req));
      if (list.length === 0) return null;
      const file = list[g.int(list.length)];
      if (!file || typeof file !== 'object') return null;
      file.content = g.pick([
        'text',
        [1, 2, 3],
        new ArrayBuffer(4),
        new DataView(new ArrayBuffer(4)),
        new Uint16Array(2),
        new Int8Array(2),
        new Uint8ClampedArray(2),
        new Float64Array(1),
        ...junk().filter((j) => !(j instanceof Uint8Array)),
      ]);
      return true;
    },
  },
  {
    name: 'content: one byte changed',
    apply(req, g) {
      const list = g.pick(fileLists(req));
      const candidates = list.filter((f) => f && f.content instanceof Uint8Array && f.content.length > 0);
      if (candidates.length === 0) return null;
      const file = g.pick(candidates);
      const copy = Buffer.from(file.content);
      copy[g.int(copy.length)] ^= 1 + g.int(255);
      file.content = copy;
      return true;
    },
  },
  {
    name: 'files: not a plain array',
    apply(req, g) {
      const part = req[g.pick(['program', 'input'])];
      if (!part || typeof part !== 'object' || !Array.isArray(part.files)) return null;
      const list = part.files;
      if (list.length > 1000) return null;
      const shape = g.int(6);
      if (shape === 0) {
        list.extra = 1;
      } else if (shape === 1) {
        list.length += 1; // a hole at the end
      } else if (shape === 2) {
        part.files = Object.assign({}, list);
      } else if (shape === 3) {
        part.files = new (class Files extends Array {})(...list);
      } else if (shape === 4) {
        const huge = [];
        huge.length = 2 ** 32 - 1;
        part.files = huge;
      } else {
        part.files = new Set(list);
      }
      return true;
    },
  },
  {
    name: 'entry: not a program file or wrong extension',
    apply(req, g) {
      const program = req.program;
      if (!program || typeof program !== 'object') return null;
      program.entry = g.pick([
        `${g.segment()}.mjs.missing`,
        `${g.segment()}.json`,
        `${g.segment()}.MJS`,
        `nothere-${g.segment()}.mjs`,
        '',
        '.mjs/..',
        ...junk().filter((j) => typeof j !== 'string'),
      ]);
      return true;
    },
  },
  {
    name: 'args: invalid',
    apply(req, g) {
      const program = req.program;
      if (!program || typeof program !== 'object') return null;
      const shape = g.int(8);
      if (shape === 0) program.args = Array.from({ length: MAX_ARGS + 1 }, () => 'a');
      else if (shape === 1) program.args = ['a', 1];
      else if (shape === 2) program.args = ['a\0b'];
      else if (shape === 3) program.args = ['x'.repeat(MAX_ARG_CHARS + 1)];
      else if (shape === 4) program.args = [, 'a']; // eslint-disable-line no-sparse-arrays
      else if (shape === 5) program.args = 'a b';
      else if (shape === 6) program.args = Object.assign(['a'], { extra: 1 });
      else program.args = [Symbol('a')];
      return true;
    },
  },
  {
    name: 'args: valid edge',
    apply(req, g) {
      const program = req.program;
      if (!program || typeof program !== 'object') return null;
      const shape = g.int(4);
      if (shape === 0) program.args = Array.from({ length: MAX_ARGS }, () => g.arg());
      else if (shape === 1) program.args = ['x'.repeat(MAX_ARG_CHARS)];
      else if (shape === 2) program.args = ['\u{1f600}\ud800', '', ' ', '-e', '--require=/etc/passwd'];
      else program.args = [];
      return 'copy';
    },
  },
  {
    name: 'snapshot: re-digested (a mutated snapshot gets its true digest)',
    apply(req, g) {
      const part = req[g.pick(['program', 'input'])];
      if (!part || typeof part !== 'object' || !Array.isArray(part.files) || part.files.length > 1000) return null;
      try {
        part.digest = referenceDigest(part.files);
      } catch {
        return null;
      }
      // It repairs an earlier digest mismatch or changed byte: like a copy, it opens the outcome.
      return 'copy';
    },
  },
];

/** Mutations whose proxies may answer a second read differently or make the engine throw. */
const STATEFUL = new Set([
  'revoked proxy',
  'proxy whose descriptor changes on every read',
  'proxy with an extra or a hidden key',
]);

const SIGNALS = [
  { make: () => undefined, breaks: false },
  { make: () => new AbortController().signal, breaks: false },
  { make: () => AbortSignal.abort(), breaks: false },
  { make: () => null, breaks: true },
  { make: () => ({ aborted: false }), breaks: true },
  { make: () => new AbortController(), breaks: true },
  { make: () => new EventTarget(), breaks: true },
  { make: () => 'signal', breaks: true },
  { make: () => 0, breaks: true },
  // instanceof AbortSignal without being one (a proxy of a real one, an object inheriting from
  // its prototype): refused by the brand check.
  { make: () => new Proxy(new AbortController().signal, {}), breaks: true },
  { make: () => Object.create(AbortSignal.prototype), breaks: true },
];

/** Deep-frozen check of an accepted request against the caller's values, with node:crypto. */
function checkAccepted(out, snapshotsBefore) {
  const frozen = (o) => {
    assert.ok(Object.isFrozen(o), 'result must be frozen');
    for (const v of Object.values(o)) if (v && typeof v === 'object' && !(v instanceof Uint8Array)) frozen(v);
  };
  frozen(out);
  assert.match(out.runtime, DIGEST_RE);
  assert.match(out.profile, DIGEST_RE);
  for (const [key, [min, max]] of Object.entries(NUMERIC)) {
    const v = out[key];
    assert.ok(Number.isInteger(v) && v >= min && v <= max && !Object.is(v, -0), `${key} ${v}`);
  }
  for (const part of ['program', 'input']) {
    const { files, digest } = out[part];
    assert.equal(referenceDigest(files), digest, `${part} digest recomputed`);
    const before = snapshotsBefore[part];
    assert.equal(files.length, before.length);
    for (let i = 0; i < files.length; i++) {
      assert.equal(files[i].path, before[i].path);
      assert.ok(Buffer.from(files[i].content).equals(before[i].bytes), 'bytes are the caller\'s');
      assert.notEqual(files[i].content.buffer, before[i].buffer, 'bytes are copied');
    }
  }
  assert.ok(out.program.files.some((f) => f.path === out.program.entry));
  assert.ok(EXTENSIONS.some((e) => out.program.entry.endsWith(e)));
  assert.ok(out.program.args.length <= MAX_ARGS);
  for (const a of out.program.args) assert.ok(typeof a === 'string' && !a.includes('\0') && a.length <= MAX_ARG_CHARS);
}

/** What the caller's snapshot holds now, read without going through the validator. */
function snapshotOf(part) {
  try {
    const files = part.files;
    if (!Array.isArray(files) || files.length > 1000) return null;
    return files.map((f) => ({
      path: f.path,
      bytes: Buffer.from(f.content.buffer, f.content.byteOffset, f.content.byteLength),
      buffer: f.content.buffer,
    }));
  } catch {
    return null;
  }
}

test(`validation fuzz: ${ITERATIONS} random and mutated requests (seed ${SEED})`, () => {
  const root = makeRoot();
  try {
    const executor = new ConfinedExecutor({ root });
    const g = generators(prng(SEED));
    const log = { calls: 0, armed: false };
    const counts = { accepted: 0, refused: 0, trap: 0, listed: 0, fake: 0, revoked: 0 };
    const byMutation = new Map(MUTATIONS.map((m) => [m.name, { applied: 0, refused: 0 }]));
    const started = performance.now();
    for (let i = 0; i < ITERATIONS; i++) {
      const where = `seed ${SEED} iteration ${i}`;
      let request;
      let expect = false; // false: valid; true: must be refused; null: either
      const applied = [];
      const effects = [];
      if (g.chance(0.03)) {
        // Not a request at all.
        request = g.pick([...junk(), [g.valid()], new Proxy([], {}), Object.create(g.valid())]);
        expect = true;
      } else {
        request = g.valid();
        const n = g.chance(0.15) ? 0 : 1 + g.int(g.chance(0.2) ? 4 : 2);
        for (let k = 0; k < n; k++) {
          const m = g.pick(MUTATIONS);
          let effect;
          if (process.env.CONFINED_FUZZ_TRACE) process.stderr.write(`  apply ${m.name}\n`);
          try {
            effect = m.apply(request, g, log);
          } catch {
            effect = null; // a mutation that found a shape it cannot handle (a proxy already placed)
          }
          applied.push(m.name);
          effects.push(effect);
          byMutation.get(m.name).applied++;
        }
        // In order: a copy (into a null-prototype object) may launder an earlier lying proxy or
        // accessor, a re-digest repair a mismatch, so after one a breaking mutation only makes the outcome open.
        let state = false;
        for (const e of effects) {
          if (e === true) state = true;
          else if (e === null || e === 'trap') state = state === true ? true : null;
          else if (e === 'copy') state = state === true ? null : state;
          else if (e === 'open') state = null;
        }
        // A throwing trap alone must surface.
        expect = effects.length === 1 && effects[0] === 'trap' ? 'trap' : state;
      }
      const signalKind = g.chance(0.9) ? SIGNALS[g.int(3)] : g.pick(SIGNALS);
      const signal = signalKind.make();
      if (signalKind.breaks === true) expect = true;
      else if (signalKind.breaks === null && expect === false) expect = null;

      if (process.env.CONFINED_FUZZ_TRACE) process.stderr.write(`${i} ${applied}\n`);
      let before = null;
      if (expect === false && request && typeof request === 'object') {
        try {
          before = { program: snapshotOf(request.program), input: snapshotOf(request.input) };
        } catch {
          before = null;
        }
      }

      let out;
      let error;
      log.armed = true;
      try {
        out = validateRunRequest(request, signal);
      } catch (e) {
        error = e;
      }
      log.armed = false;
      assert.equal(log.calls, 0, `${where}: an accessor was called (${applied})`);

      if (error === undefined) {
        assert.notEqual(
          expect,
          true,
          `${where}: accepted after [${applied.join(', ')}] with signal ${signalKind.make}`,
        );
        assert.notEqual(expect, 'trap', `${where}: a throwing trap went unnoticed (${applied})`);
        counts.accepted++;
        if (signalKind.fake) counts.fake++;
        if (before && before.program && before.input) checkAccepted(out, before);
        continue;
      }

      const isTrap = error instanceof RangeError && error.message === 'trap';
      if (isTrap) {
        assert.ok(expect === 'trap' || expect === true || expect === null, `${where}: trap error`);
        counts.trap++;
      } else {
        assert.ok(error instanceof TypeError, `${where}: ${error?.name}: ${error?.message} (${applied})`);
        const prefixed = error.message.startsWith(REQUEST_PREFIX) || error.message === SIGNAL_MESSAGE;
        // A revoked proxy, or a trap answering what the engine forbids, makes the engine throw its
        // own TypeError: the validator rewords it with the prefix (the original as `cause`).
        assert.ok(prefixed, `${where}: message ${error.message}`);
        if (error.cause instanceof TypeError && error.message.endsWith('the value cannot be read')) counts.revoked++;
        assert.notEqual(expect, false, `${where}: refused after only neutral mutations (${applied}): ${error.message}`);
      }
      for (const name of applied) byMutation.get(name).refused++;
      counts.refused++;

      // run() refuses it the same way, synchronously, and touches nothing.
      let runError;
      log.armed = true;
      try {
        executor.run(request, signal);
      } catch (e) {
        runError = e;
      }
      log.armed = false;
      assert.equal(log.calls, 0, `${where}: run() called an accessor`);
      assert.ok(runError !== undefined, `${where}: run() did not throw synchronously`);
      // A stateful proxy may answer run() differently: then only the kind of error is fixed.
      if (applied.some((name) => STATEFUL.has(name))) {
        assert.ok(runError instanceof TypeError || runError.constructor === error.constructor, where);
      } else {
        assert.equal(runError.constructor, error.constructor, where);
        assert.equal(runError.message, error.message, where);
      }
      if (counts.refused % LIST_EVERY === 0) {
        assert.deepEqual(readdirSync(root), [], `${where}: root not empty after a refusal`);
        counts.listed++;
      }
    }
    assert.deepEqual(readdirSync(root), [], 'root not empty at the end');
    const seconds = (performance.now() - started) / 1000;
    console.log(
      `validation fuzz: ${ITERATIONS} requests in ${seconds.toFixed(1)} s: ${counts.accepted} accepted, ` +
        `${counts.refused} refused (${counts.trap} by the caller's throwing trap, ${counts.revoked} by the ` +
        `engine's own TypeError for a revoked or lying proxy, reworded), root listed ` +
        `${counts.listed + 1} times and empty`,
    );
    for (const [name, c] of byMutation) console.log(`  ${String(c.applied).padStart(6)} ${String(c.refused).padStart(6)}  ${name}`);
    // Every mutation was exercised, and both outcomes occurred.
    for (const [name, c] of byMutation) assert.ok(ITERATIONS < 5000 || c.applied > 0, name);
    assert.ok(counts.accepted > 0 && counts.refused > 0);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('validation fuzz: a handful of valid requests really run, and the root is left empty', async (t) => {
  const problem = hostProblem();
  if (problem) {
    t.skip(`this host cannot run the executor: ${problem}`);
    return;
  }
  const root = makeRoot();
  try {
    const executor = new ConfinedExecutor({ root });
    const runtime = describeRuntime().digest;
    const profile = confinedProfile().digest;
    const g = generators(prng(SEED ^ 0xabcdef));
    for (let i = 0; i < 4; i++) {
      const request = g.valid();
      // A program that proves it ran: prints its argument count and the input file count.
      const code = Buffer.from(
        'const fs = require("node:fs"); process.stdout.write(`ran ${process.argv.length - 2} ` + ' +
          'fs.readdirSync(".", { recursive: true }).length)',
      );
      const entry = `main${i}.cjs`;
      const files = [...request.program.files.filter((f) => !f.path.toLowerCase().startsWith('main')), { path: entry, content: code }];
      request.program = { files, digest: referenceDigest(files), entry, args: request.program.args };
      request.runtime = runtime;
      request.profile = profile;
      request.timeoutMs = 60_000;
      request.cpuSeconds = 30;
      request.maxDescriptors = 256;
      request.maxOutputBytes = 1 << 16;
      // Also through the shapes validation accepts: a null prototype and a transparent proxy.
      const shaped = i === 1 ? Object.assign(Object.create(null), request) : i === 2 ? new Proxy(request, {}) : request;
      const result = await executor.run(shaped, i === 3 ? new AbortController().signal : undefined);
      assert.equal(result.status, 'observed', JSON.stringify(result.problems ?? result.message));
      assert.equal(result.process.exit.code, 0, String(result.process.stderr));
      const dirEntries = new Set();
      for (const f of request.input.files) {
        const parts = f.path.split('/');
        for (let k = 1; k <= parts.length; k++) dirEntries.add(parts.slice(0, k).join('/'));
      }
      assert.equal(String(result.process.stdout), `ran ${request.program.args.length} ${dirEntries.size}`);
      assert.equal(result.namespace.state, 'removed');
      assert.deepEqual(readdirSync(root), [], `root not empty after valid run ${i}`);
    }
    // A valid request whose runtime digest is not this host's: not-started, nothing created.
    const other = g.valid();
    const result = await executor.run(other);
    assert.equal(result.status, 'not-started');
    assert.ok(['profile-mismatch', 'runtime-mismatch'].includes(result.reason), result.reason);
    assert.deepEqual(readdirSync(root), []);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
