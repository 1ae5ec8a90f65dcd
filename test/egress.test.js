// Egress allowlist: grammar and normalisation, address vetting, the host proxy and the
// forwarder bridge. Runs as root and as nobody; everything listens on loopback or on Unix
// sockets the test creates under os.tmpdir().
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { lookup as dnsLookupCb } from 'node:dns';
import { EventEmitter, once } from 'node:events';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { before, describe, test } from 'node:test';
import tls from 'node:tls';
import { promisify } from 'node:util';
import { ConfinementError } from '../lib/errors.js';
import { parseAllowlist, parseHostPort } from '../lib/egress/allowlist.js';
import { classifyAddress, vetAddress } from '../lib/egress/vet.js';
import { startProxy } from '../lib/egress/proxy.js';
import { tunnelInspector } from '../lib/egress/tls.js';
import { changeCipherSpec, clientHello, extension, records, serverHello, serverNameData } from './helpers/tls-records.js';
import { alive, exchange, httpServer, rawServer, readAll, tunnel, unixEcho } from './helpers/egress-net.js';
import { defaultForwarderPath, egressBinds, forwarderArgv, proxyEnv, startEgress } from '../lib/egress/index.js';

const dnsLookup = promisify(dnsLookupCb);

const opensslSkip = spawnSync('openssl', ['version']).status === 0 ? false : 'the openssl command is not installed';

