// The macOS launch pieces that need no macOS: the host-tool checks (with a stand-in lstat,
// and with the real one where the answer is known), the launch argv, and the dash launch
// script itself, run for real with dash where this host has it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { parseLimitReport } from '../lib/collect.js';
import {
  COMMAND_LAUNCH_SCRIPT,
  LAUNCH_SCRIPT,
  TOOL_PATHS,
  checkTools,
  commandLaunchArgv,
  executorLaunchArgv,
} from '../lib/darwin/launch.js';

function fakeLstat(table) {
  return (p) => {
    const e = table[p];
    if (!e) {
      const err = new Error(`ENOENT: ${p}`);
      err.code = 'ENOENT';
      throw err;
    }
    return {
      uid: e.uid ?? 0,
      mode: e.mode,
      isFile: () => e.type === 'file',
      isDirectory: () => e.type === 'dir',
      isSymbolicLink: () => e.type === 'link',
    };
  };
}

const GOOD = Object.freeze({
  '/': { type: 'dir', mode: 0o40755 },
  '/bin': { type: 'dir', mode: 0o40755 },
  '/usr': { type: 'dir', mode: 0o40755 },
  '/usr/bin': { type: 'dir', mode: 0o40755 },
  '/bin/dash': { type: 'file', mode: 0o100755 },
  '/usr/bin/env': { type: 'file', mode: 0o100755 },
  '/usr/bin/sandbox-exec': { type: 'file', mode: 0o100755 },
});

test('tool checks: a macOS-like tree passes', () => {
  const r = checkTools(fakeLstat(GOOD));
  assert.deepEqual({ ...r, problems: [...r.problems] }, { ok: true, problems: [] });
  assert.deepEqual(Object.values(TOOL_PATHS).sort(), ['/bin/dash', '/usr/bin/env', '/usr/bin/sandbox-exec']);
});

test('tool checks: each defect of a tool or a directory above it is named', () => {
  const cases = [
    ['/usr/bin/sandbox-exec', undefined, /\/usr\/bin\/sandbox-exec: ENOENT/],
    ['/bin/dash', { type: 'link', mode: 0o120777 }, /\/bin\/dash is a symbolic link/],
    ['/usr/bin/env', { type: 'file', mode: 0o100755, uid: 501 }, /\/usr\/bin\/env is owned by uid 501, not root/],
    ['/usr/bin/env', { type: 'file', mode: 0o100775 }, /group- or other-writable \(mode 775\)/],
    ['/bin/dash', { type: 'file', mode: 0o100757 }, /group- or other-writable \(mode 757\)/],
    ['/bin/dash', { type: 'dir', mode: 0o40755 }, /\/bin\/dash is not a regular file/],
    ['/usr/bin', { type: 'dir', mode: 0o40777 }, /\/usr\/bin is group- or other-writable/],
    ['/usr', { type: 'dir', mode: 0o40755, uid: 501 }, /\/usr is owned by uid 501/],
    ['/bin', { type: 'link', mode: 0o120755 }, /\/bin is a symbolic link/],
    ['/', { type: 'file', mode: 0o100755 }, /\/ is not a directory/],
  ];
  for (const [p, entry, pattern] of cases) {
    const table = { ...GOOD };
    if (entry === undefined) delete table[p];
    else table[p] = entry;
    const r = checkTools(fakeLstat(table));
    assert.equal(r.ok, false, p);
    assert.ok(r.problems.some((x) => pattern.test(x)), `${pattern} in ${r.problems}`);
  }
  assert.equal(checkTools(fakeLstat(GOOD), ['usr/bin/env']).ok, false);
});

test('tool checks with the real lstat agree with what stat reports on this host', () => {
  const st = fs.lstatSync('/usr/bin/env');
  const dirsOk = ['/', '/usr', '/usr/bin'].every((d) => {
    const s = fs.lstatSync(d);
    return s.isDirectory() && s.uid === 0 && (s.mode & 0o022) === 0;
  });
  const expected = dirsOk && st.isFile() && st.uid === 0 && (st.mode & 0o022) === 0;
  assert.equal(checkTools(fs.lstatSync, ['/usr/bin/env']).ok, expected);
  const binIsLink = fs.lstatSync('/bin').isSymbolicLink();
  if (binIsLink) assert.equal(checkTools(fs.lstatSync, ['/bin/dash']).ok, false);
});

