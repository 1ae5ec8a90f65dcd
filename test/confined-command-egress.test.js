// Egress allowlist end to end (issue 6): a server the test runs on the host's loopback, a client
// (curl, bash) inside the sandbox, the forwarder bridge and the host proxy between them. Also the
// proxy alone (lib/egress-proxy.js) for every normalisation case, and what is left afterwards.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { runConfinedCommand } from '../lib/confinement.js';
import { startEgressProxy } from '../lib/egress-proxy.js';
import { helperPath } from '../lib/native.js';
import { confinementPosture } from '../lib/posture.js';

const linux = process.platform === 'linux';
const posture = linux ? await confinementPosture() : null;
const skip = !linux ? 'Linux backend only' : posture.enforced ? false : `confinement is not available: ${posture.reason}`;
const curl = existsSync('/usr/bin/curl') ? '/usr/bin/curl' : null;

const base = mkdtempSync(path.join(os.tmpdir(), 'confined-egress-'));
chmodSync(base, 0o755);
after(() => rmSync(base, { recursive: true, force: true }));

const server = http.createServer((req, res) => {
  hits.push(req.url);
  res.end(`hello ${req.url}\n`);
});
const hits = [];
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const port = server.address().port;
after(() => server.close());

function proxyDirs() {
  return readdirSync(os.tmpdir()).filter((d) => d.startsWith('confined-proxy-'));
}

function hostProcessesRunning(exe) {
  const found = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(entry)) continue;
    try {
      const argv0 = readFileSync(`/proc/${entry}/cmdline`, 'latin1').split('\0')[0];
      if (argv0 === exe) found.push(Number(entry));
    } catch {
      // gone
    }
  }
  return found;
}

async function run(options) {
  const h = await runConfinedCommand({ cwd: base, mounts: [{ path: base, mode: 'ro' }], ...options });
  let stdout = '';
  h.stdout.on('data', (c) => (stdout += c));
  const result = await h.wait();
  await new Promise((r) => (h.stdout.readableEnded ? r() : h.stdout.once('end', r)));
  return { result, stdout };
}

test('an entry naming 127.0.0.1:<port> is fetched end to end; localhost, other ports, hosts and raw connects are denied', { skip: skip || (!curl && 'curl is not installed') }, async () => {
  const denials = [];
  const violations = [];
  const emitted = [];
  const emitter = new EventEmitter();
  emitter.on('sandbox:violation', (e) => emitted.push(e));
  const dirsBefore = proxyDirs();
  hits.length = 0;
  const script = [
    `${curl} -sS -p http://127.0.0.1:${port}/allowed; echo "rc=$?"`,
    `${curl} -sS -p http://localhost:${port}/vetted; echo "rc=$?"`,
    `${curl} -sS -p http://127.0.0.1:${port + 1 === 65536 ? 1 : port + 1}/port; echo "rc=$?"`,
    // An unlisted host through CONNECT, by hand.
    `exec 3<>/dev/tcp/127.0.0.1/3128; printf 'CONNECT other.example.test:80 HTTP/1.1\\r\\n\\r\\n' >&3; head -n 1 <&3; exec 3<&-`,
    // A raw connect that bypasses the proxy: the sandbox's own loopback has no such listener.
    `if exec 4<>/dev/tcp/127.0.0.1/${port}; then echo RAW-CONNECTED; else echo raw-refused; fi`,
  ].join('; ');
  const { result, stdout } = await run({
    command: '/bin/bash',
    args: ['-c', script],
    network: { allowlist: [`127.0.0.1:${port}`, `localhost:${port}`], onDenied: (d) => denials.push(d), violations: (v) => violations.push(v) },
    securityEventEmitter: emitter,
    limits: { wallTimeoutMs: 60_000 },
  });
  assert.equal(result.code, 0, result.stderrTail);
  const lines = stdout.split('\n');
  assert.equal(lines[0], 'hello /allowed');
  assert.equal(lines[1], 'rc=0');
  assert.ok(!stdout.includes('hello /vetted') && !stdout.includes('hello /port'));
  assert.ok(stdout.includes('HTTP/1.1 403 Forbidden'));
  assert.ok(stdout.includes('raw-refused') && !stdout.includes('RAW-CONNECTED'));
  assert.deepEqual(hits, ['/allowed'], 'only the allowed request reached the server');
  assert.deepEqual(
    denials.map((d) => [d.host, d.port, d.reason]),
    [
      ['localhost', port, 'address-refused'],
      ['127.0.0.1', port + 1 === 65536 ? 1 : port + 1, 'not-allowlisted'],
      ['other.example.test', 80, 'not-allowlisted'],
    ],
  );
  assert.deepEqual(
    violations.map((v) => [v.type, v.kind, v.host, v.port, v.reason, v.command]),
    denials.map((d) => ['sandbox:violation', 'network', d.host, d.port, d.reason, '/bin/bash']),
  );
  assert.deepEqual(emitted, violations);
  // Nothing is left: the proxy's directory and socket, the forwarder.
  assert.deepEqual(proxyDirs(), dirsBefore);
  assert.deepEqual(hostProcessesRunning(helperPath('forwarder')), []);
});

