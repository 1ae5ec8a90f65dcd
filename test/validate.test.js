// Validation of ConfinedExecutor options and run() requests: spec "Run", invariant 1 and
// design.md "API decisions". Expected digests come from the test's own node:crypto reference.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  DEFAULT_RETAINED,
  MAX_ARGS,
  MAX_CPU_SECONDS,
  MAX_DESCRIPTORS,
  MAX_OUTPUT_BYTES,
  MAX_RETAINED,
  MAX_TIMEOUT_MS,
  MIN_DESCRIPTORS,
} from '../lib/constants.js';
import { validateExecutorOptions, validateRunRequest } from '../lib/validate.js';
import { referenceDigest } from './helpers/snapshot-reference.js';

const OPTIONS = 'invalid confined executor options: ';
const REQUEST = 'invalid confined run request: ';
const DIGEST_A = `sha256:${'a'.repeat(64)}`;
const DIGEST_B = `sha256:${'0123456789abcdef'.repeat(4)}`;

function optionsRefused(options, message) {
  assert.throws(
    () => validateExecutorOptions(options),
    (error) => {
      assert.equal(error.name, 'TypeError');
      assert.ok(error.message.startsWith(OPTIONS), error.message);
      if (message !== undefined) assert.match(error.message, message);
      return true;
    },
  );
}

test('options: root and maxRetained, with the default', () => {
  assert.deepEqual(validateExecutorOptions({ root: '/tmp/confined' }), {
    root: '/tmp/confined',
    maxRetained: DEFAULT_RETAINED,
  });
  assert.equal(DEFAULT_RETAINED, 8);
  const all = validateExecutorOptions({ root: '/a/B.c_d@e+f-g', maxRetained: MAX_RETAINED });
  assert.deepEqual(all, { root: '/a/B.c_d@e+f-g', maxRetained: MAX_RETAINED });
  assert.ok(Object.isFrozen(all));
  assert.equal(validateExecutorOptions({ root: '/r', maxRetained: 1 }).maxRetained, 1);
  assert.equal(validateExecutorOptions({ root: '/r', maxRetained: undefined }).maxRetained, 8);
  const bare = Object.assign(Object.create(null), { root: '/r' });
  assert.equal(validateExecutorOptions(bare).root, '/r');
  // The copy is the caller's no more.
  const options = { root: '/r', maxRetained: 2 };
  const copy = validateExecutorOptions(options);
  options.root = '/elsewhere';
  assert.equal(copy.root, '/r');
});

