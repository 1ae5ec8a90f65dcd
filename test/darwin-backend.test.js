// The Seatbelt backend for real: sandbox-exec runs of a hello program, a denied write and
// a denied network connect, each judged from the host side and paired with an
// unconfined control that shows the probe works. macOS only: elsewhere every test is
// reported as skipped with the reason.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

const SKIP =
  process.platform !== 'darwin'
    ? `requires macOS with /usr/bin/sandbox-exec (this host is ${process.platform})`
    : !fs.existsSync('/usr/bin/sandbox-exec')
      ? 'requires /usr/bin/sandbox-exec (absent on this Mac)'
      : false;

// Loaded lazily so that this file only needs the addon where it runs.
async function backend() {
  const { native } = await import('../lib/native.js');
  const closure = await import('../lib/darwin/closure.js');
  const profile = await import('../lib/darwin/profile.js');
  const launch = await import('../lib/darwin/launch.js');
  const command = await import('../lib/darwin/command.js');
  return { native, ...closure, ...profile, ...launch, ...command };
}

function collect(child) {
  const out = { stdout: '', stderr: '', control: '' };
  child.stdout.setEncoding('utf8').on('data', (d) => (out.stdout += d));
  child.stderr.setEncoding('utf8').on('data', (d) => (out.stderr += d));
  child.stdio[3]?.setEncoding('utf8').on('data', (d) => (out.control += d));
  return new Promise((resolve) => child.on('close', (code, signal) => resolve({ ...out, code, signal })));
}

/** A private namespace with program/ and input/ holding `files` (name -> text). */
function namespace(t, programFiles, inputFiles = {}) {
  const ns = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'confined-darwin-')));
  t.after(() => fs.rmSync(ns, { recursive: true, force: true }));
  for (const dir of ['program', 'input', 'home']) fs.mkdirSync(path.join(ns, dir), { mode: 0o700 });
  for (const [name, text] of Object.entries(programFiles)) fs.writeFileSync(path.join(ns, 'program', name), text);
  for (const [name, text] of Object.entries(inputFiles)) fs.writeFileSync(path.join(ns, 'input', name), text);
  return ns;
}

async function runConfined(b, ns, entry, args = []) {
  const exec = fs.realpathSync(process.execPath);
  const c = b.resolveClosure({ executable: exec, cpu: b.machoCpu(), host: b.fsHost(), parse: b.native.machoParse });
  assert.equal(c.ok, true, c.reason);
  const p = b.buildSeatbeltProfile(
    b.executorProfileRequest({ closure: c, program: path.join(ns, 'program'), input: path.join(ns, 'input') }),
  );
  assert.equal(p.ok, true, p.reason);
  const home = path.join(ns, 'home');
  const { file, argv } = b.executorLaunchArgv({
    profile: p,
    exec,
    args: [path.join(ns, 'program', entry), ...args],
    env: { LC_ALL: 'C', TZ: 'UTC', HOME: home, TMPDIR: home, OPENSSL_CONF: '/dev/null' },
    cpuSeconds: 10,
    maxDescriptors: 64,
  });
  const child = spawn(file, argv.slice(1), {
    argv0: argv[0],
    cwd: path.join(ns, 'input'),
    env: {},
    stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
  });
  return collect(child);
}

async function runUnconfined(ns, entry, args = []) {
  const child = spawn(process.execPath, [path.join(ns, 'program', entry), ...args], {
    cwd: path.join(ns, 'input'),
    stdio: ['ignore', 'pipe', 'pipe', 'ignore'],
  });
  return collect(child);
}

test('host tools pass the checks on this Mac', { skip: SKIP }, async () => {
  const b = await backend();
  const r = b.checkTools(fs.lstatSync);
  assert.equal(r.ok, true, r.problems.join('; '));
});

