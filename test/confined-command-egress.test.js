// runConfinedCommand with `network: { allowlist }` end to end (issue 6): a server the test runs on
// the host's loopback, a client (curl, bash) inside the sandbox, the forwarder bridge
// (native/exe/forwarder.c) and the host proxy (lib/egress) between them; what ends them, and what
// is left afterwards. The grammar, vetting, proxy and forwarder alone are test/egress.test.js.
// Runs as root (the command is host uid 65534, the socket directory and forwarder are staged as
// idmapped clones) and as nobody (bound directly).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import diagnostics from 'node:diagnostics_channel';
import { EventEmitter } from 'node:events';
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { COMMAND_CHANNEL, ConfinementError, FORWARDER_PORT, runConfinedCommand } from '../lib/confinement.js';
import { defaultForwarderPath } from '../lib/egress/index.js';
import { confinementPosture } from '../lib/posture.js';

const linux = process.platform === 'linux';
const posture = linux ? await confinementPosture() : null;
const skip = !linux ? 'Linux backend only' : posture.enforced ? false : `confinement is not available: ${posture.reason}`;
const curl = existsSync('/usr/bin/curl') ? '/usr/bin/curl' : null;
const forwarder = linux && existsSync(defaultForwarderPath()) ? realpathSync(defaultForwarderPath()) : null;

const base = mkdtempSync(path.join(os.tmpdir(), 'confined-cmd-egress-'));
chmodSync(base, 0o755);
after(() => rmSync(base, { recursive: true, force: true }));