test('the forwarder passes the exact exit status through', { skip }, async () => {
  const code = await run({ command: '/bin/sh', args: ['-c', 'exit 42'], network: { allowlist: ['example.test:443'] } });
  assert.equal(code.result.code, 42);
  const sig = await run({ command: '/bin/sh', args: ['-c', 'kill -TERM $$'], network: { allowlist: ['example.test:443'] } });
  assert.equal(sig.result.signal, 'SIGTERM');
  assert.equal(sig.result.code, null);
});

test('stop() ends the command, the forwarder and the proxy', { skip }, async () => {
  const dirsBefore = proxyDirs();
  const marker = `1000.${Math.floor(Math.random() * 1e9)}`;
  const h = await runConfinedCommand({
    command: '/bin/sh',
    args: ['-c', `sleep ${marker}`],
    cwd: base,
    mounts: [{ path: base, mode: 'ro' }],
    network: { allowlist: ['example.test:443'] },
  });
  for (let i = 0; i < 400 && hostProcessesRunning(helperPath('forwarder')).length === 0; i++) await sleep(25);
  assert.ok(hostProcessesRunning(helperPath('forwarder')).length > 0, 'the forwarder ran');
  assert.ok(proxyDirs().length > dirsBefore.length, 'the proxy ran');
  const r = await h.stop();
  assert.equal(r.aborted, true);
  assert.deepEqual(proxyDirs(), dirsBefore);
  for (let i = 0; i < 200 && hostProcessesRunning(helperPath('forwarder')).length; i++) await sleep(25);
  assert.deepEqual(hostProcessesRunning(helperPath('forwarder')), []);
});

/** Sends a raw request head to the proxy's socket; resolves to the first response line. */
function ask(socketPath, head) {
  return new Promise((resolve, reject) => {
    const c = net.connect(socketPath);
    let buf = '';
    c.on('error', reject);
    c.on('data', (d) => {
      buf += d.toString('latin1');
      const i = buf.indexOf('\r\n');
      if (i >= 0) {
        c.destroy();
        resolve(buf.slice(0, i));
      }
    });
    c.on('end', () => resolve(buf));
    c.write(head);
  });
}

