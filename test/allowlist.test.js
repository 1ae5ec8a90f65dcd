// The egress allowlist grammar, host normalisation and address vetting (lib/allowlist.js), and
// their use by runConfinedCommand's validation (an invalid entry rejects with
// proxy.job-allowlist.* before anything starts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import diagnostics from 'node:diagnostics_channel';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  ALLOWLIST_CODES,
  addressAllowed,
  normalizeHost,
  parseAllowlist,
  parseHostPort,
} from '../lib/allowlist.js';
import { COMMAND_CHANNEL, ConfinementError, runConfinedCommand } from '../lib/confinement.js';

function codeOf(fn) {
  try {
    fn();
  } catch (err) {
    return err.code;
  }
  return null;
}

test('valid entries are normalised: case, trailing dot, duplicates', () => {
  assert.deepEqual(parseAllowlist(['Registry.Example.TEST.:443', 'registry.example.test:443', 'a-b.c:80']), [
    'registry.example.test:443',
    'a-b.c:80',
  ]);
  assert.deepEqual(parseAllowlist(['[::1]:8080', '[0:0:0:0:0:0:0:1]:8080', '[2001:DB8::A]:1']), ['[::1]:8080', '[2001:db8::a]:1']);
  assert.ok(Object.isFrozen(parseAllowlist(['x.test:1'])));
});

test('inet_aton shorthands name the address they denote', () => {
  // Computed independently: each form's 32-bit value, formatted as a dotted quad.
  const quad = (v) => [24, 16, 8, 0].map((s) => (v >>> s) & 255).join('.');
  const cases = [
    ['127.1', (127 << 24) + 1],
    ['127.0.1', (127 << 24) + 1],
    ['0x7f.1', (127 << 24) + 1],
    ['0177.0.0.1', (127 << 24) + 1],
    ['2130706433', 2130706433],
    ['0x7f000001', 0x7f000001],
    ['017700000001', 0o17700000001],
    ['10.0x10.0300', (10 << 24) + (16 << 16) + 0o300],
    ['169.254.43518', (169 << 24) + (254 << 16) + 43518],
  ];
  for (const [text, value] of cases) {
    assert.deepEqual(normalizeHost(text), { host: quad(value >>> 0), family: 4 }, text);
    assert.equal(parseHostPort(`${text}:80`).host, quad(value >>> 0), text);
  }
  for (const bad of ['256.0.0.1', '1.2.3.4.5', '08.1.1.1', '0x', '1.2.3.256', '1.16777216', '4294967296', '1..2'])
    assert.equal(normalizeHost(bad), null, bad);
});