test('the closure of this node holds every direct dependency otool -L lists', { skip: SKIP || (!fs.existsSync('/usr/bin/otool') && 'needs /usr/bin/otool') }, async () => {
  const b = await backend();
  const { execFileSync } = await import('node:child_process');
  const exec = fs.realpathSync(process.execPath);
  const c = b.resolveClosure({ executable: exec, cpu: b.machoCpu(), host: b.fsHost(), parse: b.native.machoParse });
  assert.equal(c.ok, true, c.reason);
  const names = execFileSync('/usr/bin/otool', ['-L', exec], { encoding: 'utf8' })
    .split('\n')
    .slice(1)
    .map((l) => l.trim().split(' (')[0])
    .filter(Boolean);
  for (const n of names.filter((x) => x.startsWith('/usr/lib/') || x.startsWith('/System/'))) {
    assert.ok(c.system.includes(n), `${n} is listed as a system library`);
  }
  const nonSystem = names.filter((x) => !x.startsWith('/usr/lib/') && !x.startsWith('/System/') && !x.startsWith('@'));
  for (const n of nonSystem) {
    assert.ok(c.images.some((i) => i.path === fs.realpathSync(n)), `${n} is in the closure`);
  }
});

test('hello runs under sandbox-exec and the launch reports the limits', { skip: SKIP }, async (t) => {
  const b = await backend();
  const ns = namespace(t, { 'main.mjs': "console.log('hello from the sandbox')\n" });
  const r = await runConfined(b, ns, 'main.mjs');
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, 'hello from the sandbox\n');
  assert.match(r.control, /^limit cpu soft 10\nlimit cpu hard 10\nlimit descriptors soft 64\nlimit descriptors hard 64\nlimit core soft 0\nlimit core hard 0\nlimit file soft 0\nlimit file hard 0\n/);
});

const WRITE_PROBE = `
import fs from 'node:fs';
const target = process.argv[2];
try { fs.writeFileSync(target, 'written'); console.log('wrote'); }
catch (e) { console.log('denied ' + e.code); }
`;

test('cannot write into the input, home or /tmp (unconfined control writes)', { skip: SKIP }, async (t) => {
  const b = await backend();
  const ns = namespace(t, { 'write.mjs': WRITE_PROBE });
  const tmpTarget = fs.realpathSync(os.tmpdir());
  for (const target of [
    path.join(ns, 'input', 'out.txt'),
    path.join(ns, 'home', 'out.txt'),
    path.join(tmpTarget, `confined-probe-${process.pid}.txt`),
  ]) {
    const r = await runConfined(b, ns, 'write.mjs', [target]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^denied E(PERM|ACCES)/);
    assert.equal(fs.existsSync(target), false, `${target} was not created (host-side check)`);
  }
  const control = path.join(ns, 'input', 'control.txt');
  const u = await runUnconfined(ns, 'write.mjs', [control]);
  assert.equal(u.stdout, 'wrote\n');
  assert.equal(fs.readFileSync(control, 'utf8'), 'written');
});

const CONNECT_PROBE = `
import net from 'node:net';
const s = net.connect(Number(process.argv[2]), '127.0.0.1');
s.on('connect', () => { console.log('connected'); s.end(); });
s.on('error', (e) => console.log('denied ' + e.code));
`;

test('cannot connect to a listening loopback server (unconfined control connects)', { skip: SKIP }, async (t) => {
  const b = await backend();
  let accepted = 0;
  const server = net.createServer((s) => {
    accepted++;
    s.end();
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => server.close());
  const port = String(server.address().port);
  const ns = namespace(t, { 'connect.mjs': CONNECT_PROBE });
  const r = await runConfined(b, ns, 'connect.mjs', [port]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^denied E/);
  assert.equal(accepted, 0, 'the server saw no connection (host-side check)');
  const u = await runUnconfined(ns, 'connect.mjs', [port]);
  assert.equal(u.stdout, 'connected\n');
  assert.equal(accepted, 1);
});

test('command runner profile: rw mount writable, ro mount inside it not, network off', { skip: SKIP }, async (t) => {
  const b = await backend();
  const work = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'confined-cmd-')));
  t.after(() => fs.rmSync(work, { recursive: true, force: true }));
  fs.mkdirSync(path.join(work, 'vendor'));
  const plan = b.commandSeatbeltProfile({
    mounts: [
      { path: work, mode: 'rw' },
      { path: path.join(work, 'vendor'), mode: 'ro' },
    ],
    network: 'off',
  });
  assert.equal(plan.ok, true, plan.reason);
  const { file, argv } = b.commandLaunchArgv({
    profile: plan.profile,
    command: '/bin/sh',
    args: ['-c', 'echo ok > a.txt; echo no > vendor/b.txt; echo done'],
    env: { PATH: '/usr/bin:/bin' },
  });
  // fd 3 receives the limit stage's report (lib/darwin/launch.js COMMAND_LAUNCH_SCRIPT).
  const r = await collect(spawn(file, argv.slice(1), { argv0: argv[0], cwd: work, env: {}, stdio: ['ignore', 'pipe', 'pipe', 'pipe'] }));
  assert.match(r.control, /^limit cpu soft /);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(fs.readFileSync(path.join(work, 'a.txt'), 'utf8'), 'ok\n');
  assert.equal(fs.existsSync(path.join(work, 'vendor', 'b.txt')), false);
});