test('the proxy normalises every target before matching', { skip: !linux && 'Linux only' }, async (t) => {
  const denials = [];
  const proxy = await startEgressProxy({
    allowlist: [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`],
    command: 'test',
    onDenied: (d) => denials.push(d),
  });
  t.after(() => proxy.close());
  const ok = 'HTTP/1.1 200 Connection Established';
  const forbidden = 'HTTP/1.1 403 Forbidden';
  const cases = [
    // inet_aton shorthands of the literal entry: allowed, dialled as the literal.
    [`127.1:${port}`, ok],
    [`0x7f.0.0.1:${port}`, ok],
    [`2130706433:${port}`, ok],
    [`0177.0.0.1:${port}`, ok],
    // Case and trailing dot: the listed name, then refused by vetting (it resolves to loopback).
    [`LOCALHOST.:${port}`, forbidden, ['localhost', port, 'address-refused']],
    [`LocalHost:${port}`, forbidden, ['localhost', port, 'address-refused']],
    // NUL, CR/LF, zone ids, bad ports, unbracketed IPv6: invalid targets.
    [`127.0.0.1\0.evil:${port}`, forbidden, ['127.0.0.1.evil', port, 'invalid-target']],
    [`[fe80::1%25lo]:${port}`, forbidden, ['[fe80::1%25lo]', port, 'invalid-target']],
    [`::1:${port}`, forbidden, ['::1', port, 'invalid-target']],
    [`127.0.0.1:0${port}`, forbidden, null],
    ['127.0.0.1', forbidden, ['127.0.0.1', null, 'invalid-target']],
    // IPv6 canonical forms of a listed literal.
    [`[0:0:0:0:0:0:0:1]:${port}`, null],
    // IPv4-mapped loopback is another host: not listed.
    [`[::ffff:127.0.0.1]:${port}`, forbidden, ['::ffff:7f00:1', port, 'not-allowlisted']],
  ];
  for (const [target, expected, denial] of cases) {
    denials.length = 0;
    const line = await ask(proxy.socketPath, `CONNECT ${target} HTTP/1.1\r\nHost: x\r\n\r\n`);
    if (expected === null) {
      // ::1 may not be reachable on this host: either connected or a 502, never a 403.
      assert.notEqual(line, forbidden, target);
      continue;
    }
    assert.equal(line, expected, JSON.stringify(target));
    if (denial) assert.deepEqual(denials.map((d) => [d.host, d.port, d.reason]), [denial], JSON.stringify(target));
  }
  // CR/LF injected into the request line ends the line early: not a valid CONNECT.
  denials.length = 0;
  assert.equal(await ask(proxy.socketPath, `CONNECT 127.0.0.1:${port}\r\nX: y HTTP/1.1\r\n\r\n`), forbidden);
  assert.equal(denials[0].reason, 'unsupported-request');
  // Plain HTTP forwarding is not served.
  denials.length = 0;
  assert.equal(await ask(proxy.socketPath, `GET http://127.0.0.1:${port}/ HTTP/1.1\r\nHost: x\r\n\r\n`), forbidden);
  assert.equal(denials[0].reason, 'unsupported-request');
  // An unresolvable listed name.
  const p2 = await startEgressProxy({ allowlist: ['no-such-host.invalid:80'], command: 'test', onDenied: (d) => denials.push(d) });
  denials.length = 0;
  assert.equal(await ask(p2.socketPath, 'CONNECT no-such-host.invalid:80 HTTP/1.1\r\n\r\n'), forbidden);
  assert.equal(denials[0].reason, 'resolution-failed');
  const dir = path.dirname(p2.socketPath);
  await p2.close();
  assert.ok(!existsSync(dir), 'the socket and its directory are removed on close');
});

test('confinement.proxy-not-ready when the proxy cannot start; nothing is spawned', { skip }, async (t) => {
  const saved = process.env.TMPDIR;
  t.after(() => {
    if (saved === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = saved;
  });
  const events = [];
  // The proxy's directory is made under os.tmpdir(): point it nowhere.
  process.env.TMPDIR = path.join(base, 'no-such-dir');
  await assert.rejects(
    runConfinedCommand({
      command: '/bin/true',
      cwd: base,
      mounts: [{ path: base, mode: 'ro' }],
      network: { allowlist: ['example.test:443'] },
      securityEventEmitter: { emit: (name, e) => events.push([name, e.verdict, e.reasons]) },
    }),
    { code: 'confinement.proxy-not-ready' },
  );
  assert.deepEqual(events, [['sandbox:admission', 'refused', ['confinement.proxy-not-ready']]]);
});
