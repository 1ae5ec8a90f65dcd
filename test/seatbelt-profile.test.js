// The Seatbelt profile builder (native/profile_seatbelt.c) for both policies: golden
// texts, the rule that no path is ever in the text, the parameter list, the instantiated
// digest recomputed here from its documented serialisation, and the refusals. Runs on
// every platform (no sandbox-exec needed).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildSeatbeltProfile } from '../lib/darwin/profile.js';
import { commandSeatbeltProfile, commandSeatbeltRequest } from '../lib/darwin/command.js';
import { describeRule, parseSbpl, paramsIn, stringsIn } from './helpers/sbpl.js';

const goldenDir = path.join(path.dirname(fileURLToPath(import.meta.url)), 'helpers', 'golden');

const EXECUTOR = Object.freeze({
  policy: 'executor',
  exec: '/opt/homebrew/Cellar/node/26.8.1/bin/node',
  runtimeFiles: [
    '/opt/homebrew/Cellar/icu4c@77/77.1/lib/libicuuc.77.dylib',
    '/opt/homebrew/Cellar/icu4c@77/77.1/lib/libicudata.77.dylib',
  ],
  program: '/Users/alice/confined-root/slot-0/program',
  input: '/Users/alice/confined-root/slot-0/input',
});
const MOUNTS = Object.freeze([
  { path: '/Users/alice/src', mode: 'ro' },
  { path: '/Users/alice/work', mode: 'rw' },
  { path: '/Users/alice/work/vendor', mode: 'ro' },
]);
const COMMAND_OFF = Object.freeze({ policy: 'command', mounts: MOUNTS, proxyPort: 0 });
const COMMAND_PROXY = Object.freeze({ policy: 'command', mounts: MOUNTS, proxyPort: 43123 });

function build(request) {
  const r = buildSeatbeltProfile(request);
  assert.equal(r.ok, true, r.reason);
  return r;
}

// The serialisation documented at the top of native/profile_seatbelt.c, written again here.
function instantiated(text, params) {
  const u64 = (n) => {
    const b = Buffer.alloc(8);
    b.writeBigUInt64BE(BigInt(n));
    return b;
  };
  const field = (s) => {
    const b = Buffer.from(s, 'utf8');
    return [u64(b.length), b];
  };
  const parts = [
    ...field('confined-seatbelt-instantiated/1'),
    ...field(text),
    u64(params.length),
    ...params.flatMap((p) => [...field(p.name), ...field(p.value)]),
  ];
  return `sha256:${crypto.createHash('sha256').update(Buffer.concat(parts)).digest('hex')}`;
}

function golden(name, text) {
  const file = path.join(goldenDir, name);
  if (process.env.CONFINED_UPDATE_GOLDEN === '1') fs.writeFileSync(file, text);
  assert.equal(text, fs.readFileSync(file, 'utf8'), `${name} differs from the golden text`);
}

for (const [name, request] of [
  ['executor.sb', EXECUTOR],
  ['command-network-off.sb', COMMAND_OFF],
  ['command-proxy.sb', COMMAND_PROXY],
]) {
  test(`golden profile ${name}`, () => {
    golden(name, build(request).text);
  });
}

