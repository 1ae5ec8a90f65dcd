// The executor's denials on Linux, proven from the host side. Every denial is paired with a
// negative control: the SAME probe (test/helpers/boundary-probe.mjs) run unconfined, as a plain
// node child of this test (same uid, clean environment), succeeds. A denial whose control does
// not succeed proves nothing and is skipped with the reason.
//
// Most probes run in one confined batch and one control batch (a run costs ~0.3 s); limits,
// descriptors, controller loss, capacity and the broken setups have runs of their own.
// test/helpers/mutate.mjs re-runs this file with one mechanism switched off at a time
// (CONFINED_TEST_MUTATION, read only by test/helpers/boundary-run.js).
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import dgram from 'node:dgram';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { CONFINED_ENVIRONMENT_KEYS } from '../lib/constants.js';
import { helperPath } from '../lib/native.js';
import { ConfinedExecutor } from '../lib/executor.js';
import { confinedProfile, toolPaths } from '../lib/profile.js';
import { buildNative } from './helpers/boundary-native.js';
import {
  INPUT_FILE,
  hostPidsWith,
  isRoot,
  makeOpenDir,
  makeRoot,
  runConfined,
  runControl,
  uniqueMarker,
} from './helpers/boundary-run.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const CONTROLLER = path.join(here, 'helpers', 'boundary-controller.mjs');
const CONTROLLER_TIMEOUT_MS = 60_000;

// ---------------------------------------------------------------------------------------------
// Host fixtures: files, listeners and marked processes the probes aim at.

const host = {
  received: [], // every payload the host's listeners received: { via, text }
  cleanup: [],
};

function listenTcp(address) {
  return new Promise((resolve, reject) => {
    const server = net.createServer((s) => {
      s.on('data', (d) => host.received.push({ via: `tcp ${address}`, text: d.toString() }));
      s.on('error', () => {});
    });
    server.on('error', reject);
    server.listen({ host: address, port: 0 }, () => resolve(server));
  });
}

function listenUnix(p) {
  return new Promise((resolve, reject) => {
    const server = net.createServer((s) => {
      host.received.push({ via: `unix ${JSON.stringify(p)}`, text: 'connected' });
      s.on('data', (d) => host.received.push({ via: `unix ${JSON.stringify(p)}`, text: d.toString() }));
      s.on('error', () => {});
    });
    server.on('error', reject);
    server.listen({ path: p }, () => resolve(server));
  });
}

function bindUdp(onMessage) {
  return new Promise((resolve, reject) => {
    const s = dgram.createSocket('udp4');
    s.on('error', reject);
    s.on('message', (msg, rinfo) => onMessage(s, msg, rinfo));
    s.bind(0, '127.0.0.1', () => resolve(s));
  });
}

/** A minimal DNS answer: the query's id and question, one A record 127.0.0.7. */
function dnsAnswer(query) {
  let end = 12;
  while (end < query.length && query[end] !== 0) end += query[end] + 1;
  const question = query.subarray(12, end + 5);
  const header = Buffer.alloc(12);
  query.copy(header, 0, 0, 2);
  header.writeUInt16BE(0x8180, 2);
  header.writeUInt16BE(1, 4);
  header.writeUInt16BE(1, 6);
  const answer = Buffer.from([0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 127, 0, 0, 7]);
  return Buffer.concat([header, question, answer]);
}

/** A host process whose argv carries `marker`; it logs every signal it receives. */
function startMarkedSleeper(marker) {
  const script =
    "for (const s of ['SIGUSR1','SIGTERM','SIGHUP','SIGINT']) process.on(s, () => process.stdout.write(s + '\\n'));" +
    'setInterval(() => {}, 1000);' +
    "process.stdout.write('ready\\n');";
  const child = spawn(process.execPath, ['-e', script, marker], { stdio: ['ignore', 'pipe', 'ignore'] });
  const log = [];
  child.stdout.on('data', (d) => log.push(...d.toString().split('\n').filter(Boolean)));
  host.cleanup.push(() => child.kill('SIGKILL'));
  return new Promise((resolve) => {
    child.stdout.once('data', () => resolve({ child, log, marker }));
  });
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Polls /proc for processes whose cmdline contains `needle` while `promise` is pending. */
async function watchProcesses(needle, promise) {
  const seen = new Set();
  let done = false;
  const p = promise.finally(() => {
    done = true;
  });
  while (!done) {
    for (const pid of hostPidsWith(needle)) seen.add(pid);
    await new Promise((r) => setTimeout(r, 50));
  }
  return { value: await p, seen: [...seen] };
}

/** Starts a controller process; resolves its JSON lines as they come through `onLine`. */
function startController(job, { stdio, onLine } = {}) {
  const child = spawn(process.execPath, [CONTROLLER, JSON.stringify(job)], {
    stdio: stdio ?? ['ignore', 'pipe', 'pipe'],
  });
  const lines = [];
  let buf = '';
  let err = '';
  child.stdout.on('data', (d) => {
    buf += d;
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = JSON.parse(buf.slice(0, i));
      buf = buf.slice(i + 1);
      lines.push(line);
      onLine?.(line);
    }
  });
  child.stderr?.on('data', (d) => (err += d));
  const timer = setTimeout(() => child.kill('SIGKILL'), CONTROLLER_TIMEOUT_MS);
  const closed = new Promise((resolve) =>
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, lines, stderr: err });
    }),
  );
  return { child, lines, closed };
}