const hits = [];
const server = http.createServer((req, res) => {
  hits.push(req.url);
  res.end(`hello ${req.url}\n`);
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const port = server.address().port;
const otherPort = port === 65535 ? port - 1 : port + 1;
after(() => server.close());

/** Host pids whose argv[0] is the forwarder, with their argv. */
function forwarders() {
  const found = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(entry)) continue;
    try {
      const argv = readFileSync(`/proc/${entry}/cmdline`, 'latin1').split('\0');
      if (argv[0] === forwarder) found.push({ pid: Number(entry), argv });
    } catch {
      // gone, or not ours to read
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
  hits.length = 0;
  const script = [
    // The forwarder is the command's parent; its argv names the proxy socket (inside = host path).
    `tr '\\0' '\\n' < /proc/$PPID/cmdline | sed -n 3p`,
    'echo "$HTTP_PROXY $https_proxy $ALL_PROXY"',
    // Through CONNECT (-p) and as a plain absolute-URI request.
    `${curl} -sS -p http://127.0.0.1:${port}/tunnel; echo "rc=$?"`,
    `${curl} -sS http://127.0.0.1:${port}/plain; echo "rc=$?"`,
    `${curl} -sS -p http://localhost:${port}/vetted; echo "rc=$?"`,
    `${curl} -sS -p http://127.0.0.1:${otherPort}/port; echo "rc=$?"`,
    // An unlisted host through CONNECT, by hand.
    `exec 3<>/dev/tcp/127.0.0.1/${FORWARDER_PORT}; printf 'CONNECT other.example.test:80 HTTP/1.1\\r\\n\\r\\n' >&3; head -n 1 <&3; exec 3<&-`,
    // A raw connect that bypasses the proxy: the sandbox's own loopback has no such listener.
    `if exec 4<>/dev/tcp/127.0.0.1/${port}; then echo RAW-CONNECTED; else echo raw-refused; fi`,
  ].join('\n');
  const { result, stdout } = await run({
    command: '/bin/bash',
    args: ['-c', script],
    // The caller's proxy variables are overridden; its other variables are kept.
    env: { HTTP_PROXY: 'http://caller.example:1', KEEP: 'kept' },
    network: { allowlist: [`127.0.0.1:${port}`, `localhost:${port}`], onDenied: (d) => denials.push(d), violations: (v) => violations.push(v) },
    securityEventEmitter: emitter,
    limits: { wallTimeoutMs: 120_000 },
  });
  assert.equal(result.code, 0, result.stderrTail);
  const lines = stdout.split('\n');
  const socketPath = lines[0];
  assert.match(socketPath, /^\/.+\.sock$/, 'the forwarder got the proxy socket path');
  const proxyUrl = `http://127.0.0.1:${FORWARDER_PORT}`;
  assert.equal(lines[1], `${proxyUrl} ${proxyUrl} ${proxyUrl}`);
  assert.deepEqual(lines.slice(2, 6), ['hello /tunnel', 'rc=0', 'hello /plain', 'rc=0']);
  assert.ok(!stdout.includes('hello /vetted') && !stdout.includes('hello /port'));
  assert.ok(stdout.includes('HTTP/1.1 403 Forbidden'));
  assert.ok(stdout.includes('raw-refused') && !stdout.includes('RAW-CONNECTED'));
  assert.deepEqual(hits, ['/tunnel', '/plain'], 'only the allowed requests reached the server');
  assert.deepEqual(
    denials.map((d) => [d.host, d.port, d.reason]),
    [
      ['localhost', port, 'address-refused'],
      ['127.0.0.1', otherPort, 'not-allowlisted'],
      ['other.example.test', 80, 'not-allowlisted'],
    ],
  );
  for (const d of denials) assert.ok(Object.isFrozen(d) && !Number.isNaN(Date.parse(d.at)));
  assert.deepEqual(
    violations,
    denials.map((d) => ({ type: 'sandbox:violation', kind: 'network', host: d.host, port: d.port, reason: d.reason, command: '/bin/bash', at: d.at })),
  );
  assert.deepEqual(emitted, violations);
  // Nothing is left: the proxy's socket and its directory, the forwarder.
  assert.equal(existsSync(socketPath), false);
  assert.equal(existsSync(path.dirname(socketPath)), false);
  assert.deepEqual(forwarders(), []);
});

test('the socket directory is the command\'s to reach, not to write', { skip }, async () => {
  const script = [
    `d=$(tr '\\0' '\\n' < /proc/$PPID/cmdline | sed -n 3p | xargs dirname)`,
    'echo "$d"',
    'id -u',
    'if : > "$d/planted" 2>/dev/null; then echo WROTE; else echo no-write; fi',
    'if rm -f "$d/egress.sock" 2>/dev/null && [ ! -e "$d/egress.sock" ]; then echo REMOVED; else echo kept; fi',
  ].join('\n');
  const { result, stdout } = await run({ command: '/bin/bash', args: ['-c', script], network: { allowlist: ['example.test:443'] } });
  assert.equal(result.code, 0, result.stderrTail);
  const [dir, uid, write, remove] = stdout.trim().split('\n');
  assert.ok(path.isAbsolute(dir), stdout);
  // As root the command is host uid 65534; as nobody it is nobody.
  assert.equal(Number(uid), process.getuid() === 0 ? 65534 : process.getuid());
  assert.equal(write, 'no-write');
  assert.equal(remove, 'kept');
  assert.equal(existsSync(dir), false, 'the directory is removed after the run');
});

test('the forwarder passes the exact exit status through', { skip }, async () => {
  const code = await run({ command: '/bin/sh', args: ['-c', 'exit 42'], network: { allowlist: ['example.test:443'] } });
  assert.equal(code.result.code, 42);
  assert.equal(code.result.signal, null);
  const sig = await run({ command: '/bin/sh', args: ['-c', 'kill -TERM $$'], network: { allowlist: ['example.test:443'] } });
  assert.equal(sig.result.signal, 'SIGTERM');
  assert.equal(sig.result.code, null);
  // 125 is also the forwarder's own refusal status: a command's 125 still comes through as is.
  const own = await run({ command: '/bin/sh', args: ['-c', 'exit 125'], network: { allowlist: ['example.test:443'] } });
  assert.equal(own.result.code, 125);
  assert.equal(own.result.stderrTail, '');
});

for (const how of ['stop()', 'the signal', 'the wall timeout']) {
  test(`${how} ends the command, the forwarder and the proxy`, { skip }, async () => {
    const ac = new AbortController();
    const marker = `1000.${Math.floor(Math.random() * 1e9)}`;
    const h = await runConfinedCommand({
      command: '/bin/sh',
      args: ['-c', `sleep ${marker}`],
      cwd: base,
      mounts: [{ path: base, mode: 'ro' }],
      network: { allowlist: ['example.test:443'] },
      signal: ac.signal,
      limits: how === 'the wall timeout' ? { wallTimeoutMs: 3000 } : {},
    });
    const mine = () => forwarders().filter((f) => f.argv.includes(`sleep ${marker}`));
    for (let i = 0; i < 800 && mine().length === 0; i++) await sleep(25);
    const [fwd] = mine();
    assert.ok(fwd, 'the forwarder ran');
    assert.deepEqual(fwd.argv.slice(1, 5), [String(FORWARDER_PORT), fwd.argv[2], '--exec', '--']);
    const socketPath = fwd.argv[2];
    assert.ok(existsSync(socketPath), 'the proxy listens');
    let r;
    if (how === 'stop()') r = await h.stop();
    else if (how === 'the signal') {
      ac.abort();
      r = await h.wait();
    } else r = await h.wait();
    assert.equal(r.signal, 'SIGKILL');
    assert.equal(r.aborted, how !== 'the wall timeout');
    assert.equal(r.timedOut, how === 'the wall timeout');
    // The proxy closed before wait() resolved.
    assert.equal(existsSync(socketPath), false);
    assert.equal(existsSync(path.dirname(socketPath)), false);
    for (let i = 0; i < 400 && mine().length; i++) await sleep(25);
    assert.deepEqual(mine(), []);
  });
}

test('an invalid allowlist rejects with its proxy.job-allowlist code before anything starts', { skip: !linux && 'Linux only' }, async (t) => {
  // Any proxy directory would be made under os.tmpdir(): a private one here, to see it stays empty.
  const saved = process.env.TMPDIR;
  const tmp = mkdtempSync(path.join(base, 'tmp-'));
  process.env.TMPDIR = tmp;
  t.after(() => {
    if (saved === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = saved;
  });
  const seen = [];
  const listener = (m) => seen.push(m);
  diagnostics.subscribe(COMMAND_CHANNEL, listener);
  t.after(() => diagnostics.unsubscribe(COMMAND_CHANNEL, listener));
  const events = [];
  const ok = {
    command: '/bin/true',
    cwd: base,
    mounts: [{ path: base, mode: 'ro' }],
    securityEventEmitter: { emit: (...a) => events.push(a) },
  };
  for (const [allowlist, reason] of [
    [['example.test'], 'bare-host'],
    [['*.example.test:443'], 'wildcard'],
    [['10.0.0.0/8:443'], 'cidr'],
    [['example.test:0443'], 'invalid-port'],
    [['[fe80::1%eth0]:443'], 'zone-id'],
    [['example.test\r\nHost: x:443'], 'control-character'],
    [['example.test:443', 'https://example.test:443'], 'scheme'],
    ['example.test:443', 'invalid-type'],
  ]) {
    await assert.rejects(runConfinedCommand({ ...ok, network: { allowlist } }), (err) => {
      assert.ok(err instanceof ConfinementError);
      assert.equal(err.code, `proxy.job-allowlist.${reason}`);
      return true;
    });
  }
  for (const network of [{ allowlist: ['a.test:1'], onDenied: 1 }, { allowlist: ['a.test:1'], violations: 'x' }, { allowlist: ['a.test:1'], forwarderPath: 'rel' }, {}, 'on'])
    await assert.rejects(runConfinedCommand({ ...ok, network }), { code: 'confinement.option-invalid' });
  // Shape refusals report nothing and start nothing.
  assert.deepEqual(seen, []);
  assert.deepEqual(events, []);
  assert.deepEqual(readdirSync(tmp), []);
});

test('confinement.proxy-not-ready when the proxy cannot start; nothing is spawned', { skip }, async (t) => {
  const saved = process.env.TMPDIR;
  t.after(() => {
    if (saved === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = saved;
  });
  const events = [];
  const seen = [];
  const listener = (m) => seen.push(m.event);
  diagnostics.subscribe(COMMAND_CHANNEL, listener);
  t.after(() => diagnostics.unsubscribe(COMMAND_CHANNEL, listener));
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
    (err) => err instanceof ConfinementError && err.code === 'confinement.proxy-not-ready',
  );
  assert.deepEqual(events, [['sandbox:admission', 'refused', ['confinement.proxy-not-ready']]]);
  assert.deepEqual(seen, []);
});

test('the admission record carries the normalised entries', { skip }, async () => {
  const records = [];
  const { result } = await run({
    command: '/bin/true',
    network: { allowlist: ['Registry.Example.TEST.:443', '127.1:80', '[0:0::1]:8080', 'registry.example.test:443'] },
    recordAdmission: (r) => records.push(r),
  });
  assert.equal(result.code, 0, result.stderrTail);
  assert.equal(records.length, 1);
  assert.equal(records[0].network, 'allowlist');
  assert.deepEqual(records[0].allowlist, ['registry.example.test:443', '127.0.0.1:80', '[::1]:8080']);
  assert.ok(Object.isFrozen(records[0].allowlist));
});