test('options: root must be absolute, normalised, without a trailing / and of the pattern', () => {
  optionsRefused({ root: 'relative' }, /root must be an absolute path/);
  optionsRefused({ root: '' }, /root must be an absolute path/);
  optionsRefused({ root: '/' }, /root must not end with \//);
  optionsRefused({ root: '/a/' }, /root must not end with \//);
  for (const root of ['/a//b', '/a/./b', '/a/../b', '/./a', '/..', '//a', '/a/.']) {
    optionsRefused({ root }, /root must be normalised/);
  }
  for (const root of ['/a b', '/a\nb', '/é', '/a:b', '/a~', '/a\0', '/a\\b', '/a*']) {
    optionsRefused({ root }, /root must be an absolute path of A-Z a-z 0-9 \. _ @ \+ - \//);
  }
  for (const root of [1, null, undefined, new String('/r'), ['/r']]) {
    optionsRefused({ root }, /root must be a string/);
  }
  // Names with dots that are not . or .. segments are normal.
  assert.equal(validateExecutorOptions({ root: '/a/..b/.c/...' }).root, '/a/..b/.c/...');
});

test('options: maxRetained is an integer from 1 to MAX_RETAINED', () => {
  for (const maxRetained of [0, -1, MAX_RETAINED + 1, 1.5, NaN, Infinity, '8', null, 8n, true]) {
    optionsRefused(
      { root: '/r', maxRetained },
      new RegExp(`maxRetained must be an integer from 1 to ${MAX_RETAINED}`),
    );
  }
});

test('options: a plain object of own data properties, no other keys', () => {
  for (const options of [undefined, null, '/r', [], new Map(), Object.create({ root: '/r' })]) {
    optionsRefused(options, /options must be a plain object/);
  }
  class Options {
    constructor() {
      this.root = '/r';
    }
  }
  optionsRefused(new Options(), /options must be a plain object/);
  optionsRefused({}, /^invalid confined executor options: root is missing$/);
  optionsRefused({ root: '/r', extra: 1 }, /options has an unexpected key "extra"/);
  optionsRefused({ root: '/r', [Symbol('x')]: 1 }, /options has an unexpected key Symbol\(x\)/);
  optionsRefused(
    Object.defineProperty({}, 'root', { get: () => '/r', enumerable: true }),
    /^invalid confined executor options: root is an accessor property$/,
  );
  optionsRefused(
    Object.defineProperty({ root: '/r' }, 'maxRetained', { get: () => 2, enumerable: true }),
    /maxRetained is an accessor property/,
  );
  // Own data properties count even when not enumerable.
  const hidden = Object.defineProperty({}, 'root', { value: '/r', enumerable: false });
  assert.equal(validateExecutorOptions(hidden).root, '/r');
});

// ---- run requests ----

const bytes = (...values) => new Uint8Array(values);

/** A valid request built from fresh objects, with overrides merged in at each level (the
 * digests computed by the reference implementation unless given). */
function request({ program = {}, input = {}, ...top } = {}) {
  const programFiles = program.files ?? [
    { path: 'main.mjs', content: Buffer.from('console.log(1)\n') },
    { path: 'lib/util.js', content: bytes(1, 2, 3) },
  ];
  const inputFiles = input.files ?? [{ path: 'data/in.txt', content: Buffer.from('input') }];
  return {
    runtime: DIGEST_A,
    profile: DIGEST_B,
    program: {
      files: programFiles,
      digest: 'digest' in program ? undefined : referenceDigest(programFiles),
      entry: 'main.mjs',
      args: ['--flag', 'value'],
      ...program,
    },
    input: {
      files: inputFiles,
      digest: 'digest' in input ? undefined : referenceDigest(inputFiles),
      ...input,
    },
    timeoutMs: 5000,
    maxOutputBytes: 1 << 20,
    cpuSeconds: 10,
    maxDescriptors: 64,
    ...top,
  };
}

function requestRefused(req, message, signal) {
  assert.throws(
    () => validateRunRequest(req, signal),
    (error) => {
      assert.equal(error.name, 'TypeError');
      assert.ok(error.message.startsWith(REQUEST), error.message);
      if (typeof message === 'string') assert.equal(error.message, REQUEST + message);
      else if (message !== undefined) assert.match(error.message, message);
      return true;
    },
  );
}

/** Whether every object reachable from value (except byte arrays) is frozen. */
function deeplyFrozen(value) {
  if (value === null || typeof value !== 'object' || ArrayBuffer.isView(value)) return true;
  return Object.isFrozen(value) && Reflect.ownKeys(value).every((k) => deeplyFrozen(value[k]));
}

test('a valid request comes back normalised, deeply frozen and detached from the caller', () => {
  const req = request();
  const v = validateRunRequest(req);
  assert.ok(deeplyFrozen(v));
  assert.deepEqual(Object.keys(v), [
    'runtime',
    'profile',
    'program',
    'input',
    'timeoutMs',
    'maxOutputBytes',
    'cpuSeconds',
    'maxDescriptors',
  ]);
  assert.equal(v.runtime, DIGEST_A);
  assert.equal(v.profile, DIGEST_B);
  assert.deepEqual(Object.keys(v.program), ['files', 'digest', 'entry', 'args']);
  assert.deepEqual(Object.keys(v.input), ['files', 'digest']);
  assert.equal(v.program.digest, req.program.digest);
  assert.equal(v.input.digest, req.input.digest);
  assert.equal(v.program.entry, 'main.mjs');
  assert.deepEqual(v.program.args, ['--flag', 'value']);
  assert.notEqual(v.program.args, req.program.args);
  assert.deepEqual(
    [v.timeoutMs, v.maxOutputBytes, v.cpuSeconds, v.maxDescriptors],
    [5000, 1 << 20, 10, 64],
  );
  assert.deepEqual(
    v.program.files.map((f) => f.path),
    ['main.mjs', 'lib/util.js'],
  );
  // Contents are copies: mutating the caller's buffers and arrays afterwards changes nothing.
  const before = v.program.files.map((f) => Buffer.from(f.content).toString('hex'));
  for (const f of req.program.files) f.content.fill(0x41);
  req.program.files.push({ path: 'late.js', content: bytes() });
  req.program.args.push('late');
  req.input.files[0].content.fill(0);
  assert.deepEqual(
    v.program.files.map((f) => Buffer.from(f.content).toString('hex')),
    before,
  );
  assert.equal(v.program.files.length, 2);
  assert.deepEqual(v.program.args, ['--flag', 'value']);
  assert.equal(Buffer.from(v.input.files[0].content).toString(), 'input');
  assert.equal(referenceDigest(v.program.files), v.program.digest);
  assert.equal(referenceDigest(v.input.files), v.input.digest);
  for (const f of [...v.program.files, ...v.input.files]) {
    assert.ok(
      !req.program.files.concat(req.input.files).some((g) => g.content.buffer === f.content.buffer),
    );
  }
});

test('empty input and no args are valid', () => {
  const v = validateRunRequest(request({ program: { args: [] }, input: { files: [] } }));
  assert.deepEqual(v.program.args, []);
  assert.deepEqual(v.input.files, []);
  assert.equal(v.input.digest, referenceDigest([]));
});

test('runtime, profile and the snapshot digests must be digest strings', () => {
  const bad = [
    'sha256:' + 'A'.repeat(64),
    'sha256:' + 'a'.repeat(63),
    'sha256:' + 'a'.repeat(65),
    'sha512:' + 'a'.repeat(64),
    'a'.repeat(64),
    'sha256:' + 'g'.repeat(64),
    ` ${DIGEST_A}`,
    `${DIGEST_A}\n`,
    1,
    null,
    undefined,
  ];
  for (const digest of bad) {
    const msg = (name) => `${name} must be a digest string (sha256: and 64 lowercase hex digits)`;
    requestRefused(request({ runtime: digest }), msg('runtime'));
    requestRefused(request({ profile: digest }), msg('profile'));
    requestRefused(request({ program: { digest } }), msg('program.digest'));
    requestRefused(request({ input: { digest } }), msg('input.digest'));
  }
});

test('a digest that does not match its files is a TypeError', () => {
  const other = referenceDigest([{ path: 'other', content: bytes() }]);
  const req = request({ program: { digest: other } });
  requestRefused(
    req,
    `program.digest does not match program.files (they hash to ${referenceDigest(req.program.files)})`,
  );
  const req2 = request({ input: { digest: other } });
  requestRefused(
    req2,
    `input.digest does not match input.files (they hash to ${referenceDigest(req2.input.files)})`,
  );
  // Swapping the two snapshots' digests is a mismatch too.
  const req3 = request();
  [req3.program.digest, req3.input.digest] = [req3.input.digest, req3.program.digest];
  requestRefused(req3, /^invalid confined run request: program\.digest does not match/);
});

test('the snapshots follow the snapshot rules, under their own names', () => {
  const dup = [
    { path: 'main.mjs', content: bytes() },
    { path: 'MAIN.mjs', content: bytes() },
  ];
  requestRefused(
    request({ program: { files: dup, digest: DIGEST_A } }),
    'program.files[1] "MAIN.mjs": path duplicates files[0] "main.mjs" (paths compare case-insensitively)',
  );
  requestRefused(
    request({ input: { files: [{ path: '../x', content: bytes() }], digest: DIGEST_A } }),
    'input.files[0] "../x": path has a "." or ".." segment',
  );
  requestRefused(
    request({ input: { files: [{ path: 'x', content: [1] }], digest: DIGEST_A } }),
    'input.files[0] "x": content is not a Uint8Array',
  );
  requestRefused(
    request({ input: { files: 'x', digest: DIGEST_A } }),
    'input.files must be a plain array',
  );
});

test('entry names a program file ending .mjs .cjs .js .mts .cts or .ts', () => {
  for (const ext of ['.mjs', '.cjs', '.js', '.mts', '.cts', '.ts']) {
    const files = [{ path: `dir/main${ext}`, content: bytes() }];
    const v = validateRunRequest(
      request({ program: { files, digest: referenceDigest(files), entry: `dir/main${ext}` } }),
    );
    assert.equal(v.program.entry, `dir/main${ext}`);
  }
  for (const entry of ['main.json', 'main', 'main.jsx', 'main.MJS', 'main.mjs.map', 'main.node']) {
    const files = [{ path: entry, content: bytes() }];
    requestRefused(
      request({ program: { files, digest: referenceDigest(files), entry } }),
      'program.entry must end with .mjs, .cjs, .js, .mts, .cts, .ts',
    );
  }
  requestRefused(
    request({ program: { entry: 'other.mjs' } }),
    'program.entry "other.mjs" is not a program file',
  );
  requestRefused(
    request({ program: { entry: 'MAIN.mjs' } }),
    'program.entry "MAIN.mjs" is not a program file',
  );
  requestRefused(
    request({ program: { entry: './main.mjs' } }),
    'program.entry "./main.mjs" is not a program file',
  );
  // An input file is not a program file.
  requestRefused(
    request({
      program: { entry: 'data/x.js' },
      input: { files: [{ path: 'data/x.js', content: bytes() }] },
    }),
    'program.entry "data/x.js" is not a program file',
  );
  for (const entry of [1, null, undefined, ['main.mjs']]) {
    requestRefused(request({ program: { entry } }), 'program.entry must be a string');
  }
});

test(`args: at most ${MAX_ARGS} strings without NUL, each at most 4096 characters`, () => {
  const many = Array.from({ length: MAX_ARGS }, (_, i) => `a${i}`);
  assert.equal(
    validateRunRequest(request({ program: { args: many } })).program.args.length,
    MAX_ARGS,
  );
  requestRefused(
    request({ program: { args: [...many, 'x'] } }),
    `program.args has more than ${MAX_ARGS} entries`,
  );
  assert.equal(
    validateRunRequest(request({ program: { args: ['x'.repeat(4096), ''] } })).program.args[0]
      .length,
    4096,
  );
  requestRefused(
    request({ program: { args: ['x'.repeat(4097)] } }),
    'program.args[0] is longer than 4096 characters',
  );
  requestRefused(
    request({ program: { args: ['ok', 'a\0b'] } }),
    'program.args[1] must not contain NUL',
  );
  for (const arg of [1, null, undefined, new String('s'), Symbol('s')]) {
    requestRefused(request({ program: { args: [arg] } }), 'program.args[0] must be a string');
  }
  for (const args of ['a', undefined, null, { 0: 'a', length: 1 }, new Set(['a'])]) {
    requestRefused(request({ program: { args } }), 'program.args must be a plain array');
  }
  // eslint-disable-next-line no-sparse-arrays
  requestRefused(request({ program: { args: ['a', , 'b'] } }), 'program.args[1] is a hole');
  requestRefused(
    request({ program: { args: Object.assign(['a'], { x: 1 }) } }),
    'program.args has an unexpected key "x"',
  );
  const getter = Object.defineProperty(['a'], 0, { get: () => 'a', enumerable: true });
  requestRefused(request({ program: { args: getter } }), 'program.args[0] is an accessor property');
});

test('bounds are integers within the limits of lib/constants.js', () => {
  const bounds = {
    timeoutMs: [1, MAX_TIMEOUT_MS],
    maxOutputBytes: [0, MAX_OUTPUT_BYTES],
    cpuSeconds: [1, MAX_CPU_SECONDS],
    maxDescriptors: [MIN_DESCRIPTORS, MAX_DESCRIPTORS],
  };
  for (const [name, [min, max]] of Object.entries(bounds)) {
    assert.equal(validateRunRequest(request({ [name]: min }))[name], min);
    assert.equal(validateRunRequest(request({ [name]: max }))[name], max);
    for (const value of [
      min - 1,
      max + 1,
      min + 0.5,
      NaN,
      Infinity,
      -Infinity,
      `${min}`,
      null,
      undefined,
      BigInt(min),
      true,
    ]) {
      requestRefused(
        request({ [name]: value }),
        `${name} must be an integer from ${min} to ${max}`,
      );
    }
  }
  assert.ok(Object.is(validateRunRequest(request({ maxOutputBytes: -0 })).maxOutputBytes, 0));
});

test('the exact key sets: missing and extra keys are refused at every level', () => {
  const req = request();
  for (const key of Object.keys(req)) {
    const r = request();
    delete r[key];
    requestRefused(r, `${key} is missing`);
  }
  for (const key of ['files', 'digest', 'entry', 'args']) {
    const r = request();
    delete r.program[key];
    requestRefused(r, `program.${key} is missing`);
  }
  for (const key of ['files', 'digest']) {
    const r = request();
    delete r.input[key];
    requestRefused(r, `input.${key} is missing`);
  }
  requestRefused(request({ env: {} }), 'request has an unexpected key "env"');
  requestRefused(request({ program: { cwd: '/' } }), 'program has an unexpected key "cwd"');
  requestRefused(request({ input: { writable: true } }), 'input has an unexpected key "writable"');
  requestRefused(request({ [Symbol.for('s')]: 1 }), 'request has an unexpected key Symbol(s)');
  const extraFileKey = [{ path: 'main.mjs', content: bytes(), mode: 0o755 }];
  requestRefused(
    request({ program: { files: extraFileKey } }),
    'program.files[0] has an unexpected key "mode"',
  );
  requestRefused(
    request({ input: { files: Object.assign([], { extra: 1 }) } }),
    'input.files has an unexpected key "extra"',
  );
});

test('only plain objects and arrays: no prototypes, classes, accessors', () => {
  for (const r of [undefined, null, 'request', [], new Map()])
    requestRefused(r, 'request must be a plain object');
  requestRefused(Object.setPrototypeOf(request(), { extra: 1 }), 'request must be a plain object');
  const inherited = Object.create(request());
  requestRefused(inherited, 'request must be a plain object');
  const set = (key, value) => Object.assign(request(), { [key]: value });
  requestRefused(set('program', []), 'program must be a plain object');
  requestRefused(set('program', 'main.mjs'), 'program must be a plain object');
  requestRefused(set('input', null), 'input must be a plain object');
  requestRefused(
    set('input', Object.create({ files: [], digest: DIGEST_A })),
    'input must be a plain object',
  );
  const bare = Object.assign(Object.create(null), request());
  assert.equal(validateRunRequest(bare).runtime, DIGEST_A);

  const accessor = (object, key) => {
    const value = object[key];
    Object.defineProperty(object, key, { get: () => value, enumerable: true, configurable: true });
    return object;
  };
  for (const key of Object.keys(request())) {
    requestRefused(accessor(request(), key), `${key} is an accessor property`);
  }
  for (const key of ['files', 'digest', 'entry', 'args']) {
    const r = request();
    accessor(r.program, key);
    requestRefused(r, `program.${key} is an accessor property`);
  }
  for (const key of ['files', 'digest']) {
    const r = request();
    accessor(r.input, key);
    requestRefused(r, `input.${key} is an accessor property`);
  }
  for (const key of ['path', 'content']) {
    const r = request();
    accessor(r.program.files[1], key);
    requestRefused(r, `program.files[1].${key} is an accessor property`);
  }
  const r = request();
  accessor(r.input.files, 0);
  requestRefused(r, 'input.files[0] is an accessor property');
});

test('each field is read exactly once, through one descriptor read, even from Proxies', () => {
  const reads = new Map();
  let gets = 0;
  const counted = (target, name) =>
    new Proxy(target, {
      get(t, key, receiver) {
        gets++;
        return Reflect.get(t, key, receiver);
      },
      getOwnPropertyDescriptor(t, key) {
        const field = `${name}.${String(key)}`;
        reads.set(field, (reads.get(field) ?? 0) + 1);
        return Reflect.getOwnPropertyDescriptor(t, key);
      },
    });
  const plain = request();
  const wrap = (files, name) =>
    counted(
      files.map((f, i) => counted({ ...f }, `${name}[${i}]`)),
      name,
    );
  const req = counted(
    {
      ...plain,
      program: counted(
        {
          ...plain.program,
          files: wrap(plain.program.files, 'program.files'),
          args: counted([...plain.program.args], 'args'),
        },
        'program',
      ),
      input: counted({ ...plain.input, files: wrap(plain.input.files, 'input.files') }, 'input'),
    },
    'request',
  );
  const v = validateRunRequest(req);
  assert.equal(v.program.digest, plain.program.digest);
  assert.equal(gets, 0, 'no get: values come from the descriptors');
  const expected = [
    ...Object.keys(plain).map((k) => `request.${k}`),
    ...['files', 'digest', 'entry', 'args'].map((k) => `program.${k}`),
    ...['files', 'digest'].map((k) => `input.${k}`),
    'args.length',
    'args.0',
    'args.1',
    'program.files.length',
    'program.files.0',
    'program.files.1',
    'input.files.length',
    'input.files.0',
    ...['program.files[0]', 'program.files[1]', 'input.files[0]'].flatMap((f) => [
      `${f}.path`,
      `${f}.content`,
    ]),
  ];
  assert.deepEqual([...reads.keys()].sort(), expected.sort());
  for (const [field, count] of reads) assert.equal(count, 1, `${field} read ${count} times`);
});

test('a Proxy that answers differently on each read cannot smuggle a second value', () => {
  // Each descriptor read answers with a new entry; validation reads once, so what it checked
  // is what it returns.
  let n = 0;
  const base = request();
  const req = new Proxy(base, {
    getOwnPropertyDescriptor(t, key) {
      const d = Reflect.getOwnPropertyDescriptor(t, key);
      if (key === 'timeoutMs') d.value = ++n === 1 ? 1000 : 999_999_999_999;
      return d;
    },
  });
  assert.equal(validateRunRequest(req).timeoutMs, 1000);
  assert.equal(n, 1);
});

test('signal: undefined or an AbortSignal, else the exact TypeError', () => {
  const req = request();
  assert.ok(validateRunRequest(req, undefined));
  assert.ok(validateRunRequest(req, new AbortController().signal));
  assert.ok(
    validateRunRequest(req, AbortSignal.abort()),
    'an aborted signal is valid (run decides)',
  );
  for (const signal of [
    null,
    false,
    0,
    '',
    {},
    { aborted: false, addEventListener() {} },
    new EventTarget(),
    new AbortController(),
    // Only instanceof AbortSignal: an heir of its prototype fails the brand check, and a Proxy
    // (even of a real signal) would run caller code during the run.
    Object.create(AbortSignal.prototype),
    new Proxy(new AbortController().signal, {}),
  ]) {
    assert.throws(() => validateRunRequest(req, signal), {
      name: 'TypeError',
      message: 'signal must be an AbortSignal',
    });
  }
  // The request is checked first: an invalid request with an invalid signal reports the request.
  requestRefused(
    request({ timeoutMs: 0 }),
    'timeoutMs must be an integer from 1 to 86400000',
    null,
  );
});

test('a throwing or revoked Proxy anywhere is an invalid request, not a stray error', () => {
  const boom = new Error('trap');
  const throwing = (target, trap) =>
    new Proxy(target, {
      [trap]() {
        throw boom;
      },
    });
  const revoked = (target) => {
    const { proxy, revoke } = Proxy.revocable(target, {});
    revoke();
    return proxy;
  };
  const cases = [
    [(r) => throwing(r, 'ownKeys'), 'request cannot be read'],
    [(r) => throwing(r, 'getPrototypeOf'), 'request cannot be read'],
    [(r) => throwing(r, 'getOwnPropertyDescriptor'), 'runtime cannot be read'],
    [(r) => revoked(r), 'request cannot be read'],
    [(r) => ({ ...r, program: revoked(r.program) }), 'program cannot be read'],
    [
      (r) => ({ ...r, input: { ...r.input, files: throwing(r.input.files, 'ownKeys') } }),
      'input.files cannot be read',
    ],
    [
      (r) => ({ ...r, input: { ...r.input, files: [revoked(r.input.files[0])] } }),
      'input.files[0] cannot be read',
    ],
    [
      (r) => ({
        ...r,
        program: { ...r.program, args: throwing(r.program.args, 'getOwnPropertyDescriptor') },
      }),
      'program.args.length cannot be read',
    ],
  ];
  for (const [make, message] of cases) {
    assert.throws(
      () => validateRunRequest(make(request())),
      (error) => {
        assert.equal(error.name, 'TypeError');
        assert.equal(error.message, REQUEST + message);
        assert.ok(error.cause === boom || error.cause instanceof TypeError);
        return true;
      },
    );
  }
  assert.throws(() => validateExecutorOptions(revoked({ root: '/r' })), {
    name: 'TypeError',
    message: `${OPTIONS}options cannot be read`,
  });
  assert.throws(() => validateRunRequest(request(), revoked(new AbortController().signal)), {
    name: 'TypeError',
    message: 'signal must be an AbortSignal',
  });
});