function waitForLine(ctl, event) {
  return new Promise((resolve, reject) => {
    const found = ctl.lines.find((l) => l.event === event);
    if (found) return resolve(found);
    const onData = () => {
      const hit = ctl.lines.find((l) => l.event === event);
      if (hit) {
        ctl.child.stdout.off('data', onData);
        resolve(hit);
      }
    };
    ctl.child.stdout.on('data', onData);
    ctl.closed.then(() => {
      const hit = ctl.lines.find((l) => l.event === event);
      if (hit) resolve(hit);
      else reject(new Error(`controller closed without ${event}: ${JSON.stringify(ctl.lines)}`));
    });
  });
}

const wait = (ms) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------------
// The batch: every probe that needs no run of its own, confined then unconfined.

const BATCH = [
  'write-home',
  'write-tmpdir',
  'write-tmp',
  'write-dev-shm',
  'write-dev',
  'write-cwd',
  'write-input-file',
  'write-root',
  'write-program',
  'write-runtime',
  'read-secret',
  'read-secret-alias',
  'read-other-namespace',
  'read-root',
  'read-canary',
  'read-root-only',
  'read-host-pid1',
  'see-host-marker',
  'read-host-marker-cmdline',
  'signal-host',
  'tcp4',
  'tcp6',
  'udp4',
  'dns',
  'unix-path',
  'unix-abstract',
  'listen-tcp',
  'listen-abstract',
  'spawn',
  'exec',
  'fork',
  'shell',
  'shell-bin-sh',
  'detached',
  'worker',
  'dlopen-addon',
  'dlopen-so',
  'limits',
  'capabilities',
  'open-many',
  'env',
  'write-fd3',
  'reopen-fd3',
  'sleep', // keeps the program alive while the host looks for spawned children
];

const MAX_DESCRIPTORS = 64;
const CPU_SECONDS = 20;

const fx = {}; // fixtures shared by the tests
const batch = {}; // { confined: { result, lines, seen }, control: { lines, seen } }

before(async () => {
  fx.root = makeRoot();
  fx.open = makeOpenDir();
  fx.native = buildNative();
  // A secret outside every snapshot, readable by DAC for anyone (so only the sandbox hides it),
  // and an alias (symlink) to it.
  fx.secretText = `secret-${uniqueMarker('s')}`;
  fx.secret = path.join(fx.open, 'secret.txt');
  fs.writeFileSync(fx.secret, fx.secretText + '\n', { mode: 0o644 });
  fx.secretAlias = path.join(fx.open, 'alias.txt');
  fs.symlinkSync(fx.secret, fx.secretAlias);
  // A root-only file (meaningful when the test is root).
  fx.rootOnly = path.join(fx.open, 'root-only.txt');
  fs.writeFileSync(fx.rootOnly, `root-only-${fx.secretText}\n`, { mode: 0o600 });
  // Another namespace in the same executor root, with a world-readable file.
  fx.otherNamespace = path.join(fx.root, 'slot-9');
  fs.mkdirSync(path.join(fx.otherNamespace, 'input'), { recursive: true, mode: 0o755 });
  fs.chmodSync(fx.otherNamespace, 0o755);
  fx.otherNamespaceFile = path.join(fx.otherNamespace, 'input', 'other.txt');
  fs.writeFileSync(fx.otherNamespaceFile, `other-${fx.secretText}\n`, { mode: 0o644 });

  // Listeners.
  fx.tcp4 = await listenTcp('127.0.0.1');
  fx.tcp6 = await listenTcp('::1').catch(() => null);
  fx.udp = await bindUdp((s, msg) => host.received.push({ via: 'udp', text: msg.toString() }));
  fx.dns = await bindUdp((s, msg, rinfo) => {
    host.received.push({ via: 'dns', text: msg.toString('latin1') });
    s.send(dnsAnswer(msg), rinfo.port, rinfo.address);
  });
  fx.unixPath = path.join(fx.open, 'host.sock');
  fx.unix = await listenUnix(fx.unixPath);
  fs.chmodSync(fx.unixPath, 0o777);
  fx.abstractName = `confined-boundary-${uniqueMarker('abs')}`;
  fx.abstract = await listenUnix(`\0${fx.abstractName}`);

  // Marked host processes: one the confined probe aims at, one for the control.
  fx.sleeperConfined = await startMarkedSleeper(uniqueMarker('host-marker-confined'));
  fx.sleeperControl = await startMarkedSleeper(uniqueMarker('host-marker-control'));

  const baseConfig = (marker, sleeper) => ({
    marker,
    inputFile: INPUT_FILE,
    secret: fx.secret,
    secretAlias: fx.secretAlias,
    rootOnly: fx.rootOnly,
    otherNamespaceFile: fx.otherNamespaceFile,
    root: fx.root,
    hostMarker64: Buffer.from(sleeper.marker).toString('base64'),
    hostPid: sleeper.child.pid,
    tcpPort: fx.tcp4.address().port,
    tcp6Port: fx.tcp6?.address().port ?? 1,
    udpPort: fx.udp.address().port,
    dnsPort: fx.dns.address().port,
    unixPath: fx.unixPath,
    abstractName: fx.abstractName,
    openCap: 200,
    sleepMs: 1500,
  });
  const extraFiles = fx.native.files ?? [];

  fx.confinedMarker = uniqueMarker('confined');
  const confinedRun = runConfined({
    root: fx.root,
    probes: BATCH,
    config: baseConfig(fx.confinedMarker, fx.sleeperConfined),
    extraFiles,
    cpuSeconds: CPU_SECONDS,
    maxDescriptors: MAX_DESCRIPTORS,
  });
  const confined = await watchProcesses(`boundary-child-${fx.confinedMarker}`, confinedRun);
  batch.confined = { ...confined.value, seen: confined.seen };
  await wait(300); // late datagrams
  batch.confinedReceived = host.received.filter((r) => r.text.includes(fx.confinedMarker));
  batch.confinedSignals = [...fx.sleeperConfined.log];

  fx.controlMarker = uniqueMarker('control');
  const controlRun = runControl({
    probes: BATCH,
    config: baseConfig(fx.controlMarker, fx.sleeperControl),
    extraFiles,
  });
  const control = await watchProcesses(`boundary-child-${fx.controlMarker}`, controlRun);
  batch.control = { ...control.value, seen: control.seen };
  host.cleanup.push(() => fs.rmSync(control.value.dir, { recursive: true, force: true }));
  await wait(300);
  batch.controlReceived = host.received.filter((r) => r.text.includes(fx.controlMarker));
  // Files the control wrote outside its own directory.
  for (const dir of ['/tmp', '/dev/shm', '/dev', '/', path.dirname(process.execPath)]) {
    const f = path.join(dir, `boundary-${fx.controlMarker}`);
    host.cleanup.push(() => fs.rmSync(f, { force: true }));
  }
});