const PROFILE = Object.freeze({
  text: '(version 1)\n(deny default)\n',
  params: [
    { name: 'EXEC', value: '/opt/node/bin/node' },
    { name: 'PROGRAM', value: '/x/"odd" = value' },
  ],
});
const ENV = Object.freeze({ LC_ALL: 'C', TZ: 'UTC', HOME: '/ns/home', TMPDIR: '/ns/home', OPENSSL_CONF: '/dev/null' });

test('executor launch argv: dash script, env -i with exactly the environment, sandbox-exec, node', () => {
  const { file, argv } = executorLaunchArgv({
    profile: PROFILE,
    exec: '/opt/node/bin/node',
    args: ['--import', 'data:text/javascript,', '/ns/program/main.mjs'],
    env: ENV,
    cpuSeconds: 5,
    maxDescriptors: 64,
  });
  assert.equal(file, '/bin/dash');
  assert.deepEqual(argv, [
    '/bin/dash',
    '-c',
    LAUNCH_SCRIPT,
    'confined-launch',
    '5',
    '64',
    '/usr/bin/env',
    '-i',
    'LC_ALL=C',
    'TZ=UTC',
    'HOME=/ns/home',
    'TMPDIR=/ns/home',
    'OPENSSL_CONF=/dev/null',
    '/usr/bin/sandbox-exec',
    '-p',
    PROFILE.text,
    '-D',
    'EXEC=/opt/node/bin/node',
    '-D',
    'PROGRAM=/x/"odd" = value',
    '/opt/node/bin/node',
    '--import',
    'data:text/javascript,',
    '/ns/program/main.mjs',
  ]);
  assert.ok(Object.isFrozen(argv));
  // The script is constant: the limits are arguments, never part of its text.
  assert.ok(!LAUNCH_SCRIPT.includes('64') && !LAUNCH_SCRIPT.includes('/ns'));
});

test('launch argv refuses what argv cannot carry or the spec does not allow', () => {
  const base = { profile: PROFILE, exec: '/opt/node/bin/node', args: [], env: ENV, cpuSeconds: 1, maxDescriptors: 32 };
  assert.throws(() => executorLaunchArgv({ ...base, cpuSeconds: 0 }), TypeError);
  assert.throws(() => executorLaunchArgv({ ...base, maxDescriptors: 1.5 }), TypeError);
  assert.throws(() => executorLaunchArgv({ ...base, exec: 'node' }), TypeError);
  assert.throws(() => executorLaunchArgv({ ...base, env: { 'A=B': 'x' } }), TypeError);
  assert.throws(() => executorLaunchArgv({ ...base, env: { A: 'x\0y' } }), TypeError);
  assert.throws(() => executorLaunchArgv({ ...base, args: ['a\0b'] }), TypeError);
  assert.throws(() => executorLaunchArgv({ ...base, profile: { text: 'x', params: [{ name: 'a-b', value: '/' }] } }), TypeError);
  assert.throws(() => executorLaunchArgv({ ...base, profile: { text: 'x', params: [{ name: 'A', value: '/\0' }] } }), TypeError);
});

test('command launch argv: the dash limit stage, env -i with the command environment, then sandbox-exec', () => {
  const { file, argv } = commandLaunchArgv({
    profile: PROFILE,
    command: '/bin/sh',
    args: ['-c', 'make test'],
    env: { PATH: '/usr/bin:/bin', CI: '1' },
    limits: { cpuSeconds: 5, maxDescriptors: null, fileBlocks: 8 },
  });
  assert.equal(file, '/bin/dash');
  assert.deepEqual(argv.slice(0, 12), [
    '/bin/dash',
    '-c',
    COMMAND_LAUNCH_SCRIPT,
    'confined-command',
    '5',
    '-',
    '8',
    '/usr/bin/env',
    '-i',
    'PATH=/usr/bin:/bin',
    'CI=1',
    '/usr/bin/sandbox-exec',
  ]);
  assert.deepEqual(argv.slice(-3), ['/bin/sh', '-c', 'make test']);
  assert.deepEqual(commandLaunchArgv({ profile: PROFILE, command: '/bin/sh', args: [], env: {} }).argv.slice(4, 7), ['-', '-', '-']);
  for (const bad of [{ cpuSeconds: 0 }, { maxDescriptors: 1.5 }, { fileBlocks: '8' }]) {
    assert.throws(() => commandLaunchArgv({ profile: PROFILE, command: '/bin/sh', args: [], env: {}, limits: bad }), TypeError);
  }
  assert.ok(!COMMAND_LAUNCH_SCRIPT.includes('/bin/sh'));
});