for (const [label, request] of [
  ['executor', EXECUTOR],
  ['command (network off)', COMMAND_OFF],
  ['command (proxy)', COMMAND_PROXY],
]) {
  test(`${label}: no path is in the text; every path is a parameter, referenced by name`, () => {
    const r = build(request);
    // No '/' anywhere in the text (comments included): no path can be in it.
    assert.equal(r.text.includes('/'), false);
    for (const p of r.params) {
      assert.match(p.name, /^[A-Z][A-Z0-9_]*$/);
      if (p.value.length > 1) assert.equal(r.text.includes(p.value), false, p.value);
    }
    const forms = parseSbpl(r.text);
    for (const s of stringsIn(forms)) assert.equal(s.includes('/'), false, `string literal ${s}`);
    const referenced = new Set(paramsIn(forms));
    const names = r.params.map((p) => p.name);
    assert.equal(new Set(names).size, names.length, 'parameter names are unique');
    assert.deepEqual([...referenced].sort(), [...names].sort(), 'every parameter is used, and only those');
    // Every caller path is a parameter value.
    const callerPaths =
      request.policy === 'executor'
        ? [request.exec, request.program, request.input, ...request.runtimeFiles]
        : request.mounts.map((m) => m.path);
    for (const p of callerPaths) assert.ok(r.params.some((q) => q.value === p), p);
    // The ANCESTOR parameters are exactly the proper ancestors of every other path value.
    const pathValues = r.params.filter((p) => !p.name.startsWith('ANCESTOR_') && p.name !== 'PROXY_PORT');
    const expected = new Set();
    for (const { value } of pathValues) {
      let d = path.posix.dirname(value);
      while (true) {
        expected.add(d);
        if (d === '/') break;
        d = path.posix.dirname(d);
      }
    }
    const ancestors = r.params.filter((p) => p.name.startsWith('ANCESTOR_')).map((p) => p.value);
    assert.deepEqual([...ancestors].sort(), [...expected].sort());
    assert.equal(r.instantiated, instantiated(r.text, r.params));
    assert.ok(Object.isFrozen(r) && Object.isFrozen(r.params));
  });
}

test('executor policy: the rules the spec requires, and nothing broader', () => {
  const r = build(EXECUTOR);
  const rules = parseSbpl(r.text).map(describeRule);
  assert.deepEqual(rules[0], { action: 'version', ops: ['1'], filters: [], params: [] });
  assert.deepEqual(rules[1].action + ' ' + rules[1].ops.join(' '), 'deny default');
  // No rule without a filter grants anything.
  for (const rule of rules) {
    if (rule.action === 'allow') assert.ok(rule.filters.length > 0, `unfiltered allow ${rule.ops}`);
  }
  const allows = rules.filter((x) => x.action === 'allow');
  const allowedOps = new Set(allows.flatMap((x) => x.ops));
  for (const op of allowedOps) {
    assert.ok(
      [
        'file-read*',
        'file-read-metadata',
        'file-map-executable',
        'process-exec',
        'signal',
        'process-info*',
        'sysctl-read',
      ].includes(op),
      `unexpected allowance ${op}`,
    );
  }
  // Executable mapping: runtime files and system libraries only.
  const map = allows.filter((x) => x.ops.includes('file-map-executable')).flatMap((x) => x.params);
  assert.ok(map.includes('EXEC') && map.includes('RUNTIME_0') && map.includes('RUNTIME_1'));
  for (const name of map) assert.match(name, /^(EXEC|RUNTIME_\d+|SYSTEM_[A-Z_]+)$/);
  const mapped = r.params.filter((p) => map.includes(p.name)).map((p) => p.value);
  for (const snap of [EXECUTOR.program, EXECUTOR.input]) {
    for (const m of mapped) {
      assert.ok(!snap.startsWith(`${m}/`) && snap !== m, `${snap} is inside mapped ${m}`);
    }
  }
  // The one exec is node.
  assert.deepEqual(allows.filter((x) => x.ops.includes('process-exec')).flatMap((x) => x.params), ['EXEC']);
  // Process probes: denied, then allowed for this process only; signals to itself only.
  const infoDeny = rules.findIndex((x) => x.action === 'deny' && x.ops.includes('process-info*'));
  const infoAllow = rules.findIndex((x) => x.action === 'allow' && x.ops.includes('process-info*'));
  assert.ok(infoDeny >= 0 && infoAllow > infoDeny);
  assert.deepEqual(rules[infoAllow].filters, [['target', 'self']]);
  assert.deepEqual(rules.find((x) => x.ops.includes('signal')).filters, [['target', 'self']]);
  // Stated last: no write, fork or network.
  assert.deepEqual(
    rules.slice(-3).map((x) => `${x.action} ${x.ops.join(' ')}`),
    ['deny file-write*', 'deny process-fork', 'deny network*'],
  );
  // sysctl reads never include process tables.
  const sysctls = stringsIn(rules.find((x) => x.ops.includes('sysctl-read')).filters);
  for (const s of sysctls) assert.ok(!s.startsWith('kern.proc'), s);
});