// ------------------------------------------------------------------------------------------
// The wired backend (lib/darwin/runtime.js, executor.js, confinement.js), end to end.

async function wired() {
  const runtime = await import('../lib/darwin/runtime.js');
  const executor = await import('../lib/darwin/executor.js');
  const identity = await import('../lib/darwin/profile-identity.js');
  const confinement = await import('../lib/darwin/confinement.js');
  const collect = await import('../lib/collect.js');
  const validate = await import('../lib/validate.js');
  const snapshot = await import('../lib/snapshot.js');
  return { ...runtime, ...executor, ...identity, ...confinement, ...collect, ...validate, ...snapshot };
}

function wiredRequest(w, source, { cpuSeconds = 10, maxDescriptors = 64, timeoutMs = 60_000 } = {}) {
  const files = [{ path: 'main.mjs', content: Buffer.from(source) }];
  return w.validateRunRequest({
    runtime: `sha256:${'a'.repeat(64)}`,
    profile: `sha256:${'b'.repeat(64)}`,
    program: { files, digest: w.snapshotDigest(files), entry: 'main.mjs', args: [] },
    input: { files: [], digest: w.snapshotDigest([]) },
    timeoutMs,
    maxOutputBytes: 1 << 20,
    cpuSeconds,
    maxDescriptors,
  });
}

/** A private slot as lib/namespace.js would lay it out (program, input, home, canary). */
function wiredSlot(t, request) {
  const ns = namespace(t, Object.fromEntries(request.program.files.map((f) => [f.path, f.content])));
  fs.mkdirSync(path.join(ns, 'canary'), { mode: 0o700 });
  fs.writeFileSync(path.join(ns, 'canary', 'canary'), 'confined canary\n');
  return ns;
}

test('describeRuntime on this Mac: node, its closure, the launchers and the OS build (sw_vers)', { skip: SKIP }, async () => {
  const w = await wired();
  const { execFileSync } = await import('node:child_process');
  const id = w.describeRuntimeDarwin();
  assert.equal(id.platform, 'darwin');
  assert.equal(id.node.path, fs.realpathSync(process.execPath));
  const node = id.files.find((f) => f.role === 'node');
  const { createHash } = await import('node:crypto');
  assert.equal(node.sha256, createHash('sha256').update(fs.readFileSync(node.path)).digest('hex'));
  assert.deepEqual(
    id.files.filter((f) => f.role === 'launcher').map((f) => f.path).sort(),
    ['/bin/dash', '/usr/bin/env', '/usr/bin/sandbox-exec'],
  );
  const version = execFileSync('/usr/bin/sw_vers', ['-productVersion'], { encoding: 'utf8' }).trim();
  const build = execFileSync('/usr/bin/sw_vers', ['-buildVersion'], { encoding: 'utf8' }).trim();
  assert.ok(id.os.versionId.startsWith(version), id.os.versionId);
  assert.ok(id.os.versionId.endsWith(`(${build})`), id.os.versionId);
  assert.equal(w.describeRuntimeDarwin().digest, id.digest);
});

test('runDarwin on this Mac: hello admitted through collect(), limits as requested, exit 0', { skip: SKIP }, async (t) => {
  const w = await wired();
  const request = wiredRequest(w, "console.log('hello from the sandbox')\n");
  const slot = wiredSlot(t, request);
  const out = await w.runDarwin({
    request,
    slot,
    runtime: w.describeRuntimeDarwin(),
    profile: w.darwinProfile(),
    verify: () => ({ ok: true }),
  });
  assert.equal(out.started, true, out.message);
  const parsed = w.parseControl(out.facts.control);
  assert.equal(parsed?.admitted, true, `${out.facts.control}\n${out.facts.stderr}`);
  assert.equal(w.limitsMatch(parsed.limits, request), true);
  assert.deepEqual({ ...out.exit }, { code: 0, signal: null });
  assert.equal(out.facts.stdout.toString(), 'hello from the sandbox\n');
});