/** A self-signed P-256 certificate for tls.example.test and 127.0.0.1: { key, cert } (PEM). */
function selfSignedCert() {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'confined-cert-'));
  try {
    const key = path.join(dir, 'key.pem');
    const cert = path.join(dir, 'cert.pem');
    const args = ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1'];
    args.push('-subj', '/CN=tls.example.test', '-addext', 'subjectAltName=DNS:tls.example.test,IP:127.0.0.1', '-keyout', key, '-out', cert);
    const r = spawnSync('openssl', args, { stdio: 'ignore' });
    assert.equal(r.status, 0, 'openssl made the test certificate');
    return { key: readFileSync(key), cert: readFileSync(cert) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------------
// Grammar and normalisation

function refused(entry, reason) {
  assert.throws(
    () => parseAllowlist([entry]),
    (err) => err instanceof ConfinementError && err.code === `proxy.job-allowlist.${reason}`,
    `${JSON.stringify(entry)} should be refused with ${reason}`,
  );
}

describe('allowlist grammar: refusals', () => {
  const cases = [
    ['bare host name', 'example.com', 'bare-host'],
    ['bare IPv4', '93.184.216.34', 'bare-host'],
    ['bare bracketed IPv6', '[2001:db8::1]', 'bare-host'],
    ['port 0', 'example.com:0', 'invalid-port'],
    ['port 65536', 'example.com:65536', 'invalid-port'],
    ['port with leading zero', 'example.com:0443', 'invalid-port'],
    ['port with plus sign', 'example.com:+443', 'invalid-port'],
    ['negative port', 'example.com:-1', 'invalid-port'],
    ['empty port', 'example.com:', 'invalid-port'],
    ['hex port', 'example.com:0x1bb', 'invalid-port'],
    ['port with letters', 'example.com:443a', 'invalid-port'],
    ['wildcard label', '*.example.com:443', 'wildcard'],
    ['wildcard port', 'example.com:*', 'wildcard'],
    ['IPv4 CIDR', '10.0.0.0/8', 'cidr'],
    ['IPv4 CIDR with port', '10.0.0.0/8:443', 'cidr'],
    ['IPv6 CIDR', '[2001:db8::]/32:443', 'cidr'],
    ['https scheme', 'https://example.com:443', 'scheme'],
    ['http scheme', 'http://example.com:80', 'scheme'],
    ['path', 'example.com:443/path', 'path'],
    ['query', 'example.com:443?x', 'path'],
    ['fragment', 'example.com:443#x', 'path'],
    ['backslash', 'example.com\\:443', 'path'],
    ['userinfo', 'user@example.com:443', 'userinfo'],
    ['userinfo with password', 'user:pw@example.com:443', 'userinfo'],
    ['NUL', 'example.com\0.evil:443', 'control-character'],
    ['CR', 'example.com\r:443', 'control-character'],
    ['LF', 'example.com\n:443', 'control-character'],
    ['CRLF injection', 'example.com:443\r\nHost: evil', 'control-character'],
    ['space', 'example .com:443', 'control-character'],
    ['tab', 'example.com\t:443', 'control-character'],
    ['DEL', 'example.com\x7f:443', 'control-character'],
    ['non-ASCII (IDNA) name', 'b\u00fccher.example:443', 'non-ascii'],
    ['fullwidth dot', 'example\uff0ecom:443', 'non-ascii'],
    ['zone id in brackets', '[fe80::1%eth0]:443', 'zone-id'],
    ['percent-encoded zone id', '[fe80::1%25eth0]:443', 'zone-id'],
    ['zone id unbracketed', 'fe80::1%eth0:443', 'zone-id'],
    ['zone id on a name', 'example.com%eth0:443', 'zone-id'],
    ['unbracketed IPv6', '2001:db8::1:443', 'ipv6-unbracketed'],
    ['five-part IPv4', '1.2.3.4.5:443', 'invalid-host'],
    ['IPv4 part over 255', '256.1.1.1:443', 'invalid-host'],
    ['inet_aton last part too big', '1.2.65536:443', 'invalid-host'],
    ['inet_aton two parts, last over 24 bits', '1.16777216:443', 'invalid-host'],
    ['one part over 32 bits', '4294967296:443', 'invalid-host'],
    ['last of four parts over 255', '1.2.3.256:443', 'invalid-host'],
    ['empty numeric part', '1..2:443', 'invalid-host'],
    ['bad octal', '08.0.0.1:443', 'invalid-host'],
    ['lone 0x', '0x:443', 'invalid-host'],
    ['empty label', 'a..example.com:443', 'invalid-host'],
    ['two trailing dots', 'example.com..:443', 'invalid-host'],
    ['leading hyphen', '-example.com:443', 'invalid-host'],
    ['label over 63', `${'a'.repeat(64)}.com:443`, 'invalid-host'],
    ['empty host', ':443', 'invalid-host'],
    ['only a dot', '.:443', 'invalid-host'],
    ['IPv4 in brackets', '[127.0.0.1]:443', 'invalid-host'],
    ['bad IPv6', '[2001:db8:::1]:443', 'invalid-host'],
    ['IPv6 with junk after bracket', '[::1]x:443', 'invalid-host'],
    ['empty string', '', 'empty'],
    ['too long', `${'a.'.repeat(200)}com:443`, 'too-long'],
    ['a number, not a string', 443, 'invalid-type'],
    ['null', null, 'invalid-type'],
  ];
  for (const [name, entry, reason] of cases) test(`${name}: ${reason}`, () => refused(entry, reason));

  test('the allowlist itself must be an array', () => {
    assert.throws(() => parseAllowlist('example.com:443'), { code: 'proxy.job-allowlist.invalid-type' });
  });
  test('more than 1024 entries: too-many', () => {
    const many = Array.from({ length: 1025 }, (_, i) => `h${i}.example:443`);
    assert.throws(() => parseAllowlist(many), { code: 'proxy.job-allowlist.too-many' });
  });
  test('one bad entry refuses the whole list, naming its index', () => {
    assert.throws(() => parseAllowlist(['example.com:443', 'example.com']), (err) => err.code === 'proxy.job-allowlist.bare-host' && /allowlist\[1\]/.test(err.message));
  });
});

// The C library's inet_aton (through getaddrinfo, as dns.lookup calls it) and the WHATWG URL
// host parser are the independent oracles for what a numeric host denotes.
async function libcIPv4(host) {
  return (await dnsLookup(host, { family: 4 })).address;
}

describe('allowlist grammar: normalisation', () => {
  for (const shorthand of ['127.1', '0x7f.1', '2130706433', '0177.0.0.1', '0x7f000001', '127.0.1', '0x7F.0.0.01', '017700000001', '10.0x10.0300', '169.254.43518']) {
    test(`inet_aton shorthand ${shorthand} is the address the C library reads`, async () => {
      const expected = await libcIPv4(shorthand);
      assert.equal(new URL(`http://${shorthand}/`).hostname, expected);
      const [entry] = parseAllowlist([`${shorthand}:8080`]);
      assert.deepEqual({ ...entry }, { host: expected, port: 8080, literal: 'ipv4' });
    });
  }
  test('a public address in decimal shorthand: 16843009 is 1.1.1.1', async () => {
    const [entry] = parseAllowlist(['16843009:443']);
    assert.equal(entry.host, await libcIPv4('16843009'));
  });
  test('names are lower-cased', () => {
    const [entry] = parseAllowlist(['ReGiStRy.Example.TEST:443']);
    assert.equal(entry.host, 'ReGiStRy.Example.TEST'.toLowerCase());
    assert.equal(entry.literal, null);
  });
  test('one trailing dot is removed', () => {
    const [entry] = parseAllowlist(['registry.example.test.:443']);
    assert.equal(entry.host, 'registry.example.test');
  });
  test('a trailing dot after an IPv4 literal is removed too', async () => {
    const [entry] = parseAllowlist(['127.1.:443']);
    assert.equal(entry.host, await libcIPv4('127.1'));
  });
  for (const v6 of ['0:0:0:0:0:0:0:1', '2001:DB8:0:0:0:0:0:1', '2001:db8::0:1', '::ffff:127.0.0.1', 'fe80:0000::0001', '2001:db8:0:0:1:0:0:1', '::']) {
    test(`IPv6 literal [${v6}] is canonical (RFC 5952, as the WHATWG URL parser writes it)`, () => {
      const [entry] = parseAllowlist([`[${v6}]:443`]);
      assert.equal(`[${entry.host}]`, new URL(`http://[${v6}]/`).hostname);
      assert.equal(entry.literal, 'ipv6');
    });
  }
  test('spellings of one entry collapse to one', () => {
    const list = parseAllowlist(['127.1:80', '127.0.0.1:80', '2130706433:80', 'A.example:1', 'a.example.:1']);
    assert.deepEqual(list.map((e) => `${e.host}:${e.port}`), ['127.0.0.1:80', 'a.example:1']);
  });
  test('the result and its entries are frozen', () => {
    const list = parseAllowlist(['example.com:443']);
    assert.ok(Object.isFrozen(list));
    assert.ok(Object.isFrozen(list[0]));
  });
  test('host and port must both match: parseHostPort keeps them apart', () => {
    const r = parseHostPort('Example.com.:8443');
    assert.equal(r.ok, true);
    assert.equal(r.host, 'example.com');
    assert.equal(r.port, 8443);
  });
});

// ---------------------------------------------------------------------------------------------
// Vetting

describe('address vetting', () => {
  // Written from the IANA special-purpose registries (RFC 6890 and successors).
  const table = [
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['10.0.0.1', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['169.254.169.254', 'link-local'],
    ['169.254.0.1', 'link-local'],
    ['224.0.0.1', 'multicast'],
    ['239.255.255.250', 'multicast'],
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', 'unspecified'],
    ['255.255.255.255', 'broadcast'],
    ['100.64.0.1', 'shared'],
    ['100.127.255.255', 'shared'],
    ['198.18.0.1', 'benchmarking'],
    ['198.19.255.255', 'benchmarking'],
    ['240.0.0.1', 'reserved'],
    ['192.0.0.8', 'reserved'],
    ['192.0.2.1', 'documentation'],
    ['198.51.100.1', 'documentation'],
    ['203.0.113.1', 'documentation'],
    ['::1', 'loopback'],
    ['::', 'unspecified'],
    ['fc00::1', 'private'],
    ['fd12:3456::1', 'private'],
    ['fe80::1', 'link-local'],
    ['febf::1', 'link-local'],
    ['fec0::1', 'site-local'],
    ['ff02::1', 'multicast'],
    ['::ffff:8.8.8.8', 'ipv4-mapped'],
    ['::ffff:127.0.0.1', 'ipv4-mapped'],
    ['::ffff:0:127.0.0.1', 'ipv4-mapped'],
    ['::127.0.0.1', 'ipv4-compatible'],
    ['::8.8.8.8', 'ipv4-compatible'],
    ['2001:db8::1', 'documentation'],
    ['3fff::1', 'documentation'],
    ['2001:2::1', 'benchmarking'],
    ['100::1', 'reserved'],
    ['64:ff9b:1::1', 'reserved'],
    ['2001:10::1', 'reserved'],
    ['4000::1', 'reserved'],
  ];
  for (const [address, category] of table) {
    test(`${address} is refused: ${category}`, () => {
      assert.equal(classifyAddress(address).category, category);
      assert.equal(vetAddress(address, null).allowed, false);
    });
  }
  for (const address of ['8.8.8.8', '1.1.1.1', '93.184.216.34', '100.63.255.255', '100.128.0.0', '172.15.255.255', '172.32.0.0', '192.169.0.1', '198.17.255.255', '198.20.0.0', '223.255.255.255', '2606:4700:4700::1111', '2a00:1450:4001::1']) {
    test(`${address} is public`, () => {
      assert.equal(classifyAddress(address).category, 'public');
      assert.equal(vetAddress(address, null).allowed, true);
    });
  }

  // Embedded IPv4 forms, built here from the IPv4 bytes, for refused and public samples.
  const v4bytes = (a) => a.split('.').map(Number);
  const h16 = (a, b) => ((a << 8) | b).toString(16);
  const embed = {
    nat64: (b) => `64:ff9b::${h16(b[0], b[1])}:${h16(b[2], b[3])}`,
    '6to4': (b) => `2002:${h16(b[0], b[1])}:${h16(b[2], b[3])}::1`,
    'teredo-client': (b) => `2001:0:808:808:0:0:${h16(b[0] ^ 255, b[1] ^ 255)}:${h16(b[2] ^ 255, b[3] ^ 255)}`,
    'teredo-server': (b) => `2001:0:${h16(b[0], b[1])}:${h16(b[2], b[3])}:0:0:f7f7:f7f7`,
    mapped: (b) => `::ffff:${b.join('.')}`,
  };
  for (const inner of ['127.0.0.1', '10.1.2.3', '169.254.169.254', '192.168.0.1', '0.0.0.0', '100.64.1.1']) {
    for (const [form, make] of Object.entries(embed)) {
      const address = make(v4bytes(inner));
      test(`${form} embedding ${inner} (${address}) is refused`, () => {
        assert.equal(vetAddress(address, null).allowed, false);
      });
    }
  }
  for (const inner of ['8.8.8.8', '1.1.1.1']) {
    for (const form of ['nat64', '6to4', 'teredo-client']) {
      const address = embed[form](v4bytes(inner));
      test(`${form} embedding public ${inner} (${address}) is allowed`, () => {
        assert.equal(vetAddress(address, null).allowed, true);
      });
    }
  }

  test('an entry naming an IP literally allows exactly that address', () => {
    const [entry] = parseAllowlist(['127.1:8080']);
    assert.deepEqual(vetAddress('127.0.0.1', entry), { allowed: true, category: 'named-literally' });
    assert.equal(vetAddress('127.0.0.2', entry).allowed, false);
    assert.equal(vetAddress('::ffff:127.0.0.1', entry).allowed, false);
    assert.equal(vetAddress('::1', entry).allowed, false);
  });
  test('an IPv6 literal entry allows that address in any spelling, and nothing else', () => {
    const [entry] = parseAllowlist(['[0:0::1]:8080']);
    assert.equal(vetAddress('::1', entry).allowed, true);
    assert.equal(vetAddress('0:0:0:0:0:0:0:1', entry).allowed, true);
    assert.equal(vetAddress('127.0.0.1', entry).allowed, false);
  });
  test('a name entry never allows a refused address', () => {
    const [entry] = parseAllowlist(['localhost:8080']);
    assert.equal(vetAddress('127.0.0.1', entry).allowed, false);
  });
  test('garbage is refused', () => {
    for (const bad of ['', 'localhost', '127.1', '1.2.3.4.5', 'fe80::1%eth0', '::ffff:1.2.3', null, undefined, 42]) {
      assert.equal(vetAddress(bad, null).allowed, false, String(bad));
    }
  });
});

// ---------------------------------------------------------------------------------------------
// The proxy

/** Starts a proxy collecting what its three outlets receive. */
async function proxyFor(entries, extra = {}) {
  const denied = [];
  const events = [];
  const emitted = [];
  const emitter = new EventEmitter();
  emitter.on('sandbox:violation', (e) => emitted.push(e));
  const proxy = startProxy({
    allowlist: parseAllowlist(entries),
    onDenied: (d) => denied.push(d),
    violations: (e) => events.push(e),
    securityEventEmitter: emitter,
    command: '/usr/bin/curl',
    ...extra,
  });
  await proxy.ready;
  return { proxy, denied, events, emitted };
}

function assertOneDenial(p, host, port, reason) {
  assert.equal(p.denied.length, 1, JSON.stringify(p.denied));
  const d = p.denied[0];
  assert.deepEqual({ host: d.host, port: d.port, reason: d.reason }, { host, port, reason });
  assert.ok(Object.isFrozen(d));
  assert.ok(!Number.isNaN(Date.parse(d.at)));
  assert.deepEqual(p.events, [{ type: 'sandbox:violation', kind: 'network', host, port, reason, command: '/usr/bin/curl', at: d.at }]);
  assert.deepEqual(p.emitted, p.events);
}

describe('egress proxy', () => {
  test('ready only once listening; the socket is 0600 in a private 0700 directory', async () => {
    const p = await proxyFor([]);
    try {
      assert.equal(statSync(p.proxy.socketDir).mode & 0o777, 0o700);
      assert.ok(statSync(p.proxy.socketPath).isSocket());
      assert.equal(statSync(p.proxy.socketPath).mode & 0o777, 0o600);
      assert.equal(statSync(p.proxy.socketDir).uid, process.getuid());
    } finally {
      await p.proxy.close();
    }
  });

  test('CONNECT to an entry naming 127.0.0.1:<port> reaches the server end to end', async () => {
    const up = await httpServer();
    const p = await proxyFor([`127.0.0.1:${up.port}`]);
    try {
      const t = await tunnel(p.proxy.socketPath, `127.0.0.1:${up.port}`);
      assert.equal(t.status, 200);
      t.sock.write(`GET /through-tunnel HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
      const answer = await readAll(t.sock);
      assert.match(answer, /^HTTP\/1\.1 200/);
      assert.match(answer, /hello from upstream \/through-tunnel$/);
      assert.deepEqual(p.denied, []);
    } finally {
      await p.proxy.close();
      await up.close();
    }
  });

  test('an entry naming [::1]:<port> reaches an IPv6 loopback server (CONNECT and plain)', async (t) => {
    const requests = [];
    const server = http.createServer((req, res) => {
      requests.push(req.headers.host);
      res.end(`v6 ${req.url}`);
    });
    const listening = await new Promise((resolve) => {
      server.once('error', (err) => resolve(err));
      server.listen(0, '::1', () => resolve(null));
    });
    if (listening) {
      t.skip(`no IPv6 loopback here (${listening.code})`);
      return;
    }
    const port = server.address().port;
    const p = await proxyFor([`[0:0:0:0:0:0:0:1]:${port}`]);
    try {
      const tun = await tunnel(p.proxy.socketPath, `[::1]:${port}`);
      assert.equal(tun.status, 200);
      tun.sock.write('GET /tunnel HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
      assert.match(await readAll(tun.sock), /v6 \/tunnel$/);
      const plain = await exchange(p.proxy.socketPath, `GET http://[::1]:${port}/plain HTTP/1.1\r\n\r\n`);
      assert.match(plain, /v6 \/plain$/);
      assert.equal(requests[1], `[::1]:${port}`);
      assert.deepEqual(p.denied, []);
    } finally {
      await p.proxy.close();
      await new Promise((r) => server.close(r));
    }
  });

  test('a shorthand spelling in CONNECT matches the same entry (127.1, 2130706433)', async () => {
    const up = await httpServer();
    const p = await proxyFor([`127.0.0.1:${up.port}`]);
    try {
      for (const spelling of ['127.1', '2130706433', '0x7f.0.0.1']) {
        const t = await tunnel(p.proxy.socketPath, `${spelling}:${up.port}`);
        assert.equal(t.status, 200, spelling);
        t.sock.destroy();
      }
    } finally {
      await p.proxy.close();
      await up.close();
    }
  });

  test('CONNECT targets are normalised like entries before matching', async () => {
    const up = await httpServer();
    const p = await proxyFor([`127.0.0.1:${up.port}`, `localhost:${up.port}`, `[::1]:${up.port}`]);
    // The canonical form of an IPv4-mapped literal, from the WHATWG URL parser.
    const mapped = new URL('http://[::ffff:127.0.0.1]/').hostname.slice(1, -1);
    const cases = [
      // Octal spelling of the literal entry: the same entry, dialled as the literal.
      [`0177.0.0.1:${up.port}`, 200, null],
      // Case and trailing dot: the listed name, then refused by vetting (it resolves to loopback).
      [`LOCALHOST.:${up.port}`, 403, ['localhost', up.port, 'address-refused']],
      [`LocalHost:${up.port}`, 403, ['localhost', up.port, 'address-refused']],
      // Unbracketed IPv6, a leading-zero port, no port: invalid targets.
      [`::1:${up.port}`, 403, ['::1', up.port, 'invalid-target']],
      [`127.0.0.1:0${up.port}`, 403, 'invalid-target'],
      ['127.0.0.1', 403, ['127.0.0.1', null, 'invalid-target']],
      // The IPv4-mapped form of a listed loopback literal is another host: not listed.
      [`[::ffff:127.0.0.1]:${up.port}`, 403, [mapped, up.port, 'not-allowlisted']],
    ];
    try {
      for (const [target, status, denial] of cases) {
        p.denied.length = 0;
        const answer = await exchange(p.proxy.socketPath, `CONNECT ${target} HTTP/1.1\r\n\r\n`, { endAfter: status === 200 });
        assert.equal(Number(answer.split(' ')[1]), status, target);
        if (denial === null) assert.deepEqual(p.denied, [], target);
        else if (typeof denial === 'string') assert.deepEqual(p.denied.map((d) => d.reason), [denial], target);
        else assert.deepEqual(p.denied.map((d) => [d.host, d.port, d.reason]), [denial], target);
      }
      // A spelled-out IPv6 loopback matches the [::1] entry: never a 403 (a 502 when this host
      // has no IPv6 loopback; the server listens on 127.0.0.1 only, so no 200 either).
      p.denied.length = 0;
      const v6 = await exchange(p.proxy.socketPath, `CONNECT [0:0:0:0:0:0:0:1]:${up.port} HTTP/1.1\r\n\r\n`);
      assert.notEqual(Number(v6.split(' ')[1]), 403);
      assert.deepEqual(p.denied, []);
      // CR/LF injected into the request line ends it early: not a valid request.
      const crlf = await exchange(p.proxy.socketPath, `CONNECT 127.0.0.1:${up.port}\r\nX: y HTTP/1.1\r\n\r\n`);
      assert.match(crlf, /^HTTP\/1\.1 403/);
      assert.deepEqual(p.denied.map((d) => d.reason), ['invalid-target']);
    } finally {
      await p.proxy.close();
      await up.close();
    }
  });

  test('plain absolute-URI HTTP is forwarded with Host rewritten to the checked authority', async () => {
    const up = await httpServer();
    const p = await proxyFor([`127.0.0.1:${up.port}`]);
    try {
      const answer = await exchange(p.proxy.socketPath, `GET http://127.0.0.1:${up.port}/plain?q=1 HTTP/1.1\r\nHost: fronted.example\r\nProxy-Authorization: secret\r\n\r\n`);
      assert.match(answer, /^HTTP\/1\.1 200/);
      assert.match(answer, /hello from upstream \/plain\?q=1$/);
      assert.deepEqual(up.requests, [{ method: 'GET', url: '/plain?q=1', host: `127.0.0.1:${up.port}` }]);
    } finally {
      await p.proxy.close();
      await up.close();
    }
  });

  test('a POST body (Content-Length) is forwarded', async () => {
    const got = [];
    const server = http.createServer((req, res) => {
      const chunks = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', () => {
        got.push(Buffer.concat(chunks).toString());
        res.end('ok');
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const port = server.address().port;
    const p = await proxyFor([`127.0.0.1:${port}`]);
    try {
      const answer = await exchange(p.proxy.socketPath, `POST http://127.0.0.1:${port}/ HTTP/1.1\r\nContent-Length: 5\r\n\r\nabcde`);
      assert.match(answer, /^HTTP\/1\.1 200/);
      assert.deepEqual(got, ['abcde']);
    } finally {
      await p.proxy.close();
      await new Promise((r) => server.close(r));
    }
  });

  test('a large POST body arrives intact (Content-Length framing, backpressure)', async () => {
    const hashes = [];
    const server = http.createServer((req, res) => {
      const h = createHash('sha256');
      req.on('data', (c) => h.update(c));
      req.on('end', () => {
        hashes.push(h.digest('hex'));
        res.end('ok');
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const port = server.address().port;
    const p = await proxyFor([`127.0.0.1:${port}`]);
    try {
      const body = Buffer.alloc(8 * 1024 * 1024);
      for (let i = 0; i < body.length; i += 4) body.writeUInt32LE((i * 2246822519) >>> 0, i);
      const answer = await exchange(p.proxy.socketPath, Buffer.concat([Buffer.from(`PUT http://127.0.0.1:${port}/big HTTP/1.1\r\nContent-Length: ${body.length}\r\n\r\n`), body]));
      assert.match(answer, /^HTTP\/1\.1 200/);
      assert.deepEqual(hashes, [createHash('sha256').update(body).digest('hex')]);
    } finally {
      await p.proxy.close();
      await new Promise((r) => server.close(r));
    }
  });

  test('localhost:<port> is denied by vetting (a name resolving to loopback)', async () => {
    const up = await httpServer();
    const p = await proxyFor([`localhost:${up.port}`]);
    try {
      const answer = await exchange(p.proxy.socketPath, `CONNECT localhost:${up.port} HTTP/1.1\r\n\r\n`);
      assert.match(answer, /^HTTP\/1\.1 403/);
      assert.match(answer, /X-Confined-Egress-Denied: address-refused/);
      assertOneDenial(p, 'localhost', up.port, 'address-refused');
      assert.equal(up.connections(), 0);
    } finally {
      await p.proxy.close();
      await up.close();
    }
  });

  test('an unlisted port on a listed host is denied', async () => {
    const up = await httpServer();
    const other = await httpServer();
    const p = await proxyFor([`127.0.0.1:${up.port}`]);
    try {
      const answer = await exchange(p.proxy.socketPath, `CONNECT 127.0.0.1:${other.port} HTTP/1.1\r\n\r\n`);
      assert.match(answer, /^HTTP\/1\.1 403/);
      assert.match(answer, /X-Confined-Egress-Denied: not-allowlisted/);
      assertOneDenial(p, '127.0.0.1', other.port, 'not-allowlisted');
      assert.equal(other.connections(), 0);
    } finally {
      await p.proxy.close();
      await up.close();
      await other.close();
    }
  });

  test('an unlisted host in CONNECT is denied without resolving it', async () => {
    let lookups = 0;
    const p = await proxyFor(['registry.example.test:443'], { lookup: async () => (lookups++, [{ address: '8.8.8.8', family: 4 }]) });
    try {
      const answer = await exchange(p.proxy.socketPath, 'CONNECT Evil.Example.TEST.:443 HTTP/1.1\r\n\r\n');
      assert.match(answer, /^HTTP\/1\.1 403/);
      assertOneDenial(p, 'evil.example.test', 443, 'not-allowlisted');
      assert.equal(lookups, 0);
    } finally {
      await p.proxy.close();
    }
  });

  test('an unlisted host in a plain request is denied', async () => {
    const p = await proxyFor(['registry.example.test:80']);
    try {
      const answer = await exchange(p.proxy.socketPath, 'GET http://other.example.test/ HTTP/1.1\r\n\r\n');
      assert.match(answer, /^HTTP\/1\.1 403/);
      assertOneDenial(p, 'other.example.test', 80, 'not-allowlisted');
    } finally {
      await p.proxy.close();
    }
  });

  test('a target with a zone id is an invalid target', async () => {
    const p = await proxyFor(['[fe80::1]:443']);
    try {
      const answer = await exchange(p.proxy.socketPath, 'CONNECT [fe80::1%25eth0]:443 HTTP/1.1\r\n\r\n');
      assert.match(answer, /X-Confined-Egress-Denied: invalid-target/);
      assert.equal(p.denied[0].reason, 'invalid-target');
      assert.equal(p.denied[0].port, 443);
    } finally {
      await p.proxy.close();
    }
  });

  test('a request line with a bare LF or a NUL is refused', async () => {
    const p = await proxyFor(['a.example:443']);
    try {
      const a = await exchange(p.proxy.socketPath, 'CONNECT a.example:443 HTTP/1.1\nX: y\r\n\r\n');
      assert.match(a, /^HTTP\/1\.1 403/);
      const b = await exchange(p.proxy.socketPath, 'CONNECT a.example\0.evil:443 HTTP/1.1\r\n\r\n');
      assert.match(b, /^HTTP\/1\.1 403/);
      assert.deepEqual(p.denied.map((d) => d.reason), ['invalid-target', 'invalid-target']);
    } finally {
      await p.proxy.close();
    }
  });

  test('other methods and origin-form requests are unsupported', async () => {
    const p = await proxyFor(['a.example:80']);
    try {
      assert.match(await exchange(p.proxy.socketPath, 'GET / HTTP/1.1\r\nHost: a.example\r\n\r\n'), /X-Confined-Egress-Denied: unsupported-request/);
      assert.match(await exchange(p.proxy.socketPath, 'TRACE http://a.example/ HTTP/1.1\r\n\r\n'), /X-Confined-Egress-Denied: unsupported-request/);
      assert.match(await exchange(p.proxy.socketPath, 'GET https://a.example/ HTTP/1.1\r\n\r\n'), /X-Confined-Egress-Denied: unsupported-request/);
      assert.equal(p.denied.length, 3);
    } finally {
      await p.proxy.close();
    }
  });

  test('chunked request bodies are refused (no framing the proxy cannot check)', async () => {
    const up = await httpServer();
    const p = await proxyFor([`127.0.0.1:${up.port}`]);
    try {
      const answer = await exchange(p.proxy.socketPath, `POST http://127.0.0.1:${up.port}/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`);
      assert.match(answer, /X-Confined-Egress-Denied: unsupported-request/);
      assert.equal(up.connections(), 0);
    } finally {
      await p.proxy.close();
      await up.close();
    }
  });

  test('DNS rebinding: the proxy resolves once and dials the address it vetted', async () => {
    const up = await httpServer();
    const answers = [[{ address: '93.184.216.34', family: 4 }], [{ address: '127.0.0.1', family: 4 }]];
    const lookups = [];
    const dials = [];
    const p = await proxyFor([`rebind.example.test:${up.port}`], {
      lookup: async (host) => {
        lookups.push(host);
        return answers[Math.min(lookups.length - 1, 1)];
      },
      // Seam: record where the proxy dials, then reach the test server in its place.
      connect: (opts) => {
        dials.push({ host: opts.host, port: opts.port });
        return net.connect({ ...opts, host: '127.0.0.1', lookup: undefined });
      },
    });
    try {
      const t = await tunnel(p.proxy.socketPath, `rebind.example.test:${up.port}`);
      assert.equal(t.status, 200);
      t.sock.destroy();
      assert.deepEqual(lookups, ['rebind.example.test']);
      assert.deepEqual(dials, [{ host: '93.184.216.34', port: up.port }]);
    } finally {
      await p.proxy.close();
      await up.close();
    }
  });

  test('a name resolving to one public and one private address is refused', async () => {
    const dials = [];
    const p = await proxyFor(['mixed.example.test:443'], {
      lookup: async () => [{ address: '93.184.216.34', family: 4 }, { address: '169.254.169.254', family: 4 }],
      connect: (opts) => (dials.push(opts.host), net.connect(opts)),
    });
    try {
      const answer = await exchange(p.proxy.socketPath, 'CONNECT mixed.example.test:443 HTTP/1.1\r\n\r\n');
      assert.match(answer, /X-Confined-Egress-Denied: address-refused/);
      assertOneDenial(p, 'mixed.example.test', 443, 'address-refused');
      assert.deepEqual(dials, []);
    } finally {
      await p.proxy.close();
    }
  });

  test('a name resolving to an IPv4-mapped loopback is refused', async () => {
    const p = await proxyFor(['mapped.example.test:443'], { lookup: async () => [{ address: '::ffff:127.0.0.1', family: 6 }] });
    try {
      await exchange(p.proxy.socketPath, 'CONNECT mapped.example.test:443 HTTP/1.1\r\n\r\n');
      assertOneDenial(p, 'mapped.example.test', 443, 'address-refused');
    } finally {
      await p.proxy.close();
    }
  });

  test('a name that does not resolve: resolution-failed', async () => {
    const p = await proxyFor(['nx.example.test:443'], {
      lookup: async () => {
        throw Object.assign(new Error('ENOTFOUND'), { code: 'ENOTFOUND' });
      },
    });
    try {
      await exchange(p.proxy.socketPath, 'CONNECT nx.example.test:443 HTTP/1.1\r\n\r\n');
      assertOneDenial(p, 'nx.example.test', 443, 'resolution-failed');
    } finally {
      await p.proxy.close();
    }
  });

  test('a CONNECT inside an allowed tunnel is bytes to that upstream, never a new dial', async () => {
    const allowed = await rawServer();
    const other = await rawServer();
    const p = await proxyFor([`127.0.0.1:${allowed.port}`, `127.0.0.1:${other.port}`]);
    try {
      const t = await tunnel(p.proxy.socketPath, `127.0.0.1:${allowed.port}`);
      assert.equal(t.status, 200);
      const inner = `CONNECT 127.0.0.1:${other.port} HTTP/1.1\r\n\r\n`;
      t.sock.write(inner);
      for (let i = 0; i < 200 && allowed.text() !== inner; i++) await new Promise((r) => setTimeout(r, 10));
      assert.equal(allowed.text(), inner);
      assert.equal(other.connections(), 0);
      t.sock.destroy();
    } finally {
      await p.proxy.close();
      await allowed.close();
      await other.close();
    }
  });

  test('a second plain request on the same connection, to another host, is refused and never sent', async () => {
    const first = await httpServer('first');
    const second = await httpServer('second');
    const p = await proxyFor([`127.0.0.1:${first.port}`, `127.0.0.1:${second.port}`]);
    try {
      const answer = await exchange(
        p.proxy.socketPath,
        `GET http://127.0.0.1:${first.port}/a HTTP/1.1\r\nConnection: keep-alive\r\n\r\n` + `GET http://127.0.0.1:${second.port}/b HTTP/1.1\r\nConnection: keep-alive\r\n\r\n`,
      );
      assert.match(answer, /first \/a/);
      assert.doesNotMatch(answer, /second/);
      assert.equal(first.requests.length, 1);
      assert.equal(second.connections(), 0);
      assertOneDenial(p, '127.0.0.1', second.port, 'unsupported-request');
    } finally {
      await p.proxy.close();
      await first.close();
      await second.close();
    }
  });

  test('a throwing onDenied does not stop the proxy', async () => {
    const up = await httpServer();
    const proxy = startProxy({
      allowlist: parseAllowlist([`127.0.0.1:${up.port}`]),
      onDenied: () => {
        throw new Error('boom');
      },
    });
    await proxy.ready;
    try {
      assert.match(await exchange(proxy.socketPath, 'CONNECT nope.example:1 HTTP/1.1\r\n\r\n'), /^HTTP\/1\.1 403/);
      const t = await tunnel(proxy.socketPath, `127.0.0.1:${up.port}`);
      assert.equal(t.status, 200);
      t.sock.destroy();
    } finally {
      await proxy.close();
      await up.close();
    }
  });

  test('close() ends open tunnels and removes the socket and its directory', async () => {
    const up = await rawServer();
    const p = await proxyFor([`127.0.0.1:${up.port}`]);
    const t = await tunnel(p.proxy.socketPath, `127.0.0.1:${up.port}`);
    assert.equal(t.status, 200);
    const closed = once(t.sock, 'close');
    await p.proxy.close();
    await closed;
    assert.equal(existsSync(p.proxy.socketPath), false);
    assert.equal(existsSync(p.proxy.socketDir), false);
    await p.proxy.close(); // idempotent
    await up.close();
  });
});

// ---------------------------------------------------------------------------------------------
// startEgress

// ---------------------------------------------------------------------------------------------
// TLS at the start of a CONNECT tunnel (lib/egress/tls.js)

describe('TLS in a CONNECT tunnel: the ClientHello must ask for the allowed host', () => {
  const named = { host: 'tls.example.test', port: 443, literal: false };
  const literal = { host: '127.0.0.1', port: 443, literal: true };
  const hello = (opts) => records(clientHello(opts));
  /** Feeds the client's bytes one chunk at a time; returns what was released and the verdict. */
  const feed = (inspect, chunks) => {
    const out = [];
    let denied = null;
    for (const c of chunks) {
      const r = inspect.client(c);
      out.push(r.forward);
      denied ??= r.denied;
    }
    return { forward: Buffer.concat(out), denied };
  };

  test('a hello naming the host is released whole, even arriving byte by byte; then bytes', () => {
    const ch = hello({ names: ['tls.example.test'] });
    const inspect = tunnelInspector(named);
    const bytes = [...ch].map((b) => Buffer.from([b]));
    const first = feed(inspect, bytes.slice(0, -1));
    assert.equal(first.forward.length, 0, 'nothing before the hello is complete');
    const last = feed(inspect, bytes.slice(-1));
    assert.deepEqual(last, { forward: ch, denied: null });
    // A TLS 1.2 server hello: no second hello can follow, the rest is bytes.
    assert.deepEqual(inspect.server(records(serverHello({ tls13: false }))), { forward: Buffer.alloc(0), denied: null });
    const tail = Buffer.concat([records(Buffer.from('finished'), { type: 0x16 }), Buffer.from('anything')]);
    assert.deepEqual(inspect.client(tail), { forward: tail, denied: null });
    assert.equal(inspect.settled(), true);
  });

  test('the name is compared case-insensitively, with one trailing dot removed', () => {
    for (const name of ['TLS.Example.Test', 'tls.example.test.']) {
      assert.equal(feed(tunnelInspector(named), [hello({ names: [name] })]).denied, null, name);
    }
  });

  test('another name, no name, two names, a hidden name: denied, nothing released', () => {
    const mismatch = 'tls-name-mismatch';
    const cases = {
      'another host': [{ names: ['evil.example.test'] }, mismatch],
      'a suffix of another name': [{ names: ['tls.example.test.evil.example'] }, mismatch],
      'no name': [{}, mismatch],
      'encrypted client hello': [{ names: ['tls.example.test'], extensions: [extension(0xfe0d, Buffer.alloc(8))] }, mismatch],
      'an ECH draft code point': [{ names: ['tls.example.test'], extensions: [extension(0xfe0a, Buffer.alloc(8))] }, mismatch],
      'encrypted server name': [{ names: ['tls.example.test'], extensions: [extension(0xffce, Buffer.alloc(8))] }, mismatch],
      'two names': [{ names: ['tls.example.test', 'evil.example.test'] }, 'tls-malformed'],
      'a name with a space': [{ names: ['tls.example.test x'] }, 'tls-malformed'],
    };
    for (const [what, [opts, reason]] of Object.entries(cases)) {
      const r = feed(tunnelInspector(named), [hello(opts)]);
      assert.equal(r.forward.length, 0, what);
      assert.equal(r.denied?.reason, reason, what);
    }
    // Control: the same hello with the right single name is released.
    assert.equal(feed(tunnelInspector(named), [hello({ names: ['tls.example.test'] })]).denied, null);
  });

  test('an IP literal target: a hello without a name passes, any name is denied', () => {
    assert.equal(feed(tunnelInspector(literal), [hello()]).denied, null);
    assert.match(feed(tunnelInspector(literal), [hello({ names: ['evil.example.test'] })]).denied.detail, /names evil\.example\.test/);
    assert.match(feed(tunnelInspector(literal), [hello({ names: ['127.0.0.1'] })]).denied.detail, /names 127\.0\.0\.1/);
  });

  test('malformed hellos are denied: truncated, duplicate extension, trailing bytes, wrong message, oversized record', () => {
    const good = clientHello({ names: ['tls.example.test'] });
    const ext = extension(0, serverNameData(['tls.example.test']));
    const cases = {
      'an extension list longer than the hello': clientHello({ rawExtensions: Buffer.from([0, 50, 0, 0]) }),
      'a duplicate extension': clientHello({ rawExtensions: Buffer.concat([Buffer.from([(2 * ext.length) >> 8, (2 * ext.length) & 0xff]), ext, ext]) }),
      'bytes after the extensions': (() => {
        const body = Buffer.concat([good.subarray(4), Buffer.from([0])]);
        return Buffer.concat([Buffer.from([1, body.length >> 16, (body.length >> 8) & 0xff, body.length & 0xff]), body]);
      })(),
      'a server hello first': serverHello(),
    };
    for (const [what, msg] of Object.entries(cases)) {
      const r = feed(tunnelInspector(named), [records(msg)]);
      assert.equal(r.forward.length, 0, what);
      assert.equal(r.denied?.reason, 'tls-malformed', what);
    }
    const oversized = Buffer.from([0x16, 3, 1, 0xff, 0xff]);
    assert.equal(feed(tunnelInspector(named), [oversized]).denied.reason, 'tls-malformed');
    const notHandshake = Buffer.concat([records(good.subarray(0, 10)), records(Buffer.from([1]), { type: 0x14 })]);
    assert.match(feed(tunnelInspector(named), [notHandshake]).denied.detail, /before the ClientHello was complete/);
    // A hello in 1-byte records: refused after 64 records, not reassembled at quadratic cost.
    assert.match(feed(tunnelInspector(named), [records(good, { size: 1 })]).denied.detail, /too large/);
  });

  test('a hello split over records is released only once complete, all records in order', () => {
    const ch = records(clientHello({ names: ['tls.example.test'] }), { size: 20 });
    const inspect = tunnelInspector(named);
    const r1 = inspect.client(ch.subarray(0, 30));
    assert.equal(r1.forward.length, 0);
    assert.deepEqual(inspect.client(ch.subarray(30)), { forward: ch, denied: null });
  });

  test('after a HelloRetryRequest the second hello is checked too (after a ChangeCipherSpec)', () => {
    const ch1 = hello({ names: ['tls.example.test'] });
    for (const [name, denied] of [['evil.example.test', true], ['tls.example.test', false]]) {
      const inspect = tunnelInspector(named);
      assert.deepEqual(inspect.client(ch1), { forward: ch1, denied: null });
      assert.deepEqual(inspect.server(records(serverHello({ retry: true }))), { forward: Buffer.alloc(0), denied: null });
      const second = Buffer.concat([changeCipherSpec(), hello({ names: [name] })]);
      const r = inspect.client(second);
      if (denied) {
        assert.equal(r.forward.length, 0, 'nothing more goes out');
        assert.match(r.denied.detail, /names evil\.example\.test/);
      } else {
        assert.deepEqual(r, { forward: second, denied: null });
        const after = Buffer.from('encrypted');
        assert.deepEqual(inspect.client(after), { forward: after, denied: null });
      }
    }
  });

  test('a handshake record sent before the server answered is held, then released by a plain server hello', () => {
    const inspect = tunnelInspector(named);
    inspect.client(hello({ names: ['tls.example.test'] }));
    const early = Buffer.concat([records(Buffer.from([1]), { type: 0x14 }), records(Buffer.from('more'), { type: 0x16 }), records(Buffer.from('data'), { type: 0x17 })]);
    const held = inspect.client(early);
    assert.equal(held.forward.length, changeCipherSpec().length, 'the ChangeCipherSpec passes; the handshake record and what follows wait');
    assert.equal(inspect.settled(), false);
    const released = inspect.server(records(serverHello({ tls13: true })));
    assert.deepEqual(released, { forward: early.subarray(changeCipherSpec().length), denied: null });
    assert.equal(inspect.settled(), true);
  });

  test('a stream that starts like any TLS record must start with the hello: an alert first is refused', () => {
    // Some TLS stacks skip warning alerts before the hello: the hello after one is never relayed.
    const alert = records(Buffer.from([1, 90]), { type: 0x15 });
    for (const name of ['evil.example.test', 'tls.example.test']) {
      const r = feed(tunnelInspector(named), [Buffer.concat([alert, hello({ names: [name] })])]);
      assert.deepEqual([r.forward.length, r.denied?.reason], [0, 'tls-malformed'], name);
    }
    // Split before the header is known: decided once 3 bytes are there.
    const r = feed(tunnelInspector(named), [alert.subarray(0, 1), alert.subarray(1, 2), Buffer.concat([alert.subarray(2), hello({ names: ['evil.example.test'] })])]);
    assert.equal(r.denied?.reason, 'tls-malformed');
    // Servers accept odd record versions on the first record: any record type followed by a
    // major version byte below 0x10 is read as TLS, and refused unless it is 3.0-3.4.
    const odd = hello({ names: ['evil.example.test'] });
    odd[2] = 5;
    assert.equal(feed(tunnelInspector(named), [odd]).denied?.reason, 'tls-malformed');
    assert.equal(feed(tunnelInspector(named), [Buffer.from([0x16, 0x01, 0, 0, 9, 9])]).denied?.reason, 'tls-malformed');
    // Control: a first byte 0x16 followed by a byte no TLS version has is another protocol.
    const other = Buffer.from([0x16, 0x20, 0, 0, 9, 9]);
    assert.deepEqual(feed(tunnelInspector(named), [other]), { forward: other, denied: null });
  });

  test('short first messages of other protocols are not held back', () => {
    // A SOCKS5 greeting (3 bytes): its first byte says it is not TLS.
    const socks = Buffer.from([5, 1, 0]);
    assert.deepEqual(tunnelInspector(named).client(socks), { forward: socks, denied: null });
    // Two bytes with the top bit set could begin an SSL 2.0 hello: held, and released at the
    // client's end (they cannot be a hello).
    const inspect = tunnelInspector(named);
    assert.deepEqual(inspect.client(Buffer.from([0x80, 0x10])), { forward: Buffer.alloc(0), denied: null });
    assert.equal(inspect.settled(), false);
    assert.deepEqual(inspect.clientEnd(), { forward: Buffer.from([0x80, 0x10]), denied: null });
    assert.equal(inspect.settled(), true);
  });

  test('a retry request is known by its random alone (a draft TLS 1.3 version too)', () => {
    const inspect = tunnelInspector(named);
    inspect.client(hello({ names: ['tls.example.test'] }));
    inspect.server(records(serverHello({ tls13: false, retry: true })));
    assert.match(inspect.client(hello({ names: ['evil.example.test'] })).denied?.detail ?? '', /names evil/);
  });

  test('an SSL 2.0-format hello (it cannot carry a name) is refused', () => {
    const v2 = Buffer.from([0x80, 0x2e, 0x01, 0x03, 0x01, 0, 0x15, 0, 0, 0, 0x10, ...Buffer.alloc(0x15 + 0x10)]);
    assert.equal(feed(tunnelInspector(named), [v2]).denied?.reason, 'tls-name-mismatch');
  });

  test('fail closed: bytes held for the server are bounded; a server answer that is not a hello releases no handshake', () => {
    const ch = hello({ names: ['tls.example.test'] });
    const flood = tunnelInspector(named);
    flood.client(ch);
    let denied = null;
    for (let i = 0; i < 8 && !denied; i++) denied = flood.client(records(Buffer.alloc(16000, 1))).denied;
    assert.equal(denied?.reason, 'tls-malformed', 'more than 64 KiB held before the server answered');
    // The server answers with an alert while a handshake record is held: refused, not released.
    const alerted = tunnelInspector(named);
    alerted.client(ch);
    alerted.client(hello({ names: ['evil.example.test'] }));
    const r = alerted.server(records(Buffer.from([2, 40]), { type: 0x15 }));
    assert.deepEqual([r.forward.length, r.denied?.reason], [0, 'tls-malformed']);
    // The server spoke before the hello was complete (not a TLS server's answer): no handshake
    // record after the hello passes.
    const early = tunnelInspector(named);
    early.client(ch.subarray(0, 10));
    early.server(Buffer.from('220 hello\r\n'));
    assert.deepEqual(early.client(ch.subarray(10)), { forward: ch, denied: null });
    assert.equal(early.client(hello({ names: ['evil.example.test'] })).denied?.reason, 'tls-malformed');
    // Control: a plain server hello releases the held handshake record.
    const plain = tunnelInspector(named);
    plain.client(ch);
    const more = records(Buffer.from('client key exchange'));
    assert.equal(plain.client(more).forward.length, 0);
    assert.deepEqual(plain.server(records(serverHello({ tls13: false }))), { forward: more, denied: null });
  });

  test('a partial record waiting for the server is not settled until the server releases it', () => {
    const inspect = tunnelInspector(named);
    inspect.client(hello({ names: ['tls.example.test'] }));
    const partial = Buffer.from([0x17, 3, 3]);
    assert.equal(inspect.client(partial).forward.length, 0);
    assert.equal(inspect.settled(), false);
    assert.deepEqual(inspect.server(records(serverHello())), { forward: partial, denied: null });
    assert.equal(inspect.settled(), true);
  });

  test('after a HelloRetryRequest, one ChangeCipherSpec may precede the second hello; a second is refused', () => {
    const inspect = tunnelInspector(named);
    inspect.client(hello({ names: ['tls.example.test'] }));
    inspect.server(records(serverHello({ retry: true })));
    assert.equal(inspect.client(changeCipherSpec()).forward.length, changeCipherSpec().length);
    assert.equal(inspect.client(changeCipherSpec()).denied?.reason, 'tls-malformed');
  });

  test('a stream not starting with a handshake record is another protocol: bytes from the start', () => {
    const inspect = tunnelInspector(named);
    const http = Buffer.from('GET / HTTP/1.1\r\nHost: tls.example.test\r\n\r\n');
    assert.deepEqual(inspect.client(http), { forward: http, denied: null });
    const more = Buffer.from([0x16, 3, 1, 0, 5]);
    assert.deepEqual(inspect.client(more), { forward: more, denied: null });
  });
});

describe('TLS through the proxy, with node:tls on both ends', { skip: opensslSkip }, () => {
  let cert;
  before(() => {
    cert = selfSignedCert();
  });

  /** A TLS echo server on loopback; `options` go to tls.createServer. */
  async function tlsEcho(options = {}) {
    let secure = 0;
    const server = tls.createServer({ key: cert.key, cert: cert.cert, ...options }, (s) => {
      secure++;
      s.on('data', (d) => s.write(d));
      s.on('error', () => {});
    });
    server.on('tlsClientError', () => {});
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    return { port: server.address().port, secure: () => secure, close: () => new Promise((r) => server.close(r)) };
  }

  /**
   * A proxy allowing `name:port`, resolving it to a public address and dialling loopback.
   * `sent` collects what the proxy writes upstream.
   */
  function namedProxy(name, port, sent = []) {
    return proxyFor([`${name}:${port}`], {
      lookup: async () => [{ address: '93.184.216.34', family: 4 }],
      connect: (opts) => {
        const sock = net.connect({ ...opts, host: '127.0.0.1', lookup: undefined });
        const write = sock.write.bind(sock);
        sock.write = (chunk, ...rest) => (sent.push(Buffer.from(chunk)), write(chunk, ...rest));
        return sock;
      },
    });
  }

  /** How many ClientHello handshake records begin in these bytes (record by record). */
  function helloCount(bytes) {
    let n = 0;
    for (let at = 0; at + 5 <= bytes.length; at += 5 + bytes.readUInt16BE(at + 3)) {
      if (bytes[at] === 0x16 && bytes[at + 5] === 1) n++;
    }
    return n;
  }

  /** TLS over a CONNECT tunnel: resolves 'echoed' or the error's message. */
  async function handshake(socketPath, target, tlsOptions) {
    const t = await tunnel(socketPath, target);
    assert.equal(t.status, 200);
    return new Promise((resolve) => {
      const s = tls.connect({ socket: t.sock, ca: cert.cert, ...tlsOptions }, () => s.write('ping'));
      s.on('data', (d) => (String(d) === 'ping' ? (resolve('echoed'), s.destroy()) : null));
      s.on('error', (err) => resolve(err.code ?? err.message));
      s.on('close', () => resolve('closed'));
    });
  }

  test('the allowed name completes TLS 1.3 end to end, also through a HelloRetryRequest', async () => {
    for (const [what, serverOptions, clientOptions, hellos] of [
      ['TLS 1.3', {}, {}, 1],
      ['TLS 1.2', { maxVersion: 'TLSv1.2' }, {}, 1],
      // The server accepts only P-256; the client's first key share is X25519: a retry.
      ['HelloRetryRequest', { ecdhCurve: 'P-256' }, { ecdhCurve: 'X25519:P-256' }, 2],
    ]) {
      const up = await tlsEcho(serverOptions);
      const sent = [];
      const p = await namedProxy('tls.example.test', up.port, sent);
      try {
        const r = await handshake(p.proxy.socketPath, `tls.example.test:${up.port}`, { servername: 'tls.example.test', ...clientOptions });
        assert.equal(r, 'echoed', what);
        assert.deepEqual(p.denied, [], what);
        assert.equal(helloCount(Buffer.concat(sent)), hellos, `${what}: ClientHellos relayed`);
      } finally {
        await p.proxy.close();
        await up.close();
      }
    }
  });

  test('another name on the allowed address is denied before the upstream sees a hello', async () => {
    const up = await rawServer();
    const p = await namedProxy('tls.example.test', up.port);
    try {
      const r = await handshake(p.proxy.socketPath, `tls.example.test:${up.port}`, { servername: 'evil.example.test' });
      assert.notEqual(r, 'echoed');
      assertOneDenial(p, 'tls.example.test', up.port, 'tls-name-mismatch');
      assert.equal(up.connections(), 1, 'the vetted address was dialled');
      assert.equal(up.text(), '', 'and got not one byte');
    } finally {
      await p.proxy.close();
      await up.close();
    }
    // Control: the allowed name, to the same kind of upstream, gets its hello there.
    const up2 = await rawServer();
    const p2 = await namedProxy('tls.example.test', up2.port);
    try {
      const t = await tunnel(p2.proxy.socketPath, `tls.example.test:${up2.port}`);
      const s = tls.connect({ socket: t.sock, servername: 'tls.example.test' });
      s.on('error', () => {});
      for (let i = 0; i < 200 && !up2.text().includes('tls.example.test'); i++) await new Promise((r) => setTimeout(r, 10));
      assert.equal(up2.text().charCodeAt(0), 0x16);
      assert.ok(up2.text().includes('tls.example.test'));
      assert.deepEqual(p2.denied, []);
      s.destroy();
    } finally {
      await p2.proxy.close();
      await up2.close();
    }
  });

  test('an IP literal entry: TLS without a name passes, a name is denied', async () => {
    const up = await tlsEcho();
    const p = await proxyFor([`127.0.0.1:${up.port}`]);
    try {
      // node sends no name when it connects to an IP address.
      assert.equal(await handshake(p.proxy.socketPath, `127.0.0.1:${up.port}`, { host: '127.0.0.1' }), 'echoed');
      assert.deepEqual(p.denied, []);
      assert.notEqual(await handshake(p.proxy.socketPath, `127.0.0.1:${up.port}`, { host: '127.0.0.1', servername: 'evil.example.test' }), 'echoed');
      assertOneDenial(p, '127.0.0.1', up.port, 'tls-name-mismatch');
      assert.equal(up.secure(), 1, 'only the allowed handshake reached the server');
    } finally {
      await p.proxy.close();
      await up.close();
    }
  });

  test('after the client half-closes, a slow reader still gets every byte of a large answer', async () => {
    const size = 8 * 1024 * 1024;
    const server = net.createServer({ allowHalfOpen: true }, (s) => {
      s.resume();
      s.on('end', () => s.end(Buffer.alloc(size, 7)));
      s.on('error', () => {});
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const port = server.address().port;
    const p = await proxyFor([`127.0.0.1:${port}`]);
    try {
      for (let run = 0; run < 3; run++) {
        const t = await tunnel(p.proxy.socketPath, `127.0.0.1:${port}`);
        t.sock.end('request');
        let got = 0;
        t.sock.on('data', (d) => {
          got += d.length;
          t.sock.pause();
          setTimeout(() => t.sock.resume(), 1);
        });
        await once(t.sock, 'close');
        assert.equal(got, size, `run ${run}`);
      }
    } finally {
      await p.proxy.close();
      await new Promise((r) => server.close(r));
    }
  });

  test('a protocol whose server speaks first still works: the greeting is not held back', async () => {
    const got = [];
    const server = net.createServer((s) => {
      s.write('220 greeting\r\n');
      s.on('data', (d) => got.push(String(d)));
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const port = server.address().port;
    const p = await proxyFor([`127.0.0.1:${port}`]);
    try {
      // Read raw: the greeting may arrive in the same chunk as the proxy's 200.
      const sock = net.connect({ path: p.proxy.socketPath });
      let seen = '';
      sock.on('data', (d) => (seen += d.toString('latin1')));
      sock.write(`CONNECT 127.0.0.1:${port} HTTP/1.1\r\n\r\n`);
      for (let i = 0; i < 200 && !seen.endsWith('220 greeting\r\n'); i++) await new Promise((r) => setTimeout(r, 10));
      assert.match(seen, /^HTTP\/1\.1 200 [^\r]*\r\n\r\n220 greeting\r\n$/, 'the greeting came before the client sent a byte');
      const t = { sock };
      t.sock.write('HELO x\r\n');
      for (let i = 0; i < 200 && got.join('') !== 'HELO x\r\n'; i++) await new Promise((r) => setTimeout(r, 10));
      assert.equal(got.join(''), 'HELO x\r\n');
      t.sock.destroy();
    } finally {
      await p.proxy.close();
      await new Promise((r) => server.close(r));
    }
  });
});

describe('startEgress', () => {
  test('env points every proxy variable at the forwarder on loopback', async () => {
    const e = startEgress({ allowlist: ['example.com:443'] });
    try {
      await e.ready;
      const names = ['HTTP_PROXY', 'HTTPS_PROXY', 'ALL_PROXY', 'http_proxy', 'https_proxy', 'all_proxy'];
      assert.deepEqual(Object.keys(e.env).sort(), names.sort());
      for (const n of names) assert.equal(e.env[n], `http://127.0.0.1:${e.port}`);
      assert.deepEqual(proxyEnv(e.port), e.env);
      assert.ok(statSync(e.socketPath).isSocket());
    } finally {
      await e.close();
    }
    assert.equal(existsSync(e.socketDir), false);
  });
  test('an invalid allowlist throws before anything starts', () => {
    const before = new Set(readdirTmp());
    assert.throws(() => startEgress({ allowlist: ['*.example.com:443'] }), { code: 'proxy.job-allowlist.wildcard' });
    assert.deepEqual(new Set(readdirTmp()), before);
  });
  test('a proxy that cannot listen rejects ready with confinement.proxy-not-ready', async () => {
    const e = startEgress({ allowlist: [], dir: path.join(os.tmpdir(), `does-not-exist-${process.pid}`) });
    await assert.rejects(e.ready, { code: 'confinement.proxy-not-ready' });
    await e.close();
  });
  test('socketOwner hands the directory and socket to the sandbox uid (root only)', { skip: process.getuid() === 0 ? false : 'chown needs root' }, async () => {
    const e = startEgress({ allowlist: [], socketOwner: { uid: 65534, gid: 65534 } });
    try {
      await e.ready;
      for (const p of [e.socketDir, e.socketPath]) {
        const st = statSync(p);
        assert.deepEqual([st.uid, st.gid], [65534, 65534], p);
      }
      assert.equal(statSync(e.socketDir).mode & 0o777, 0o700);
    } finally {
      await e.close();
    }
    assert.equal(existsSync(e.socketDir), false);
  });
  test('egressBinds: the socket directory and the forwarder ro, at the same paths', () => {
    assert.deepEqual(egressBinds('/tmp/d', '/x/f'), [
      { source: '/tmp/d', target: '/tmp/d', mode: 'ro' },
      { source: '/x/f', target: '/x/f', mode: 'ro' },
    ]);
  });
  test('forwarderArgv puts the command after --exec --', () => {
    assert.deepEqual([...forwarderArgv('/f', 3128, '/s/egress.sock'), 'curl', '-s'], ['/f', '3128', '/s/egress.sock', '--exec', '--', 'curl', '-s']);
  });
});

/** The proxy directories present in os.tmpdir(). */
function readdirTmp() {
  return readdirSync(os.tmpdir()).filter((n) => n.startsWith('confined-egress-'));
}

// ---------------------------------------------------------------------------------------------
// The forwarder bridge (run directly on the host)

// CONFINED_TEST_FORWARDER: run these tests against another build (e.g. with sanitizers).
const forwarder = process.env.CONFINED_TEST_FORWARDER ?? defaultForwarderPath();
const forwarderSkip = existsSync(forwarder) ? false : `${forwarder} is not built (npm run build)`;

/** Spawns the forwarder; resolves { child, port } once it printed its ready line. */
async function startForwarder(socketPath, extraArgs = [], opts = {}) {
  const child = spawn(forwarder, ['0', socketPath, ...extraArgs], { stdio: ['ignore', 'pipe', 'pipe'], ...opts });
  let out = '';
  child.stdout.setEncoding('latin1');
  for await (const chunk of child.stdout) {
    out += chunk;
    if (out.includes('\n')) break;
  }
  const m = /^ready (\d+)\n/.exec(out);
  assert.ok(m, `ready line, got ${JSON.stringify(out)}`);
  return { child, port: Number(m[1]) };
}

describe('confined-forwarder', { skip: forwarderSkip }, () => {
  test('relays 4 MiB both ways intact, with half-close passed on', async () => {
    const echo = await unixEcho();
    const { child, port } = await startForwarder(echo.socketPath);
    try {
      const payload = Buffer.alloc(4 * 1024 * 1024);
      for (let i = 0; i < payload.length; i += 4) payload.writeUInt32LE((i * 2654435761) >>> 0, i);
      const sock = net.connect({ host: '127.0.0.1', port, allowHalfOpen: true });
      const got = readAll(sock);
      sock.end(payload); // half-close: the echo ends only after it saw our end
      const text = await got;
      const hash = (b) => createHash('sha256').update(b).digest('hex');
      assert.equal(hash(Buffer.from(text, 'latin1')), hash(payload));
    } finally {
      child.kill('SIGTERM');
      await once(child, 'exit');
      await echo.close();
    }
  });

  test('listens on [::1] too when the host has IPv6 loopback', async (t) => {
    const echo = await unixEcho();
    const { child, port } = await startForwarder(echo.socketPath);
    try {
      const sock = net.connect({ host: '::1', port, allowHalfOpen: true });
      const err = await Promise.race([once(sock, 'connect').then(() => null), once(sock, 'error').then(([e]) => e)]);
      if (err && (err.code === 'EADDRNOTAVAIL' || err.code === 'ECONNREFUSED' || err.code === 'EAFNOSUPPORT')) {
        t.skip(`no IPv6 loopback here (${err.code})`);
        return;
      }
      assert.equal(err, null);
      const got = readAll(sock);
      sock.end('over ipv6');
      assert.equal(await got, 'over ipv6');
    } finally {
      child.kill('SIGTERM');
      await once(child, 'exit');
      await echo.close();
    }
  });

  test('end to end: client -> forwarder -> proxy -> loopback server', async () => {
    const up = await httpServer();
    const p = await proxyFor([`127.0.0.1:${up.port}`]);
    const { child, port } = await startForwarder(p.proxy.socketPath);
    try {
      const body = await new Promise((resolve, reject) => {
        const req = http.request({ host: '127.0.0.1', port, method: 'GET', path: `http://127.0.0.1:${up.port}/via-forwarder` }, (res) => {
          let b = '';
          res.setEncoding('latin1');
          res.on('data', (d) => (b += d));
          res.on('end', () => resolve(b));
        });
        req.on('error', reject);
        req.end();
      });
      assert.equal(body, 'hello from upstream /via-forwarder');
      const denied = await new Promise((resolve, reject) => {
        const s = net.connect({ host: '127.0.0.1', port });
        const got = readAll(s);
        s.on('error', reject);
        s.write('CONNECT 169.254.169.254:80 HTTP/1.1\r\n\r\n');
        resolve(got);
      });
      assert.match(denied, /^HTTP\/1\.1 403/);
      assert.equal(p.denied[0].reason, 'not-allowlisted');
    } finally {
      child.kill('SIGTERM');
      await once(child, 'exit');
      await p.proxy.close();
      await up.close();
    }
  });

  test('relays under a tight descriptor limit (ulimit -n 16), and refuses cleanly with none spare', async () => {
    const echo = await unixEcho();
    const children = [];
    const limited = (n) => {
      const child = spawn('/bin/sh', ['-c', `ulimit -n ${n} && exec "$0" 0 "$1"`, forwarder, echo.socketPath], { stdio: ['ignore', 'pipe', 'inherit'] });
      children.push(child);
      return child;
    };
    const readyPort = async (child) => {
      let out = '';
      child.stdout.setEncoding('latin1');
      for await (const chunk of child.stdout) {
        out += chunk;
        if (out.includes('\n')) break;
      }
      return Number(/^ready (\d+)\n/.exec(out)[1]);
    };
    try {
      const roomy = limited(16);
      const port = await readyPort(roomy);
      for (let i = 0; i < 3; i++) {
        const sock = net.connect({ host: '127.0.0.1', port, allowHalfOpen: true });
        const got = readAll(sock);
        sock.end(`round ${i}`);
        assert.equal(await got, `round ${i}`);
      }
      roomy.kill('SIGTERM');
      assert.equal((await once(roomy, 'exit'))[0], 143);
      // 0-2, the signalfd and two listeners: no descriptor left for the proxy connection.
      const starved = limited(6);
      const port2 = await readyPort(starved);
      const sock = net.connect({ host: '127.0.0.1', port: port2 });
      const closed = new Promise((resolve) => sock.on('close', resolve));
      sock.on('error', () => {}); // a reset is the expected refusal here
      sock.write('x');
      await closed;
      starved.kill('SIGTERM');
      assert.equal((await once(starved, 'exit'))[0], 143);
    } finally {
      for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await echo.close();
    }
  });

  test('SIGTERM ends it', async () => {
    const echo = await unixEcho();
    const { child } = await startForwarder(echo.socketPath);
    child.kill('SIGTERM');
    const [code, signal] = await once(child, 'exit');
    assert.equal(signal, null);
    assert.equal(code, 128 + os.constants.signals.SIGTERM);
    await echo.close();
  });

  test('it exits when its parent dies', async () => {
    const echo = await unixEcho();
    // The parent is a shell that prints the forwarder's pid, then waits forever.
    const parent = spawn('/bin/sh', ['-c', `"$0" 0 "$1" & echo "pid $!"; exec sleep 1000`, forwarder, echo.socketPath], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    parent.stdout.setEncoding('latin1');
    for await (const chunk of parent.stdout) {
      out += chunk;
      if (/pid \d+\n/.test(out) && /ready \d+\n/.test(out)) break;
    }
    const pid = Number(/pid (\d+)/.exec(out)[1]);
    assert.ok(alive(pid));
    parent.kill('SIGKILL');
    await once(parent, 'exit');
    for (let i = 0; i < 500 && alive(pid); i++) await new Promise((r) => setTimeout(r, 10));
    assert.equal(alive(pid), false, `forwarder ${pid} outlived its parent`);
    await echo.close();
  });

  test('--exec: runs the command after listening and exits with its status', async () => {
    const echo = await unixEcho();
    try {
      const child = spawn(forwarder, ['0', echo.socketPath, '--exec', '--', '/bin/sh', '-c', 'exit 7'], { stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      child.stdout.on('data', (d) => (out += d));
      const [code, signal] = await once(child, 'exit');
      assert.deepEqual([code, signal], [7, null]);
      assert.equal(out, '', 'no ready line on the command stdout');
    } finally {
      await echo.close();
    }
  });

  test('--exec: the command killed by a signal ends the forwarder with that signal', async () => {
    const echo = await unixEcho();
    try {
      const child = spawn(forwarder, ['0', echo.socketPath, '--exec', '--', '/bin/sh', '-c', 'kill -TERM $$'], { stdio: 'ignore' });
      const [code, signal] = await once(child, 'exit');
      assert.deepEqual([code, signal], [null, 'SIGTERM']);
    } finally {
      await echo.close();
    }
  });

  test('--exec: a missing command is 127', async () => {
    const echo = await unixEcho();
    try {
      const child = spawn(forwarder, ['0', echo.socketPath, '--exec', '--', '/nonexistent/command'], { stdio: 'ignore' });
      const [code] = await once(child, 'exit');
      assert.equal(code, 127);
    } finally {
      await echo.close();
    }
  });

  test('--exec: the command reaches the proxy through the forwarder, with the proxy env', async () => {
    const up = await httpServer();
    const p = await proxyFor([`127.0.0.1:${up.port}`]);
    // A free port for the forwarder: taken and released (the command must know it up front).
    const probe = net.createServer().listen(0, '127.0.0.1');
    await once(probe, 'listening');
    const port = probe.address().port;
    await new Promise((r) => probe.close(r));
    const script = `
      const http = require('node:http');
      const u = new URL(process.env.HTTP_PROXY);
      http.get({ host: u.hostname, port: u.port, path: process.argv[1] }, (res) => {
        let b = ''; res.on('data', (d) => b += d); res.on('end', () => { process.stdout.write(b); process.exit(res.statusCode === 200 ? 0 : 3); });
      }).on('error', (e) => { console.error(e.message); process.exit(4); });`;
    try {
      const argv = [...forwarderArgv(forwarder, port, p.proxy.socketPath), process.execPath, '-e', script, `http://127.0.0.1:${up.port}/exec`];
      const child = spawn(argv[0], argv.slice(1), { env: { ...proxyEnv(port) }, stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      child.stdout.on('data', (d) => (out += d));
      const [code] = await once(child, 'exit');
      assert.equal(code, 0);
      assert.equal(out, 'hello from upstream /exec');
    } finally {
      await p.proxy.close();
      await up.close();
    }
  });

  test('--exec --ready-fd: the ready line goes to that fd, before the command runs', async () => {
    const echo = await unixEcho();
    try {
      const child = spawn(forwarder, ['--ready-fd', '3', '0', echo.socketPath, '--exec', '--', '/bin/sh', '-c', 'echo command-ran'], { stdio: ['ignore', 'pipe', 'pipe', 'pipe'] });
      let out = '';
      let ready = '';
      child.stdout.on('data', (d) => (out += d));
      child.stdio[3].on('data', (d) => (ready += d));
      const [code] = await once(child, 'exit');
      assert.equal(code, 0);
      assert.match(ready, /^ready \d+\n$/);
      assert.equal(out, 'command-ran\n');
    } finally {
      await echo.close();
    }
  });

  test('usage errors exit 125', async () => {
    for (const args of [[], ['x', '/s'], ['65536', '/s'], ['01', '/s'], ['0', '/s', '--exec'], ['0', '/s', '--exec', 'cmd']]) {
      const child = spawn(forwarder, args, { stdio: 'ignore' });
      const [code] = await once(child, 'exit');
      assert.equal(code, 125, JSON.stringify(args));
    }
  });
});

// ---------------------------------------------------------------------------------------------
// Inside a real network namespace (bwrap directly: loopback only, nothing routed)

function bwrapUsable() {
  if (!existsSync('/usr/bin/bwrap')) return 'no /usr/bin/bwrap';
  if (forwarderSkip) return forwarderSkip;
  return false;
}

describe('forwarder inside a network namespace', { skip: bwrapUsable() }, () => {
  test('allowed fetch, denied port, and a direct connect that bypasses the proxy fails', async (t) => {
    const up = await httpServer('inside');
    const other = await httpServer('other');
    const denied = [];
    const e = startEgress({ allowlist: [`127.0.0.1:${up.port}`], onDenied: (d) => denied.push(d), command: process.execPath });
    await e.ready;
    // The sandbox user maps to the caller (uid 65534 inside), so the 0700 socket directory is
    // reachable; the runner does the equivalent with its idmapped stage mounts.
    const script = `
      const http = require('node:http');
      const net = require('node:net');
      const u = new URL(process.env.HTTP_PROXY);
      const get = (path) => new Promise((resolve) => {
        http.get({ host: u.hostname, port: u.port, path }, (res) => {
          let b = ''; res.on('data', (d) => b += d); res.on('end', () => resolve(res.statusCode + ' ' + b));
        }).on('error', (e) => resolve('error ' + e.code));
      });
      const direct = (port) => new Promise((resolve) => {
        const s = net.connect({ host: '127.0.0.1', port }, () => { s.destroy(); resolve('connected'); });
        s.on('error', (e) => resolve(e.code));
      });
      (async () => {
        const out = [await get(process.argv[1]), await get(process.argv[2]), await direct(Number(process.argv[3]))];
        process.stdout.write(JSON.stringify(out));
      })();`;
    const args = [
      '--unshare-all', '--unshare-user', '--uid', '65534', '--gid', '65534', '--die-with-parent', '--new-session',
      '--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc', '--ro-bind', e.socketDir, e.socketDir, '--clearenv',
      ...Object.entries(e.env).flatMap(([k, v]) => ['--setenv', k, v]),
      ...forwarderArgv(forwarder, e.port, e.socketPath),
      process.execPath, '-e', script, `http://127.0.0.1:${up.port}/in`, `http://127.0.0.1:${other.port}/out`, String(up.port),
    ];
    try {
      const child = spawn('/usr/bin/bwrap', args, { stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      let err = '';
      child.stdout.on('data', (d) => (out += d));
      child.stderr.on('data', (d) => (err += d));
      const [code] = await once(child, 'exit');
      if (code !== 0 && /bwrap:/.test(err) && out === '') {
        t.skip(`bwrap cannot create namespaces here: ${err.trim()}`);
        return;
      }
      assert.equal(code, 0, err);
      const [allowed, refused, direct] = JSON.parse(out);
      assert.equal(allowed, '200 inside /in');
      assert.match(refused, /^403 /);
      assert.equal(direct, 'ECONNREFUSED');
      assert.deepEqual(denied.map((d) => [d.host, d.port, d.reason]), [['127.0.0.1', other.port, 'not-allowlisted']]);
      assert.equal(other.connections(), 0);
    } finally {
      await e.close();
      await up.close();
      await other.close();
    }
    assert.equal(existsSync(e.socketDir), false);
  });
});