test('command policy: mounts in order (a later mount wins), fork and exec, network off or proxy only', () => {
  const off = build(COMMAND_OFF);
  const rules = parseSbpl(off.text).map(describeRule);
  for (const rule of rules) {
    if (rule.action === 'allow' && rule.filters.length === 0) {
      assert.deepEqual(rule.ops, ['process-fork'], 'the only unfiltered allowance is fork');
    }
  }
  const writes = rules.filter((x) => x.ops.includes('file-write*'));
  const byName = Object.fromEntries(off.params.map((p) => [p.name, p.value]));
  assert.deepEqual(
    writes.map((x) => [x.action, byName[x.params[0]]]),
    MOUNTS.map((m) => [m.mode === 'rw' ? 'allow' : 'deny', m.path]),
  );
  const writeData = rules.filter((x) => x.action === 'allow' && x.ops.includes('file-write-data'));
  assert.deepEqual(writeData.flatMap((x) => x.params).map((n) => byName[n]), ['/dev/null']);
  assert.equal(rules.at(-1).action + ' ' + rules.at(-1).ops.join(' '), 'deny network*');
  assert.ok(!rules.some((x) => x.action === 'allow' && x.ops.some((o) => o.startsWith('network'))));

  const proxy = build(COMMAND_PROXY);
  const prules = parseSbpl(proxy.text).map(describeRule);
  const net = prules.filter((x) => x.action === 'allow' && x.ops.some((o) => o.startsWith('network')));
  assert.equal(net.length, 1);
  assert.deepEqual(net[0].ops, ['network-outbound']);
  assert.deepEqual(net[0].params, ['PROXY_PORT']);
  assert.deepEqual(stringsIn(net[0].filters), ['localhost:', 'PROXY_PORT']);
  assert.equal(proxy.params.find((p) => p.name === 'PROXY_PORT').value, '43123');
  // One builder: the policies share their common rules word for word.
  const common = (text) => text.slice(text.indexOf('(deny process-info*)'), text.indexOf('(allow mach-lookup'));
  assert.ok(off.text.includes(common(off.text)) && build(EXECUTOR).text.includes(common(off.text)));
});

test('quoting cannot break out: hostile bytes in values leave the text unchanged', () => {
  // Same shape (same number of paths and of distinct ancestors), different bytes.
  const benign = { ...EXECUTOR, program: '/aa/bb/program', input: '/aa/bb/input', runtimeFiles: ['/cc/dd/lib.dylib'] };
  const hostile = {
    ...EXECUTOR,
    program: '/aa/b"b\\")) (allow default) (allow file-write* (subpath "x")) ;/program',
    input: '/aa/b"b\\")) (allow default) (allow file-write* (subpath "x")) ;/input',
    runtimeFiles: ['/cc/d\nd;(allow network*)/lib\\".dylib'],
  };
  const a = build(benign);
  const b = build(hostile);
  assert.equal(b.text, a.text);
  assert.notEqual(b.instantiated, a.instantiated);
  assert.equal(b.params.find((p) => p.name === 'PROGRAM').value, hostile.program);
  assert.equal(b.instantiated, instantiated(b.text, b.params));
});

test('instantiated changes with any parameter value and with the text', () => {
  const base = build(EXECUTOR);
  const other = build({ ...EXECUTOR, input: '/Users/alice/confined-root/slot-0/inpuT' });
  assert.equal(other.text, base.text);
  assert.notEqual(other.instantiated, base.instantiated);
  // The serialisation is length-prefixed: moving bytes between name and value differs.
  const shifted = instantiated(base.text, [{ name: 'AB', value: 'C' }]);
  assert.notEqual(shifted, instantiated(base.text, [{ name: 'A', value: 'BC' }]));
  const more = build({ ...EXECUTOR, runtimeFiles: [...EXECUTOR.runtimeFiles, '/opt/homebrew/Cellar/icu4c@77/77.1/lib/libicui18n.77.dylib'] });
  assert.notEqual(more.text, base.text);
});

