// confinedProfile(): { name, digest }, where the digest covers every byte of policy. One test
// per part: changing that part alone changes the digest.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import test from 'node:test';
import { confinedProfile, CONFINED_PROFILE } from '../lib/confined-executor.js';
import { BWRAP_POSTURE, BWRAP_TEMPLATE } from '../lib/bwrap.js';
import { native } from '../lib/native.js';
import fs from 'node:fs';
import { GO_BYTE, REFUSAL_EXIT_CODE } from '../lib/constants.js';
import { ADMISSION_RECORD, activeProfile, executorFilter, GATE, profileDigest, profileParts } from '../lib/profile.js';
import { withPatchedProfile } from '../lib/testing.js';

const base = profileParts();
const baseDigest = profileDigest(base);

test('confinedProfile() is a frozen { name, digest } of the active profile', () => {
  const p = confinedProfile();
  assert.deepEqual(Object.keys(p).sort(), ['digest', 'name']);
  assert.equal(p.name, CONFINED_PROFILE);
  assert.match(p.digest, /^sha256:[0-9a-f]{64}$/);
  assert.equal(p.digest, baseDigest);
  assert.ok(Object.isFrozen(p));
  // Deterministic: recomputed from fresh parts, the same digest.
  assert.equal(profileDigest(profileParts()), baseDigest);
});

test('the digest is sha256 over the documented canonical serialisation', () => {
  const canonical = JSON.stringify([
    'confined-profile/1',
    base.name,
    base.bwrapTemplate,
    base.seccomp,
    base.gate,
    [base.tools.bwrap, base.tools.stage],
    base.environmentKeys,
  ]);
  const expected = 'sha256:' + createHash('sha256').update(canonical).digest('hex');
  assert.equal(baseDigest, expected);
});

function changed(patch) {
  const parts = { ...base, ...patch };
  const digest = profileDigest(parts);
  assert.notEqual(digest, baseDigest);
  return digest;
}

test('part: the profile name', () => {
  changed({ name: `${base.name}x` });
});

test('part: the bwrap argument template (posture flags and steps)', () => {
  changed({ bwrapTemplate: { ...BWRAP_TEMPLATE, posture: BWRAP_POSTURE.filter((a) => a !== '--unshare-net') } });
  changed({ bwrapTemplate: { ...BWRAP_TEMPLATE, executor: [...BWRAP_TEMPLATE.executor, '--bind / /'] } });
});

test('part: the seccomp policy (the BPF program bytes)', () => {
  const bpf = Buffer.from(base.seccomp, 'base64');
  assert.ok(bpf.length >= 8 && bpf.length % 8 === 0, 'a whole number of sock_filter entries');
  const flipped = Buffer.from(bpf);
  flipped[flipped.length - 4] ^= 1;
  changed({ seccomp: flipped.toString('base64') });
  // The command policy is a different program.
  assert.notEqual(native.seccompFilter('command').toString('base64'), base.seccomp);
  assert.equal(executorFilter().toString('base64'), base.seccomp);
});

test('part: the admission gate (its protocol as the host speaks it)', () => {
  assert.equal(base.gate, JSON.stringify(GATE));
  changed({ gate: JSON.stringify({ ...GATE, goByte: GO_BYTE + 1 }) });
  changed({ gate: JSON.stringify({ ...GATE, record: 'sf-confined/2 admitted\n' }) });
  changed({ gate: JSON.stringify({ ...GATE, canary: 'open(O_RDONLY) must fail with ENOENT' }) });
});

test('the stage (native/exe/stage.c) and the host agree on the gate protocol', () => {
  // The gate is compiled into the stage; the host parses what it writes. One value each side.
  const source = fs.readFileSync(new URL('../native/exe/stage.c', import.meta.url), 'utf8');
  const define = (name) => {
    const m = new RegExp(`^#define ${name} (.+)$`, 'm').exec(source);
    assert.ok(m, `stage.c defines ${name}`);
    return m[1];
  };
  assert.equal(JSON.parse(define('ADMISSION_RECORD')), ADMISSION_RECORD);
  assert.equal(Number(define('GO_BYTE')), GO_BYTE);
  assert.equal(Number(define('REFUSAL')), REFUSAL_EXIT_CODE);
  assert.equal(GATE.record, ADMISSION_RECORD);
  assert.equal(GATE.goByte, GO_BYTE);
  assert.equal(GATE.refusal, REFUSAL_EXIT_CODE);
});

test('part: the tool paths (bwrap and the stage)', () => {
  changed({ tools: { ...base.tools, bwrap: '/usr/local/bin/bwrap' } });
  changed({ tools: { ...base.tools, stage: '/opt/confined-stage' } });
});

test('part: the environment names', () => {
  changed({ environmentKeys: [...base.environmentKeys, 'PATH'] });
  changed({ environmentKeys: base.environmentKeys.slice(1) });
});

test('a patched profile (test seam) has its own digest and confinedProfile() reports it', async () => {
  await withPatchedProfile({ parts: { gate: `${base.gate}\n` } }, () => {
    const patched = confinedProfile().digest;
    assert.notEqual(patched, baseDigest);
    assert.equal(activeProfile().patched, true);
  });
  assert.equal(confinedProfile().digest, baseDigest);
  assert.equal(activeProfile().patched, false);
});