test('invalid entries: each proxy.job-allowlist code', () => {
  const cases = [
    [() => parseAllowlist('a.test:1'), ALLOWLIST_CODES.notArray],
    [() => parseAllowlist([]), ALLOWLIST_CODES.empty],
    [() => parseAllowlist([5]), ALLOWLIST_CODES.entry],
    [() => parseAllowlist(['']), ALLOWLIST_CODES.entry],
    [() => parseAllowlist(['[::1]x']), ALLOWLIST_CODES.entry],
    [() => parseAllowlist(['registry.example.test']), ALLOWLIST_CODES.portMissing],
    [() => parseAllowlist(['[::1]']), ALLOWLIST_CODES.portMissing],
    [() => parseAllowlist(['*.example.test:443']), ALLOWLIST_CODES.wildcard],
    [() => parseAllowlist(['example.test:*']), ALLOWLIST_CODES.wildcard],
    [() => parseAllowlist(['10.0.0.0/8:443']), ALLOWLIST_CODES.cidr],
    [() => parseAllowlist(['example.test:0']), ALLOWLIST_CODES.port],
    [() => parseAllowlist(['example.test:65536']), ALLOWLIST_CODES.port],
    [() => parseAllowlist(['example.test:0443']), ALLOWLIST_CODES.port],
    [() => parseAllowlist(['example.test:+443']), ALLOWLIST_CODES.port],
    [() => parseAllowlist(['example.test:']), ALLOWLIST_CODES.port],
    [() => parseAllowlist(['example.test:443 ']), ALLOWLIST_CODES.port],
    [() => parseAllowlist(['exa mple.test:443']), ALLOWLIST_CODES.host],
    [() => parseAllowlist(['example.test\0.evil:443']), ALLOWLIST_CODES.host],
    [() => parseAllowlist(['example.test\r\nHost: x:443']), ALLOWLIST_CODES.host],
    [() => parseAllowlist(['[fe80::1%eth0]:443']), ALLOWLIST_CODES.host],
    [() => parseAllowlist(['[fe80::1%25eth0]:443']), ALLOWLIST_CODES.host],
    [() => parseAllowlist(['::1:443']), ALLOWLIST_CODES.host],
    [() => parseAllowlist(['-bad.test:443']), ALLOWLIST_CODES.host],
    [() => parseAllowlist(['bad_.test:443']), ALLOWLIST_CODES.host],
    [() => parseAllowlist([`${'a'.repeat(64)}.test:443`]), ALLOWLIST_CODES.host],
    [() => parseAllowlist(['a..test:443']), ALLOWLIST_CODES.host],
    [() => parseAllowlist(['.:443']), ALLOWLIST_CODES.host],
    [() => parseAllowlist(['[not-v6]:443']), ALLOWLIST_CODES.host],
  ];
  for (const [fn, code] of cases) assert.equal(codeOf(fn), code, fn.toString());
  for (const code of Object.values(ALLOWLIST_CODES)) assert.match(code, /^proxy\.job-allowlist\.[a-z-]+$/);
});

test('address vetting refuses loopback, private, link-local, multicast, unspecified and embedded forms', () => {
  const refusedAddresses = [
    '127.0.0.1',
    '127.255.255.254',
    '10.1.2.3',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.1.1',
    '169.254.169.254',
    '100.64.0.1',
    '0.0.0.0',
    '224.0.0.1',
    '239.255.255.250',
    '255.255.255.255',
    '::',
    '::1',
    '::ffff:127.0.0.1',
    '::ffff:169.254.169.254',
    '::127.0.0.1',
    '64:ff9b::a9fe:a9fe',
    '2002:7f00:1::',
    '2001:0:4136:e378:8000:63bf:3fff:fdd2',
    'fc00::1',
    'fd12:3456::1',
    'fe80::1',
    'ff02::1',
    'not-an-address',
  ];
  for (const a of refusedAddresses) assert.equal(addressAllowed(a), false, a);
  for (const a of ['93.184.215.14', '8.8.8.8', '172.32.0.1', '2606:4700::6810:84e5', '1.1.1.1'])
    assert.equal(addressAllowed(a), true, a);
});

test('runConfinedCommand rejects an invalid allowlist with its code, before anything starts', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'confined-allowlist-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const seen = [];
  const listener = (m) => seen.push(m);
  diagnostics.subscribe(COMMAND_CHANNEL, listener);
  t.after(() => diagnostics.unsubscribe(COMMAND_CHANNEL, listener));
  const base = { command: '/bin/true', cwd: dir, mounts: [{ path: dir, mode: 'ro' }] };
  for (const [allowlist, code] of [
    [['example.test'], ALLOWLIST_CODES.portMissing],
    [['*.example.test:443'], ALLOWLIST_CODES.wildcard],
    [['10.0.0.0/8:443'], ALLOWLIST_CODES.cidr],
    [[], ALLOWLIST_CODES.empty],
  ]) {
    await assert.rejects(runConfinedCommand({ ...base, network: { allowlist } }), (err) => {
      assert.ok(err instanceof ConfinementError);
      assert.equal(err.code, code);
      return true;
    });
  }
  for (const network of [{ allowlist: ['a.test:1'], onDenied: 1 }, { allowlist: ['a.test:1'], forwarderPath: 'rel' }, {}])
    await assert.rejects(runConfinedCommand({ ...base, network }), { code: 'confinement.option-invalid' });
  assert.deepEqual(seen, []);
});