const dash = fs.existsSync('/bin/dash') ? '/bin/dash' : null;
const dashSkip = dash ? false : 'needs /bin/dash on this host to run the launch script';

function runScript(cpu, fds, tail, { fd3 = 'pipe' } = {}) {
  return spawnSync(dash, ['-c', LAUNCH_SCRIPT, 'confined-launch', cpu, fds, ...tail], {
    stdio: ['ignore', 'pipe', 'pipe', fd3],
    env: {},
    encoding: 'utf8',
  });
}

test('the launch script sets the limits, reports eight lines on fd 3, then executes', { skip: dashSkip }, () => {
  const r = runScript('7', '100', [
    '/bin/sh',
    '-c',
    'echo "$(ulimit -S -t) $(ulimit -H -t) $(ulimit -S -n) $(ulimit -H -n) $(ulimit -S -c) $(ulimit -H -c) $(ulimit -S -f) $(ulimit -H -f)"',
  ]);
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(r.output[3].split('\n').filter(Boolean), [
    'limit cpu soft 7',
    'limit cpu hard 7',
    'limit descriptors soft 100',
    'limit descriptors hard 100',
    'limit core soft 0',
    'limit core hard 0',
    'limit file soft 0',
    'limit file hard 0',
  ]);
  // Measured in the executed process, not taken from the report.
  assert.equal(r.stdout.trim(), '7 7 100 100 0 0 0 0');
});

test('the launch script exits 125 and executes nothing on a bad limit or a closed fd 3', { skip: dashSkip }, () => {
  const marker = ['/bin/sh', '-c', 'echo executed'];
  for (const [cpu, fds] of [
    ['abc', '100'],
    ['5', '-1'],
    ['5', '99999999999'],
  ]) {
    const r = runScript(cpu, fds, marker);
    assert.equal(r.status, 125, `${cpu} ${fds}: ${r.stderr}`);
    assert.equal(r.stdout, '');
  }
  const closed = runScript('5', '100', marker, { fd3: 'ignore' });
  assert.equal(closed.status, 125, closed.stderr);
  assert.equal(closed.stdout, '');
});

function runCommandScript(limits, tail, { fd3 = 'pipe' } = {}) {
  return spawnSync(dash, ['-c', COMMAND_LAUNCH_SCRIPT, 'confined-command', ...limits, ...tail], {
    stdio: ['ignore', 'pipe', 'pipe', fd3],
    env: {},
    encoding: 'utf8',
  });
}

test('the command stage sets the given limits, leaves the others, core 0, reports and closes fd 3', { skip: dashSkip }, () => {
  const inherited = spawnSync(dash, ['-c', 'ulimit -S -n; ulimit -H -n'], { encoding: 'utf8', env: {} }).stdout.split('\n');
  const r = runCommandScript(['6', '-', '40'], [
    '/bin/sh',
    '-c',
    'echo "$(ulimit -S -t) $(ulimit -H -t) $(ulimit -S -n) $(ulimit -H -n) $(ulimit -S -c) $(ulimit -H -c) $(ulimit -S -f) $(ulimit -H -f)"; (echo x >&3) 2>/dev/null && echo open || echo closed',
  ]);
  assert.equal(r.status, 0, r.stderr);
  const measured = parseLimitReport(r.output[3]);
  assert.notEqual(measured, null, r.output[3]);
  const n = (v) => (v === 'unlimited' ? v : Number(v));
  assert.deepEqual(measured, {
    cpuSeconds: { soft: 6, hard: 6 },
    descriptors: { soft: n(inherited[0]), hard: n(inherited[1]) },
    coreBlocks: { soft: 0, hard: 0 },
    fileBlocks: { soft: 40, hard: 40 },
  });
  assert.equal(r.stdout, `6 6 ${inherited[0]} ${inherited[1]} 0 0 40 40\nclosed\n`);
});

test('the command stage exits 125 and executes nothing on a bad limit or a closed fd 3', { skip: dashSkip }, () => {
  const marker = ['/bin/sh', '-c', 'echo executed'];
  for (const limits of [['abc', '-', '-'], ['-', '-1', '-'], ['-', '-', 'x']]) {
    const r = runCommandScript(limits, marker);
    assert.equal(r.status, 125, `${limits}: ${r.stderr}`);
    assert.equal(r.stdout, '');
  }
  const closed = runCommandScript(['-', '-', '-'], marker, { fd3: 'ignore' });
  assert.equal(closed.status, 125, closed.stderr);
  assert.equal(closed.stdout, '');
});