test('runDarwin on this Mac: an (allow default) profile lets the canary be read, so nothing runs (125)', { skip: SKIP }, async (t) => {
  const w = await wired();
  const request = wiredRequest(w, "console.log('must not run')\n");
  const slot = wiredSlot(t, request);
  const out = await w.runDarwin({
    request,
    slot,
    runtime: w.describeRuntimeDarwin(),
    profile: w.darwinProfile(),
    verify: () => ({ ok: true }),
    patchLaunch: (plan) => {
      const argv = [...plan.argv];
      argv[argv.indexOf('-p') + 1] = '(version 1)\n(allow default)\n';
      return { ...plan, argv };
    },
  });
  assert.deepEqual({ ...out.exit }, { code: 125, signal: null });
  assert.equal(w.parseControl(out.facts.control).admitted, false);
  assert.equal(out.facts.stdout.length, 0);
});

test('runDarwin on this Mac: a runaway is stopped by the timeout with SIGKILL', { skip: SKIP }, async (t) => {
  const w = await wired();
  const request = wiredRequest(w, 'for (;;) {}\n', { timeoutMs: 500, cpuSeconds: 60 });
  const slot = wiredSlot(t, request);
  const out = await w.runDarwin({
    request,
    slot,
    runtime: w.describeRuntimeDarwin(),
    profile: w.darwinProfile(),
    verify: () => ({ ok: true }),
  });
  assert.equal(out.facts.stopped, 'timeout');
  assert.deepEqual({ ...out.exit }, { code: null, signal: 'SIGKILL' });
  assert.equal(out.proc.kill(), false, 'no signal once reaped');
});

test('runCommandDarwin on this Mac: rw mount written, exact exit, stop ends the process group', { skip: SKIP || (process.geteuid() === 0 && 'root callers are refused on macOS') }, async (t) => {
  const w = await wired();
  const work = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'confined-cmd-')));
  t.after(() => fs.rmSync(work, { recursive: true, force: true }));
  const opts = (args, limits = {}) => ({
    command: '/bin/sh',
    args,
    mounts: [{ path: work, mode: 'rw' }],
    cwd: work,
    env: {},
    network: 'off',
    allowlist: null,
    signal: undefined,
    securityEventEmitter: undefined,
    recordAdmission: undefined,
    limits: {
      wallTimeoutMs: null,
      maxStdoutBytes: 1 << 20,
      maxStderrBytes: 1 << 20,
      cpuSeconds: null,
      maxDescriptors: null,
      fileSizeBytes: null,
      maxProcesses: null,
      ...limits,
    },
  });
  const h = await w.runCommandDarwin(opts(['-c', 'echo ok > a.txt; echo "$(ulimit -n) $(ulimit -c)"; exit 7'], { maxDescriptors: 77 }), {});
  let first = '';
  h.stdout.on('data', (b) => (first += b));
  const r = await h.wait();
  assert.equal(r.code, 7, r.stderrTail);
  assert.equal(first, '77 0\n');
  assert.equal(fs.readFileSync(path.join(work, 'a.txt'), 'utf8'), 'ok\n');
  const h2 = await w.runCommandDarwin(opts(['-c', 'sleep 60 & echo $!; wait']), {});
  let text = '';
  h2.stdout.on('data', (b) => (text += b));
  while (!/\d+\n/.test(text)) await new Promise((res) => setTimeout(res, 10));
  const child = Number(text.trim());
  const r2 = await h2.stop();
  assert.equal(r2.signal, 'SIGKILL');
  let gone = false;
  for (let i = 0; i < 500 && !gone; i++) {
    try {
      process.kill(child, 0);
      await new Promise((res) => setTimeout(res, 10));
    } catch {
      gone = true;
    }
  }
  assert.equal(gone, true, 'the background child in the group was killed');
});
