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

/** The admission record the stage's gate writes on fd 3 (native/exe/stage.c ADMISSION_RECORD). */
export const ADMISSION_RECORD = 'sf-confined/1 admitted\n';

/**
 * The admission gate. On Linux it is not a node preload: the stage's child (native/exe/stage.c)
 * runs it in the process that becomes the program, after its limits are set and reported and
 * before no_new_privs, the seccomp filter and execve, so nothing of node (not its start-up,
 * not a worker thread) runs before go. It proves one sandbox effect (the canary, a host file
 * outside every bind, cannot be opened), requires the host's bwrap (a world-readable host file
 * outside /tmp that is never bound) to be absent, writes the admission record, closes the
 * control channel and blocks on stdin for the go byte; any refusal exits REFUSAL_EXIT_CODE.
 * The behaviour is compiled into the stage, which the runtime digest pins; this description,
 * the protocol the host side speaks, is part of the profile digest, and the two paths are
 * stage arguments, hashed into identities.profile.instantiated.
 *
 * A root caller's canary proves little on its own (it is unreadable to the sandbox uid by
 * permissions, and hidden under the launcher's staging /tmp): hence the host tool.
 */
export const GATE = Object.freeze({
  where: 'confined-stage child: after setrlimit and the limit report, before no_new_privs, seccomp and execve',
  canary: 'open(O_RDONLY) must fail with ENOENT, EACCES or EPERM',
  hostTool: 'stat of the host bwrap must fail with ENOENT',
  record: ADMISSION_RECORD,
  goByte: GO_BYTE,
  refusal: REFUSAL_EXIT_CODE,
});

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
    gate: JSON.stringify(GATE),
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
    parts.gate,
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