after(async () => {
  for (const fn of host.cleanup) {
    try {
      fn();
    } catch {
      // best effort
    }
  }
  for (const s of [fx.tcp4, fx.tcp6, fx.unix, fx.abstract]) s?.close();
  fx.udp?.close();
  fx.dns?.close();
  for (const d of [fx.open, fx.native?.dir]) if (d) fs.rmSync(d, { recursive: true, force: true });
  if (fx.root) fs.rmSync(fx.root, { recursive: true, force: true });
});

function confinedLine(name) {
  const r = batch.confined.result;
  assert.equal(r.status, 'observed', `the batch run was not observed: ${JSON.stringify(r)}`);
  assert.equal(r.process.admission, 'admitted', `the batch was not admitted: ${r.process.stderr}`);
  const line = batch.confined.lines[name];
  assert.ok(line, `no confined output for ${name}: ${r.process.stderr.toString().slice(0, 500)}`);
  return line;
}

function controlLine(t, name) {
  const line = batch.control.lines[name];
  assert.ok(line, `no control output for ${name}: ${batch.control.stderr.slice(0, 500)}`);
  return line;
}

/** The control must succeed; where this uid cannot do it even unconfined, skip with why. */
function controlSucceeds(t, name, { needsRoot = false } = {}) {
  const line = controlLine(t, name);
  if (needsRoot && !isRoot) {
    t.skip(`the control cannot ${name} as uid ${process.getuid()} even unconfined (needs root)`);
    return false;
  }
  assert.equal(line.ok, true, `control ${name} failed: ${JSON.stringify(line)}`);
  return true;
}

function denied(name) {
  const line = confinedLine(name);
  assert.equal(line.ok, false, `confined ${name} succeeded: ${JSON.stringify(line)}`);
  return line;
}

// ---------------------------------------------------------------------------------------------

describe('filesystem writes', () => {
  const hostTargets = {
    'write-tmp': '/tmp',
    'write-dev-shm': '/dev/shm',
    'write-dev': '/dev',
    'write-root': '/',
    'write-runtime': () => path.dirname(process.execPath),
  };
  const needsRoot = new Set(['write-dev', 'write-root', 'write-runtime']);
  for (const name of [
    'write-home',
    'write-tmpdir',
    'write-tmp',
    'write-dev-shm',
    'write-dev',
    'write-cwd',
    'write-input-file',
    'write-root',
    'write-program',
    'write-runtime',
  ]) {
    it(`${name} is denied`, (t) => {
      denied(name);
      // Host side: nothing appeared where the host can look; for targets inside the namespace
      // (home = TMPDIR, input = cwd, program) the namespace verified unchanged (no file added,
      // none grown) before its removal.
      const target = hostTargets[name];
      if (target) {
        const dir = typeof target === 'function' ? target() : target;
        assert.equal(fs.existsSync(path.join(dir, `boundary-${fx.confinedMarker}`)), false);
      } else {
        assert.deepEqual(batch.confined.result.namespace, { state: 'removed', durable: true });
      }
      if (!controlSucceeds(t, name, { needsRoot: needsRoot.has(name) })) return;
      if (target) {
        const dir = typeof target === 'function' ? target() : target;
        assert.equal(fs.existsSync(path.join(dir, `boundary-${fx.controlMarker}`)), true);
      }
    });
  }
});