test('no runtime files and no mounts: no empty (unfiltered) rule is written', () => {
  const e = build({ ...EXECUTOR, runtimeFiles: [] });
  assert.ok(!e.params.some((p) => p.name.startsWith('RUNTIME_')));
  const c = build({ policy: 'command', mounts: [] });
  for (const r of [e, c]) {
    for (const rule of parseSbpl(r.text).map(describeRule)) {
      if (rule.action === 'allow' && rule.filters.length === 0) assert.deepEqual(rule.ops, ['process-fork']);
    }
  }
});

test('refusals: paths that are not absolute or not normalised, overlaps, mixed policies', () => {
  const refused = (request, pattern) => {
    const r = buildSeatbeltProfile(request);
    assert.equal(r.ok, false, `expected refusal ${pattern}`);
    assert.equal(r.error, 'EINVAL');
    assert.match(r.reason, pattern);
  };
  refused({ ...EXECUTOR, program: 'relative/program' }, /program directory is not absolute/);
  refused({ ...EXECUTOR, input: '/a/../input' }, /input directory contains a \. or \.\. segment/);
  refused({ ...EXECUTOR, input: '/a/./input' }, /\. or \.\. segment/);
  refused({ ...EXECUTOR, input: '/a//input' }, /contains \/\//);
  refused({ ...EXECUTOR, input: '/a/input/' }, /ends with \//);
  refused({ ...EXECUTOR, exec: '' }, /exec path is not absolute/);
  refused({ ...EXECUTOR, exec: undefined }, /exec path is missing/);
  refused({ ...EXECUTOR, input: `/${'a'.repeat(1100)}` }, /longer than 1024/);
  refused({ ...EXECUTOR, runtimeFiles: ['/Users/alice/confined-root/slot-0/program/lib.dylib'] }, /overlaps runtime file 0/);
  refused({ ...EXECUTOR, program: '/opt/homebrew/Cellar/node/26.8.1' }, /overlaps the exec path/);
  refused({ ...EXECUTOR, input: '/usr/lib/x' }, /overlaps the system path \/usr\/lib/);
  refused({ ...EXECUTOR, input: '/' }, /overlaps/);
  refused({ ...EXECUTOR, program: '/dev/fd' }, /under \/dev/);
  refused({ ...EXECUTOR, mounts: MOUNTS }, /takes no mounts/);
  refused({ ...EXECUTOR, proxyPort: 8080 }, /no network/);
  refused({ ...COMMAND_OFF, exec: '/bin/sh' }, /takes mounts, not runtime/);
  refused({ policy: 'command', mounts: [{ path: 'src', mode: 'ro' }] }, /mount 0 is not absolute/);
  refused(
    { policy: 'command', mounts: Array.from({ length: 65 }, (_, i) => ({ path: `/m${i}`, mode: 'ro' })) },
    /more than 64 mounts/,
  );
  refused({ ...EXECUTOR, runtimeFiles: Array.from({ length: 513 }, (_, i) => `/r/${i}`) }, /more than 512 runtime files/);
  assert.throws(() => buildSeatbeltProfile({ policy: 'other' }), TypeError);
  assert.throws(() => buildSeatbeltProfile({ policy: 'command', proxyPort: 70000 }), TypeError);
  assert.throws(() => buildSeatbeltProfile({ policy: 'command', mounts: [{ path: '/a', mode: 'rx' }] }), TypeError);
  assert.throws(() => buildSeatbeltProfile({ ...EXECUTOR, program: '/a\0b' }), TypeError);
  assert.throws(() => buildSeatbeltProfile(null), TypeError);
});

test('runConfinedCommand option mapping: posture, refusals with the spec codes', () => {
  const ok = commandSeatbeltProfile({ mounts: MOUNTS, network: 'off' });
  assert.equal(ok.ok, true, ok.reason);
  assert.equal(ok.posture.enforced, true);
  assert.equal(ok.posture.backend, 'seatbelt');
  assert.match(ok.posture.reason, /no pid namespace/);
  assert.equal(ok.profile.text, build(COMMAND_OFF).text);
  const withProxy = commandSeatbeltProfile({ mounts: MOUNTS, network: { allowlist: ['registry.example.test:443'] } }, 43123);
  assert.equal(withProxy.ok, true, withProxy.reason);
  assert.equal(withProxy.profile.text, build(COMMAND_PROXY).text);
  assert.match(withProxy.posture.reason, /localhost:43123/);

  const notAbs = commandSeatbeltRequest({ mounts: [{ path: 'src', mode: 'ro' }] });
  assert.deepEqual({ ...notAbs }, { ok: false, code: 'confinement.mount-not-absolute', reason: 'mount path src is not absolute' });
  const noPort = commandSeatbeltRequest({ mounts: [], network: { allowlist: ['a.test:443'] } });
  assert.equal(noPort.code, 'confinement.refused');
  assert.match(noPort.reason, /egress proxy/);
  const badNet = commandSeatbeltRequest({ mounts: [], network: 'loopback' });
  assert.equal(badNet.code, 'confinement.refused');
  const notNormal = commandSeatbeltProfile({ mounts: [{ path: '/a/../b', mode: 'rw' }] });
  assert.equal(notNormal.code, 'confinement.refused');
  assert.match(notNormal.reason, /mount 0 contains a \. or \.\. segment/);
});

test('the reference executor profile is deterministic and covers the system path values', async () => {
  const { referenceExecutorProfile } = await import('../lib/darwin/profile.js');
  const a = referenceExecutorProfile();
  const b = referenceExecutorProfile();
  assert.equal(a.ok, true, a.reason);
  assert.equal(a.instantiated, b.instantiated);
  assert.ok(a.params.some((p) => p.name === 'SYSTEM_USR_LIB' && p.value === '/usr/lib'));
  assert.equal(a.instantiated, instantiated(a.text, a.params));
  // The module index exports everything the integrator wires in.
  const index = await import('../lib/darwin/index.js');
  for (const name of ['resolveClosure', 'fsHost', 'buildSeatbeltProfile', 'referenceExecutorProfile', 'commandSeatbeltProfile', 'checkTools', 'executorLaunchArgv', 'commandLaunchArgv', 'LAUNCH_SCRIPT', 'TOOL_PATHS']) {
    assert.ok(name in index, name);
  }
});

test('random segment bytes never change the text (300 random requests of a fixed shape)', () => {
  let s = 12345;
  const rnd = () => {
    s = (s * 1103515245 + 12345) >>> 0;
    return s >>> 8;
  };
  // A segment: 1-12 random code points from a pool rich in SBPL syntax, never '/' or NUL,
  // never '.' or '..' alone.
  const pool = ['"', '\\', '(', ')', ';', ' ', '\n', '\t', '#', "'", '`', 'a', 'Z', '9', '.', 'é', '€', '😀', '*', '$', '='];
  const segment = () => {
    let out;
    do {
      out = '';
      const n = 1 + (rnd() % 12);
      for (let i = 0; i < n; i++) out += pool[rnd() % pool.length];
    } while (out === '.' || out === '..');
    return out;
  };
  const shape = (seg) => ({
    policy: 'executor',
    exec: `/${seg()}/${seg()}/node`,
    runtimeFiles: [`/${seg()}/${seg()}/lib.dylib`],
    program: `/${seg()}/${seg()}/program`,
    input: `/${seg()}/${seg()}/input`,
  });
  let i = 0;
  const plain = () => `p${i++}`;
  const reference = build(shape(plain)).text;
  for (let k = 0; k < 300; k++) {
    const req = shape(segment);
    const r = buildSeatbeltProfile(req);
    // Distinct top-level directories may collide by chance and share ancestors; only
    // requests of exactly the reference's shape must give exactly its text.
    if (!r.ok) assert.fail(r.reason);
    const tops = new Set([req.exec, req.runtimeFiles[0], req.program, req.input].map((p) => p.split('/')[1]));
    const seconds = new Set([req.exec, req.runtimeFiles[0], req.program, req.input].map((p) => p.split('/').slice(0, 3).join('/')));
    if (tops.size === 4 && seconds.size === 4) assert.equal(r.text, reference);
    assert.equal(r.text.includes('/'), false);
    assert.equal(r.instantiated, instantiated(r.text, r.params));
  }
});
