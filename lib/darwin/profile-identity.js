// The executor's confinement profile on macOS: the parts that decide what confines a run,
// and their digest (confinedProfile().digest on darwin). lib/profile.js dispatches here by
// platform; nothing in this file depends on the platform it runs on, so the parts and the
// digest are computed and tested on Linux too.
//
// Parts (darwinProfileParts()):
//   name             'confined-darwin-seatbelt/1' (CONFINED_PROFILE on darwin)
//   seatbeltTemplate the executor profile's rule text (constant: every path is a parameter)
//   seatbeltReference the `instantiated` digest of the reference executor profile
//                    (lib/darwin/profile.js referenceExecutorProfile): it covers the text and
//                    the SYSTEM_* and DEV_* parameter values, which are policy but travel as
//                    parameters, so a change to the system path table changes the digest
//   launchScript     the dash launch script (lib/darwin/launch.js LAUNCH_SCRIPT)
//   preload          DARWIN_PRELOAD_TEMPLATE (below), before the canary is filled in
//   tools            { dash, env, sandboxExec }: absolute paths (lib/darwin/launch.js TOOL_PATHS)
//   environmentKeys  CONFINED_ENVIRONMENT_KEYS
//
// digest = 'sha256:' + hex SHA-256 of the UTF-8 bytes of JSON.stringify(
//   ['confined-profile/1', name, seatbeltTemplate, seatbeltReference, launchScript, preload,
//    [tools.dash, tools.env, tools.sandboxExec], environmentKeys])
import { createHash } from 'node:crypto';
import { CONFINED_ENVIRONMENT_KEYS, GO_BYTE, REFUSAL_EXIT_CODE } from '../constants.js';
import { deepFreeze } from '../freeze.js';
import { LAUNCH_SCRIPT, TOOL_PATHS } from './launch.js';
import { referenceExecutorProfile } from './profile.js';

/** The profile name on darwin (lib/constants.js CONFINED_PROFILE when process.platform is darwin). */
export const DARWIN_PROFILE_NAME = 'confined-darwin-seatbelt/1';

/** The admission record; equal to lib/profile.js ADMISSION_RECORD (tested), written here
 * rather than imported so that lib/profile.js can import this module without a cycle. */
export const DARWIN_ADMISSION_RECORD = 'sf-confined/1 admitted\n';

/**
 * The preload on macOS, an ES module passed as `--import data:text/javascript,<text>`: the
 * Seatbelt profile lets node read only the runtime, the system paths and the two snapshot
 * directories, so the preload cannot be a file of the namespace (launch/ is not readable).
 * sandbox-exec execs node in place, so unlike Linux (where the stage runs the gate before the
 * exec, lib/profile.js GATE) the gate runs inside node: prove the canary is unreadable, write the admission record on fd 3, close fd 3, block on stdin for the go byte;
 * any refusal exits REFUSAL_EXIT_CODE before the entry loads; nothing in worker threads
 * (they inherit --import). @@CANARY@@ is replaced by a JSON string literal.
 */
export const DARWIN_PRELOAD_TEMPLATE = `import { closeSync, readFileSync, readSync, writeSync } from 'node:fs';
import { isMainThread } from 'node:worker_threads';
if (isMainThread) {
  let unreadable = false;
  try {
    readFileSync(@@CANARY@@);
  } catch (error) {
    unreadable = error.code === 'ENOENT' || error.code === 'EACCES' || error.code === 'EPERM';
  }
  if (!unreadable) process.exit(${REFUSAL_EXIT_CODE});
  writeSync(3, ${JSON.stringify(DARWIN_ADMISSION_RECORD)});
  closeSync(3);
  const go = Buffer.alloc(1);
  let n = 0;
  for (;;) {
    try {
      n = readSync(0, go, 0, 1, null);
      break;
    } catch (error) {
      if (error.code !== 'EAGAIN' && error.code !== 'EINTR') process.exit(${REFUSAL_EXIT_CODE});
    }
  }
  if (n !== 1 || go[0] !== ${GO_BYTE}) process.exit(${REFUSAL_EXIT_CODE});
}
`;

/** The preload text for one run: the canary path filled in as a JSON string literal. */
export function instantiateDarwinPreload(template, canary) {
  if (typeof canary !== 'string' || !canary.startsWith('/')) throw new TypeError('canary must be an absolute path');
  return template.replace('@@CANARY@@', () => JSON.stringify(canary));
}

/** The node argument that loads a preload text: a data: URL module (no file is read). */
export function preloadImportUrl(text) {
  return `data:text/javascript,${encodeURIComponent(text)}`;
}

/**
 * The parts of the darwin profile. `reference` is the reference executor profile
 * ({ ok, text, instantiated }), injectable for tests; by default it is built with the
 * native builder (which compiles and runs on every platform).
 */
export function darwinProfileParts({ reference = referenceExecutorProfile() } = {}) {
  if (!reference?.ok) {
    throw new Error(`the reference Seatbelt profile could not be built: ${reference?.reason ?? 'no result'}`);
  }
  return {
    name: DARWIN_PROFILE_NAME,
    seatbeltTemplate: reference.text,
    seatbeltReference: reference.instantiated,
    launchScript: LAUNCH_SCRIPT,
    preload: DARWIN_PRELOAD_TEMPLATE,
    tools: { dash: TOOL_PATHS.dash, env: TOOL_PATHS.env, sandboxExec: TOOL_PATHS.sandboxExec },
    environmentKeys: [...CONFINED_ENVIRONMENT_KEYS],
  };
}

/** The canonical serialisation the digest covers (see the header comment). */
export function darwinProfileSerialisation(parts) {
  return JSON.stringify([
    'confined-profile/1',
    parts.name,
    parts.seatbeltTemplate,
    parts.seatbeltReference,
    parts.launchScript,
    parts.preload,
    [parts.tools.dash, parts.tools.env, parts.tools.sandboxExec],
    parts.environmentKeys,
  ]);
}

export function darwinProfileDigest(parts) {
  return 'sha256:' + createHash('sha256').update(darwinProfileSerialisation(parts)).digest('hex');
}

/** { parts, digest }, frozen: what lib/profile.js activeProfile() holds on darwin. */
export function darwinProfile(options) {
  const parts = darwinProfileParts(options);
  return deepFreeze({ parts, digest: darwinProfileDigest(parts), patched: false });
}