describe('filesystem reads', () => {
  for (const name of ['read-secret', 'read-secret-alias', 'read-other-namespace']) {
    it(`${name} is denied`, (t) => {
      const line = denied(name);
      assert.ok(!String(line.value ?? '').includes(fx.secretText));
      const c = controlLine(t, name);
      assert.equal(c.ok, true, JSON.stringify(c));
      assert.ok(c.value.includes(fx.secretText), 'the control read the secret');
    });
  }

  it('the executor root shows no other namespace', (t) => {
    // bwrap creates the namespace's own parent directories on its tmpfs root, so the root
    // path may list this run's slot; it must not list what the host has there.
    const line = confinedLine('read-root');
    const listing = line.ok ? line.value : [];
    assert.ok(!listing.includes(path.basename(fx.otherNamespace)), JSON.stringify(line));
    const hostListing = fs.readdirSync(fx.root);
    assert.ok(hostListing.includes(path.basename(fx.otherNamespace)));
    const c = controlLine(t, 'read-root');
    if (c.ok) assert.ok(c.value.includes(path.basename(fx.otherNamespace)), JSON.stringify(c));
    else assert.fail(`control could not list the root: ${JSON.stringify(c)}`);
  });

  it('the canary is unreadable', (t) => {
    denied('read-canary');
    // Control: the canary path exists on the host while a run is in flight (the gate's
    // admission depends on it being unreadable inside, checked by the stage before the exec).
    assert.equal(batch.confined.result.process.admission, 'admitted');
    t.diagnostic("the canary exists only during a run; the stage's gate checks it before admission");
  });

  it('a profile exposing the host filesystem is refused before the program runs', async () => {
    // The canary alone proves nothing for a root caller: it sits in the 0700 executor root
    // (unreadable to the sandbox uid 65534 anyway) under /tmp, which a root launcher covers
    // with its private staging tmpfs. This profile binds the host's / read-only beneath the
    // namespace (and a tmpfs on /tmp so bwrap can create the mount points): the secret is
    // readable if the program runs. The stage's gate must notice the host and refuse.
    const root = makeRoot();
    const marker = uniqueMarker('exposed');
    try {
      const { result, lines } = await runConfined({
        root,
        probes: ['marker', 'read-secret'],
        config: { marker, secret: fx.secret, markerDir: fx.open },
        patch: {
          argv: (argv) => {
            const i = argv.indexOf('--proc');
            const tmp = isRoot ? ['--tmpfs', '/tmp'] : [];
            return [...argv.slice(0, i), '--ro-bind', '/', '/', ...tmp, ...argv.slice(i)];
          },
        },
        cpuSeconds: 5,
      });
      assert.ok(!result.process.stdout.toString().includes(`PROGRAM-RAN-${marker}`), JSON.stringify(lines));
      // Where the package itself lies under /tmp (a CI clone) and the caller is root, the
      // variant's tmpfs on /tmp also hides the stage binary: bwrap cannot exec it, so the
      // program never starts at all (admission absent). Elsewhere the gate refuses.
      const stageUnderTmp = isRoot && helperPath('stage').startsWith('/tmp/');
      assert.equal(result.process.admission, stageUnderTmp ? 'absent' : 'refused', result.process.stderr.toString());
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });

  it('a root-only file is unreadable', (t) => {
    if (!isRoot) return t.skip('the test is not root: there is no root-only file it could read itself');
    const line = denied('read-root-only');
    assert.ok(!String(line.value ?? '').includes(fx.secretText));
    const c = controlLine(t, 'read-root-only');
    assert.equal(c.ok, true, JSON.stringify(c));
  });

  it("host processes' /proc entries are not visible", (t) => {
    const pid1 = confinedLine('read-host-pid1');
    const hostPid1 = fs.readFileSync('/proc/1/cmdline', 'latin1').slice(0, 200);
    if (pid1.ok) assert.notEqual(pid1.value, hostPid1, 'the sandbox reads the host pid 1');
    denied('see-host-marker');
    denied('read-host-marker-cmdline');
    const c = controlLine(t, 'read-host-pid1');
    assert.equal(c.value, hostPid1);
    assert.equal(controlLine(t, 'see-host-marker').ok, true);
    assert.deepEqual(controlLine(t, 'see-host-marker').value, [fx.sleeperControl.child.pid]);
    assert.equal(controlLine(t, 'read-host-marker-cmdline').ok, true);
  });
});

describe('network', () => {
  for (const name of ['tcp4', 'tcp6', 'udp4', 'dns', 'unix-path', 'unix-abstract']) {
    it(`${name} does not reach the host`, (t) => {
      if (name === 'tcp6' && !fx.tcp6) return t.skip('no IPv6 loopback on this host');
      denied(name);
      // Host side: the host's listener for this channel received nothing carrying the run's
      // marker (the DNS query name and every payload carry it).
      const via = {
        tcp4: 'tcp 127.0.0.1',
        tcp6: 'tcp ::1',
        udp4: 'udp',
        dns: 'dns',
        'unix-path': `unix ${JSON.stringify(fx.unixPath)}`,
        'unix-abstract': `unix ${JSON.stringify(`\0${fx.abstractName}`)}`,
      }[name];
      assert.deepEqual(batch.confinedReceived.filter((r) => r.via === via), []);
      assert.equal(controlLine(t, name).ok, true, JSON.stringify(controlLine(t, name)));
      assert.ok(batch.controlReceived.some((r) => r.via === via), JSON.stringify(batch.controlReceived));
    });
  }
  it('unix sockets: the host saw no connection from the confined run', () => {
    const unix = host.received.filter((r) => r.via.startsWith('unix') && r.text === 'connected');
    // Exactly the control's two connections (path and abstract), none from the confined run.
    assert.equal(unix.length, 2, JSON.stringify(host.received));
  });
  for (const name of ['listen-tcp', 'listen-abstract']) {
    it(`${name} is denied`, (t) => {
      denied(name);
      controlSucceeds(t, name);
    });
  }
});

describe('processes', () => {
  for (const name of ['spawn', 'exec', 'fork', 'shell', 'shell-bin-sh', 'detached']) {
    it(`${name} is denied`, (t) => {
      denied(name);
      controlSucceeds(t, name);
    });
  }
  it('no child of the confined program ever appeared on the host', () => {
    assert.deepEqual(batch.confined.seen, []);
    // Control: the host saw the unconfined probe's children (spawn, fork, detached).
    assert.ok(batch.control.seen.length >= 3, JSON.stringify(batch.control.seen));
  });
  it('worker threads still work', (t) => {
    const line = confinedLine('worker');
    assert.deepEqual([line.ok, line.value], [true, 42], JSON.stringify(line));
    assert.equal(controlLine(t, 'worker').value, 42);
  });
  it('a marked host process cannot be signalled or probed, and stays untouched', (t) => {
    denied('signal-host');
    assert.ok(alive(fx.sleeperConfined.child.pid));
    assert.deepEqual(batch.confinedSignals, ['ready']);
    assert.deepEqual(fx.sleeperConfined.log, ['ready']);
    // Control: the unconfined probe reaches its sleeper (the handlers log the signals).
    const c = controlLine(t, 'signal-host');
    assert.deepEqual(c.value, { 0: 'sent', SIGUSR1: 'sent', SIGTERM: 'sent' });
    assert.deepEqual(fx.sleeperControl.log.slice(0, 1), ['ready']);
    assert.ok(fx.sleeperControl.log.includes('SIGUSR1'), JSON.stringify(fx.sleeperControl.log));
  });
});

describe('native code', () => {
  for (const name of ['dlopen-addon', 'dlopen-so']) {
    it(`${name} shipped in the program snapshot does not load`, (t) => {
      if (fx.native.skip) return t.skip(fx.native.skip);
      denied(name);
      const c = controlLine(t, name);
      assert.equal(c.ok, true, JSON.stringify(c));
      if (name === 'dlopen-addon') assert.equal(c.value, 'native-loaded');
    });
  }
});

/** Parses /proc/<pid>/limits into { name: [soft, hard] }. */
function parseLimits(text) {
  const out = {};
  for (const line of text.split('\n').slice(1)) {
    const m = /^(.*?)\s{2,}(\S+)\s+(\S+)/.exec(line);
    if (m) out[m[1].trim()] = [m[2], m[3]];
  }
  return out;
}

describe('limits', () => {
  it('the four limits are in force, soft equal to hard, without any capability', (t) => {
    // What is proven: inside, the kernel's own view (/proc/self/limits) has soft == hard ==
    // the request for CPU time and descriptors and 0 for core and file size, and the process
    // holds no capability at all (CapEff/CapPrm/CapBnd 0). Raising a hard limit needs
    // CAP_SYS_RESOURCE (setrlimit(2)) and node offers no setrlimit call; a native caller cannot
    // be loaded (the native-code tests). The control runs a native raiser unconfined: as root
    // it lowers every hard limit (so the raiser works) and raises it back when it holds
    // CAP_SYS_RESOURCE; without that capability (an unprivileged user, or a root whose
    // bounding set lacks it, as on some VMs) the kernel refuses the raise with EPERM: the same
    // condition the confined process is in, with every capability gone.
    const limits = parseLimits(confinedLine('limits').value);
    const pairs = {
      'Max cpu time': String(CPU_SECONDS),
      'Max open files': String(MAX_DESCRIPTORS),
      'Max core file size': '0',
      'Max file size': '0',
    };
    for (const [name, value] of Object.entries(pairs)) assert.deepEqual(limits[name], [value, value], name);
    const caps = confinedLine('capabilities').value;
    for (const k of ['CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb']) assert.equal(BigInt('0x' + caps[k]), 0n, k);
    // Control of the probe: unconfined, it reads this process's limits.
    const controlLimits = parseLimits(controlLine(t, 'limits').value);
    assert.ok(controlLimits['Max open files'][0] !== String(MAX_DESCRIPTORS) || controlLimits['Max cpu time'][0] === 'unlimited');
    if (fx.native.skip) return t.skip(`raiser control: ${fx.native.skip}`);
    const capEff = BigInt('0x' + /^CapEff:\s*(\S+)/m.exec(fs.readFileSync('/proc/self/status', 'latin1'))[1]);
    const hasSysResource = (capEff & (1n << 24n)) !== 0n; // CAP_SYS_RESOURCE
    const raised = execFileSync(fx.native.raiseLimits).toString();
    for (const name of ['cpu', 'nofile', 'core', 'fsize']) {
      const m = new RegExp(`^${name} lower=(\\d+) raise=(\\d+)$`, 'm').exec(raised);
      assert.ok(m, raised);
      assert.equal(m[1], '0', `${name}: lowering works`);
      assert.equal(m[2], hasSysResource ? '0' : String(os.constants.errno.EPERM), `${name}: ${raised}`);
    }
  });

  it('writing a file fails', (t) => {
    // Two layers: nothing writable is mounted (the write tests), and the file-size limit is 0
    // soft and hard, so even a writable file could not grow (EFBIG; visible when the
    // read-only layer is switched off in test/helpers/mutate.mjs).
    const limits = parseLimits(confinedLine('limits').value);
    assert.deepEqual(limits['Max file size'], ['0', '0']);
    for (const name of ['write-home', 'write-cwd', 'write-input-file', 'write-program']) {
      const line = denied(name);
      assert.ok(['EROFS', 'EFBIG', 'EACCES', 'EPERM'].includes(line.code), JSON.stringify(line));
    }
    // Control: unconfined, the same probes write their files.
    for (const name of ['write-home', 'write-cwd', 'write-input-file', 'write-program']) {
      assert.equal(controlLine(t, name).ok, true);
    }
    assert.equal(fs.readFileSync(path.join(batch.control.dir, 'input', INPUT_FILE), 'utf8'), 'input data\nappended\n');
  });

  it('opening files fails at maxDescriptors', (t) => {
    const line = denied('open-many');
    assert.equal(line.code, 'EMFILE');
    assert.ok(line.value.maxFd < MAX_DESCRIPTORS, JSON.stringify(line));
    const c = controlLine(t, 'open-many');
    assert.equal(c.ok, true, JSON.stringify(c));
    assert.ok(c.value.maxFd >= MAX_DESCRIPTORS);
  });

  it('a CPU spinner is stopped at cpuSeconds', async (t) => {
    const root = makeRoot();
    try {
      const { result } = await runConfined({ root, probes: ['spin'], cpuSeconds: 1, timeoutMs: 60_000 });
      assert.equal(result.status, 'observed');
      assert.equal(result.process.admission, 'admitted');
      assert.equal(result.process.stopped, null, 'stopped by the kernel, not by the host');
      assert.ok(['SIGXCPU', 'SIGKILL'].includes(result.process.exit.signal), JSON.stringify(result.process.exit));
      // The kernel accounts RLIMIT_CPU in ticks: allow slack below the second, none for a
      // spinner that ran on unbounded.
      const cpuMs = result.process.resources.userCpuMs + result.process.resources.systemCpuMs;
      assert.ok(cpuMs >= 500 && cpuMs < 5000, `cpu ${cpuMs} ms`);
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
    // Control: unconfined, the same spinner outlives 1.5 s of CPU time.
    const tick = Number(execFileSync('getconf', ['CLK_TCK']).toString()) || 100;
    let child;
    const ran = runControl({ probes: ['spin'], onSpawn: (c) => (child = c) });
    let cpu = 0;
    while (cpu < 1.5) {
      await wait(100);
      const stat = fs.readFileSync(`/proc/${child.pid}/stat`, 'latin1');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      cpu = (Number(fields[11]) + Number(fields[12])) / tick;
    }
    assert.ok(alive(child.pid));
    child.kill('SIGKILL');
    const r = await ran;
    fs.rmSync(r.dir, { recursive: true, force: true });
    assert.equal(r.signal, 'SIGKILL');
  });
});

describe('descriptors and environment', () => {
  it('the environment is exactly the five names', (t) => {
    assert.deepEqual(confinedLine('env').value, [...CONFINED_ENVIRONMENT_KEYS].sort());
    // Control: unconfined with one more variable, the probe reports it.
    return runControl({
      probes: ['env'],
      env: { ...Object.fromEntries(CONFINED_ENVIRONMENT_KEYS.map((k) => [k, '/'])), EXTRA_FOR_CONTROL: '1' },
    }).then((c) => {
      fs.rmSync(c.dir, { recursive: true, force: true });
      assert.ok(c.lines.env.value.includes('EXTRA_FOR_CONTROL'));
    });
  });

  it('the program cannot write to or reopen the control channel', async (t) => {
    const w = denied('write-fd3');
    // The stage's gate closed fd 3 before the exec; node's start-up may have reused the number
    // (libuv's epoll instance, which refuses writes with EINVAL).
    assert.ok(['EBADF', 'EINVAL'].includes(w.code), JSON.stringify(w));
    // Reopening /proc/self/fd/3 reaches at most whatever node itself opened at 3 later: never
    // a pipe (the control channel was a pipe).
    const r = confinedLine('reopen-fd3');
    if (r.ok) assert.ok(!String(r.value).startsWith('pipe:'), JSON.stringify(r));
    // Host side: the control channel the host parsed holds the admission record once, nothing
    // forged (a forged line would make it malformed).
    assert.equal(batch.confined.result.process.admission, 'admitted');
    assert.equal(batch.confined.result.attributable, true, JSON.stringify(batch.confined.result.problems));
    // Control: unconfined, with a file at fd 3, the same probes write into it and reopen it.
    const channel = path.join(fx.open, 'control-channel');
    const fd = fs.openSync(channel, 'w');
    const c = await runControl({ probes: ['write-fd3', 'reopen-fd3'], stdio: ['ignore', 'pipe', 'pipe', fd] });
    fs.closeSync(fd);
    fs.rmSync(c.dir, { recursive: true, force: true });
    assert.equal(c.lines['write-fd3'].ok, true, JSON.stringify(c.lines));
    assert.equal(c.lines['reopen-fd3'].ok, true, JSON.stringify(c.lines));
    assert.match(fs.readFileSync(channel, 'utf8'), /forged/);
  });

  it('only descriptors 0-3 reach the program, and an inherited descriptor does not leak', async (t) => {
    if (fx.native.skip) return t.skip(`clearing close-on-exec needs a native helper: ${fx.native.skip}`);
    // A controller process starts with a file at fd 3 WITHOUT close-on-exec (child_process
    // dup2s it there), then runs. At the `admitted` event it finds the program (the child of
    // the stage, the child of the bwrap monitor whose pid the `launched` event gives), and once
    // node runs (its probe sets its title) it reads, from the host, /proc/<program>/fd.
    const root = makeRoot();
    const leakFile = path.join(fx.open, 'leak-marker');
    const fd = fs.openSync(leakFile, 'w');
    const leakIno = fs.fstatSync(fd).ino;
    try {
      const ctl = startController(
        {
          root,
          probes: ['fds', 'ready', 'sleep'],
          config: { sleepMs: 2000 },
          controlFds: true,
          inspectRunning: true,
          clearCloexec: fx.native.cloexecAddon,
        },
        { stdio: ['ignore', 'pipe', 'pipe', fd] },
      );
      const { lines, stderr } = await ctl.closed;
      const control = lines.find((l) => l.event === 'control-fds');
      const cleared = lines.find((l) => l.event === 'cloexec-cleared');
      assert.equal(cleared?.fdFlags, 0, 'fd 3 of the controller is not close-on-exec');
      assert.equal((parseInt(cleared.fdinfoFlags, 8) & 0o2000000) === 0, true, cleared.fdinfoFlags);
      const admitted = lines.find((l) => l.event === 'admitted');
      const running = lines.find((l) => l.event === 'running');
      const result = lines.find((l) => l.event === 'result');
      assert.ok(admitted && running && result, stderr);
      assert.equal(result.admission, 'admitted');
      // Control: an ordinary child of the controller inherits the descriptor.
      assert.ok(control.inodes.includes(leakIno), 'the control child inherited the descriptor');
      assert.equal(admitted.program.length, 1, JSON.stringify(admitted));
      assert.ok(running.fds, JSON.stringify(running));
      const fds = running.fds;
      const inodes = Object.values(fds).map((v) => v.ino);
      assert.ok(!inodes.includes(leakIno), JSON.stringify(fds));
      // 0-2 are the launcher pipes: the host holds the other ends of stdout and stderr, and
      // held stdin's until it sent go and closed it (end-of-file). The control channel was
      // closed by the gate before the exec; everything else node created itself: event loop
      // objects (fd 3 among them, typically), and pipes whose both ends sit in the program.
      for (const n of ['0', '1', '2']) {
        assert.match(fds[n].link, /^pipe:/);
        assert.ok(admitted.hostInodes.includes(fds[n].ino), `fd ${n} is a host pipe`);
      }
      assert.ok(running.hostInodes.includes(fds['1'].ino) && running.hostInodes.includes(fds['2'].ino));
      assert.ok(!running.hostInodes.includes(fds['0'].ino), 'the host closed stdin after go');
      for (const [n, v] of Object.entries(fds)) {
        if (Number(n) <= 2) continue;
        if (v.link.startsWith('anon_inode:')) continue;
        if (v.link === '/dev/null') continue; // the sandbox's own, opened by node (OPENSSL_CONF)
        assert.match(v.link, /^pipe:/, `fd ${n}: ${JSON.stringify(v)}`);
        assert.equal(inodes.filter((i) => i === v.ino).length, 2, `fd ${n} is one end of an internal pipe`);
        assert.ok(!running.hostInodes.includes(v.ino), `fd ${n} is not shared with the host`);
      }
      // The environment of the running program, read from the host.
      assert.deepEqual(running.environ.map((e) => e.split('=')[0]).sort(), [...CONFINED_ENVIRONMENT_KEYS].sort());
    } finally {
      fs.closeSync(fd);
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});

describe('controller loss and capacity', () => {
  it('a SIGKILLed controller leaves nothing running, and its namespace counts against maxRetained', async () => {
    const root = makeRoot();
    const marker = uniqueMarker('loss');
    try {
      const ctl = startController({ root, probes: ['sleep'], config: { marker, sleepMs: 60_000 } });
      const launched = await waitForLine(ctl, 'launched');
      await waitForLine(ctl, 'admitted');
      await wait(300);
      // Control of the scan: the sandbox's processes are visible on the host before the kill.
      const before = hostPidsWith(marker);
      assert.ok(before.length >= 2, `stage and program visible: ${before}`);
      assert.ok(alive(launched.pid));
      ctl.child.kill('SIGKILL');
      await ctl.closed;
      let left = hostPidsWith(marker);
      for (let i = 0; i < 100 && (left.length > 0 || alive(launched.pid)); i++) {
        await wait(100);
        left = hostPidsWith(marker);
      }
      assert.deepEqual(left, [], 'no process of the sandbox survives');
      assert.equal(alive(launched.pid), false, 'the bwrap monitor is gone');
      // The namespace stays, and counts.
      assert.ok(fs.existsSync(launched.namespace));
      const ex = new ConfinedExecutor({ root, maxRetained: 1 });
      const { result } = await runConfined({ root, probes: ['env'], executor: ex });
      assert.equal(result.status, 'not-started');
      assert.equal(result.reason, 'retained-limit');
      // Control: with room for one more, the same run is admitted.
      const ok = await runConfined({ root, probes: ['env'], maxRetained: 2 });
      assert.equal(ok.result.status, 'observed');
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });

  it('two controllers in separate processes share one root', async () => {
    const root = makeRoot();
    try {
      // Room for two: both run at once, in distinct namespaces.
      const a = startController({ root, maxRetained: 2, probes: ['sleep'], config: { sleepMs: 1500 } });
      await waitForLine(a, 'admitted');
      const b = startController({ root, maxRetained: 2, probes: ['sleep'], config: { sleepMs: 200 } });
      const [ra, rb] = await Promise.all([a.closed, b.closed]);
      const la = ra.lines.find((l) => l.event === 'launched');
      const lb = rb.lines.find((l) => l.event === 'launched');
      assert.equal(ra.lines.at(-1).status, 'observed', ra.stderr);
      assert.equal(rb.lines.at(-1).status, 'observed', rb.stderr);
      assert.notEqual(la.namespace, lb.namespace);
      // Room for one: while the first runs, the second controller is refused.
      const c = startController({ root, maxRetained: 1, probes: ['sleep'], config: { sleepMs: 1500 } });
      await waitForLine(c, 'admitted');
      const d = startController({ root, maxRetained: 1, probes: ['sleep'], config: { sleepMs: 100 } });
      const [rc, rd] = await Promise.all([c.closed, d.closed]);
      assert.equal(rc.lines.at(-1).status, 'observed', rc.stderr);
      assert.equal(rd.lines.at(-1).status, 'not-started', rd.stderr);
      assert.equal(rd.lines.at(-1).reason, 'retained-limit');
      assert.deepEqual(fs.readdirSync(root), []);
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});

describe('broken setups never run the program', () => {
  // The stage's own argv is the tail of bwrap's: the last occurrence of the stage path (it
  // also appears earlier, as the target of its runtime bind), followed by the CPU limit.
  const stageIndex = (argv) => {
    const i = argv.lastIndexOf(toolPaths().stage);
    assert.ok(i > 0 && argv[i - 1] !== '--ro-bind' && argv[i - 2] !== '--ro-bind', 'the stage command');
    assert.match(argv[i + 1], /^\d+$/, 'the CPU limit follows the stage');
    return i;
  };
  const variants = {
    'a profile syntax error (a bogus bwrap option)': {
      patch: {
        argv: (argv) => {
          const i = argv.indexOf('--hostname') + 2;
          return [...argv.slice(0, i), '--bogus-option-for-test', ...argv.slice(i)];
        },
      },
      why: (r) => {
        assert.equal(r.process.admission, 'absent');
        assert.match(r.process.stderr.toString(), /Unknown option --bogus-option-for-test/);
      },
    },
    // The rw bind of / goes last among bwrap's options, right before the stage: anywhere earlier
    // the executor's own binds and the final --remount-ro / would sit on top of it. As root the
    // launcher's / shows its private staging tmpfs at /tmp, so bwrap cannot even chdir into the
    // namespace; see `why` for the unprivileged case.
    'a permissive variant binding / read-write': {
      patch: {
        argv: (argv) => {
          const i = stageIndex(argv);
          return [...argv.slice(0, i), '--bind', '/', '/', ...argv.slice(i)];
        },
      },
      why: (r) => {
        if (isRoot) {
          assert.equal(r.process.admission, 'absent');
          assert.match(r.process.stderr.toString(), /chdir/);
        } else {
          // Unprivileged, the host's / covers the namespace: the canary is readable and the
          // stage's gate refuses (admission absent if bwrap itself cannot set the view up).
          assert.ok(['absent', 'refused'].includes(r.process.admission), r.process.stderr.toString());
        }
      },
    },
    // The same bind under the namespace's own mounts (before /proc).
    'a permissive variant binding / read-write beneath the namespace': {
      patch: {
        argv: (argv) => {
          const i = argv.indexOf('--proc');
          return [...argv.slice(0, i), '--bind', '/', '/', ...argv.slice(i)];
        },
      },
      why: (r) => assert.ok(['absent', 'refused'].includes(r.process.admission), r.process.stderr.toString()),
    },
    'a missing bwrap': {
      patch: { parts: { tools: { ...toolPaths(), bwrap: '/nonexistent/confined-test/bwrap' } } },
      why: (r) => {
        assert.equal(r.status, 'not-started');
        assert.equal(r.reason, 'setup-failed');
      },
    },
    'a wrong CPU limit': {
      patch: {
        argv: (argv) => {
          const i = stageIndex(argv);
          const out = [...argv];
          out[i + 1] = String(Number(out[i + 1]) + 1);
          return out;
        },
      },
      why: (r) => {
        // The stage measured the wrong limit; the gate admitted, the host never sent go.
        assert.equal(r.process.admission, 'admitted');
        assert.equal(r.process.stopped, 'limits-mismatch');
        assert.ok(r.problems.some((p) => p.startsWith('limits-mismatch')), JSON.stringify(r.problems));
        assert.equal(r.process.limits.cpuSeconds.hard, 6, JSON.stringify(r.process.limits));
      },
    },
  };
  let markerDir;
  let productionDigest;
  before(() => {
    markerDir = makeOpenDir('confined-boundary-marker-');
    fs.chmodSync(markerDir, 0o777);
    productionDigest = confinedProfile().digest;
  });
  after(() => fs.rmSync(markerDir, { recursive: true, force: true }));

  for (const [title, { patch, why }] of Object.entries(variants)) {
    it(title, async () => {
      const root = makeRoot();
      const marker = uniqueMarker('broken');
      try {
        const { result, profileDigest } = await runConfined({
          root,
          probes: ['marker'],
          config: { marker, markerDir },
          patch,
          cpuSeconds: 5,
        });
        assert.notEqual(profileDigest, productionDigest, 'a patched profile has its own digest');
        const stdout = result.process?.stdout?.toString() ?? '';
        assert.ok(!stdout.includes(`PROGRAM-RAN-${marker}`), stdout);
        assert.equal(fs.existsSync(path.join(markerDir, `boundary-${marker}`)), false);
        if (result.status !== 'not-started') {
          assert.equal(result.attributable, false);
          assert.notEqual(result.process.exit?.code, 0);
        }
        why(result);
      } finally {
        fs.rmSync(root, { recursive: true, force: true });
      }
    });
  }

  it('control: unpatched, the program prints its marker; unconfined it also writes the file', async () => {
    const root = makeRoot();
    const marker = uniqueMarker('unbroken');
    try {
      const { result } = await runConfined({ root, probes: ['marker'], config: { marker, markerDir } });
      assert.match(result.process.stdout.toString(), new RegExp(`PROGRAM-RAN-${marker}`));
      const c = await runControl({ probes: ['marker'], config: { marker, markerDir } });
      fs.rmSync(c.dir, { recursive: true, force: true });
      assert.equal(fs.existsSync(path.join(markerDir, `boundary-${marker}`)), true);
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});
