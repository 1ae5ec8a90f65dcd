// The executor's confinement profile: everything that decides what confines a run, hashed into
// confinedProfile().digest. Binaries (bwrap, the stage, node) belong to the runtime digest;
// policy and constants belong here (design.md "Clarifications").
import { createHash } from 'node:crypto';
import { BWRAP_TEMPLATE } from './bwrap.js';
import { CONFINED_ENVIRONMENT_KEYS, CONFINED_PROFILE, GO_BYTE, REFUSAL_EXIT_CODE } from './constants.js';
import { deepFreeze } from './freeze.js';
import { darwinProfile } from './darwin/profile-identity.js';
import { BWRAP_CANDIDATES, bwrapPath, stagePath } from './host.js';
import { native, helperPath } from './native.js';

/** The admission record the preload writes on fd 3. */
export const ADMISSION_RECORD = 'sf-confined/1 admitted\n';

/**
 * The preload node runs (--require) before the program's entry. It proves one sandbox effect
 * (the canary, a host file outside every bind, is unreadable), writes the admission record,
 * closes the control channel so the program can never write or reopen it, then blocks on
 * stdin for the go byte, which the host sends only after checking the measured limits. Any
 * refusal exits REFUSAL_EXIT_CODE before the entry loads. @@CANARY@@ is replaced by a JSON
 * string literal.
 *
 * A root caller's canary proves little on its own: it is unreadable to the sandbox uid by
 * permissions (the 0700 executor root) and hidden under the launcher's staging /tmp. So the
 * preload also requires @@HOST_TOOL@@ to be absent: the bwrap binary, a world-readable host
 * file outside /tmp that is never bound into the sandbox; seeing it means the host's files are
 * visible. Worker threads inherit --require and run the preload again: there it does
 * nothing (the control channel is long closed and stdin belongs to the program).
 */
export const PRELOAD_TEMPLATE = `'use strict';
if (require('node:worker_threads').isMainThread) {
  const fs = require('node:fs');
  let unreadable = false;
  try {
    fs.readFileSync(@@CANARY@@);
  } catch (error) {
    unreadable = error.code === 'ENOENT' || error.code === 'EACCES' || error.code === 'EPERM';
  }
  if (!unreadable) process.exit(${REFUSAL_EXIT_CODE});
  let absent = false;
  try {
    fs.statSync(@@HOST_TOOL@@);
  } catch (error) {
    absent = error.code === 'ENOENT';
  }
  if (!absent) process.exit(${REFUSAL_EXIT_CODE});
  fs.writeSync(3, ${JSON.stringify(ADMISSION_RECORD)});
  fs.closeSync(3);
  const go = Buffer.alloc(1);
  let n = 0;
  for (;;) {
    try {
      n = fs.readSync(0, go, 0, 1, null);
      break;
    } catch (error) {
      if (error.code !== 'EAGAIN' && error.code !== 'EINTR') process.exit(${REFUSAL_EXIT_CODE});
    }
  }
  if (n !== 1 || go[0] !== ${GO_BYTE}) process.exit(${REFUSAL_EXIT_CODE});
}
`;

export function instantiatePreload(template, canary, hostTool) {
  return template.replace('@@CANARY@@', JSON.stringify(canary)).replace('@@HOST_TOOL@@', JSON.stringify(hostTool));
}

/**
 * Tool paths of the profile: what the host execs by absolute (real) path. The same resolution
 * as lib/host.js, so the profile names exactly the files the runtime pins; where a tool is
 * missing the first candidate is named (and run() refuses with unsupported-host).
 */
export function toolPaths() {
  return { bwrap: bwrapPath() ?? BWRAP_CANDIDATES[0], stage: stagePath() ?? helperPath('stage') };
}

let cachedFilter = null;
/** The executor's seccomp program (BPF bytes), built once per process. */
export function executorFilter() {
  if (!cachedFilter) cachedFilter = native.seccompFilter('executor');
  return cachedFilter;
}

/** The profile's parts. Tests patch single parts (lib/testing.js) to prove each is covered. */
export function profileParts() {
  return {
    name: CONFINED_PROFILE,
    bwrapTemplate: BWRAP_TEMPLATE,
    seccomp: executorFilter().toString('base64'),
    preload: PRELOAD_TEMPLATE,
    tools: toolPaths(),
    environmentKeys: [...CONFINED_ENVIRONMENT_KEYS],
  };
}

/** sha256 over a canonical JSON of the parts (keys in a fixed order). */
export function profileDigest(parts) {
  const canonical = JSON.stringify([
    'confined-profile/1',
    parts.name,
    parts.bwrapTemplate,
    parts.seccomp,
    parts.preload,
    [parts.tools.bwrap, parts.tools.stage],
    parts.environmentKeys,
  ]);
  return 'sha256:' + createHash('sha256').update(canonical).digest('hex');
}

// The active profile. Production code never changes it; lib/testing.js (not exported by the
// package) can patch it to prove that broken profiles never run a program.
let active = null;

export function activeProfile() {
  // macOS: the Seatbelt profile's parts (lib/darwin/profile-identity.js); same { parts,
  // digest, patched } shape, parts.name is its CONFINED_PROFILE.
  if (!active && process.platform === 'darwin') active = darwinProfile();
  if (!active) {
    const parts = profileParts();
    active = deepFreeze({ parts, digest: profileDigest(parts), patched: false });
  }
  return active;
}

export function setActiveProfileForTesting(patch) {
  if (patch === null) {
    active = null;
    return;
  }
  const parts = { ...profileParts(), ...patch.parts };
  // A patch that rewrites the argv, the filter or the mounts changes what confines a run, so
  // it changes the digest too (its source text is hashed): a pin of the production profile
  // never matches a patched one.
  const rewrites = ['argv', 'filter', 'mounts'].filter((k) => patch[k]).map((k) => `${k}:${patch[k]}`);
  const base = profileDigest(parts);
  const digest = rewrites.length
    ? 'sha256:' + createHash('sha256').update(JSON.stringify(['confined-profile-patched/1', base, rewrites])).digest('hex')
    : base;
  active = { parts, digest, patched: true, patch };
}

export function confinedProfile() {
  const { parts, digest } = activeProfile();
  return deepFreeze({ name: parts.name, digest });
}
