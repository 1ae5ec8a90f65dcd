// Validation of ConfinedExecutor options and run() requests (spec: "Run" and invariant 1;
// design.md "API decisions"). Everything here throws a TypeError before anything is touched,
// and returns a deeply frozen, normalised copy: the caller's objects are read once and never
// consulted again.
import path from 'node:path';
import { types } from 'node:util';
import {
  DEFAULT_RETAINED,
  MAX_ARGS,
  MAX_CPU_SECONDS,
  MAX_DESCRIPTORS,
  MAX_OUTPUT_BYTES,
  MAX_RETAINED,
  MAX_TIMEOUT_MS,
  MIN_DESCRIPTORS,
} from './constants.js';
import { readArray, readRecord } from './read.js';
import { copySnapshot } from './snapshot.js';

export const OPTIONS_PREFIX = 'invalid confined executor options: ';
export const REQUEST_PREFIX = 'invalid confined run request: ';
export const SIGNAL_MESSAGE = 'signal must be an AbortSignal';

const ROOT_PATTERN = /^\/[A-Za-z0-9._@+/-]*$/;
const DIGEST_PATTERN = /^sha256:[0-9a-f]{64}$/;
const ENTRY_EXTENSIONS = Object.freeze(['.mjs', '.cjs', '.js', '.mts', '.cts', '.ts']);
/** Longest program argument, in UTF-16 code units (String length). */
export const MAX_ARG_CHARS = 4096;

const OPTION_KEYS = Object.freeze(['root', 'maxRetained']);
const REQUEST_KEYS = Object.freeze([
  'runtime',
  'profile',
  'program',
  'input',
  'timeoutMs',
  'maxOutputBytes',
  'cpuSeconds',
  'maxDescriptors',
]);
const PROGRAM_KEYS = Object.freeze(['files', 'digest', 'entry', 'args']);
const INPUT_KEYS = Object.freeze(['files', 'digest']);

const { freeze } = Object;

/** An integer from min to max (with -0 read as 0), or a TypeError starting `prefix + name`. */
function integerIn(value, prefix, name, min, max) {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new TypeError(`${prefix}${name} must be an integer from ${min} to ${max}`);
  }
  return value === 0 ? 0 : value;
}

/**
 * Validates `new ConfinedExecutor(options)`: a plain object with own data properties `root`
 * (absolute, normalised, no trailing /, of A-Z a-z 0-9 . _ @ + - /) and optionally
 * `maxRetained` (an integer from 1 to MAX_RETAINED; absent or undefined means
 * DEFAULT_RETAINED). Returns a frozen `{ root, maxRetained }`; touches nothing on disk.
 */
export function validateExecutorOptions(options) {
  return prefixed(OPTIONS_PREFIX, () => validateOptions(options));
}

function validateOptions(options) {
  const P = OPTIONS_PREFIX;
  const o = readRecord(options, `${P}options`, OPTION_KEYS, ['root'], P);
  const { root } = o;
  if (typeof root !== 'string') throw new TypeError(`${P}root must be a string`);
  if (!ROOT_PATTERN.test(root)) {
    throw new TypeError(`${P}root must be an absolute path of A-Z a-z 0-9 . _ @ + - /`);
  }
  if (root.endsWith('/')) throw new TypeError(`${P}root must not end with /`);
  if (path.posix.normalize(root) !== root) throw new TypeError(`${P}root must be normalised`);
  const maxRetained =
    o.maxRetained === undefined
      ? DEFAULT_RETAINED
      : integerIn(o.maxRetained, P, 'maxRetained', 1, MAX_RETAINED);
  return freeze({ root, maxRetained });
}

function digestString(value, name) {
  if (typeof value !== 'string' || !DIGEST_PATTERN.test(value)) {
    throw new TypeError(
      `${REQUEST_PREFIX}${name} must be a digest string (sha256: and 64 lowercase hex digits)`,
    );
  }
  return value;
}

function readArgs(value) {
  const where = `${REQUEST_PREFIX}program.args`;
  const args = readArray(value, where, MAX_ARGS + 1);
  if (args.length > MAX_ARGS) throw new TypeError(`${where} has more than ${MAX_ARGS} entries`);
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (typeof arg !== 'string') throw new TypeError(`${where}[${i}] must be a string`);
    if (arg.includes('\0')) throw new TypeError(`${where}[${i}] must not contain NUL`);
    if (arg.length > MAX_ARG_CHARS) {
      throw new TypeError(`${where}[${i}] is longer than ${MAX_ARG_CHARS} characters`);
    }
  }
  return freeze(args);
}

// The brand check of a real AbortSignal: its `aborted` getter throws for anything that lacks
// the internal slots, which `instanceof` does not see (Object.create(AbortSignal.prototype), a
// Proxy of a real signal). run() later reads the signal, so only a genuine one is accepted.
const { isProxy } = types;
const abortedGetter = Object.getOwnPropertyDescriptor(AbortSignal.prototype, 'aborted').get;

/**
 * True for a genuine AbortSignal only. A Proxy is refused even around a real signal: node's
 * brand check reads a symbol through it, and its traps would run caller code during the run.
 */
function isAbortSignal(signal) {
  if (signal === null || typeof signal !== 'object' || isProxy(signal)) return false;
  try {
    Reflect.apply(abortedGetter, signal, []);
    return true;
  } catch {
    return false;
  }
}

/**
 * Runs a validation so that every refusal is a TypeError carrying the caller-facing prefix:
 * an engine TypeError thrown while reading a hostile object (a Proxy whose traps break the
 * object invariants, a revoked Proxy) becomes one too, with the original as `cause`.
 */
function prefixed(prefix, validate) {
  try {
    return validate();
  } catch (error) {
    // Host failures (out of memory, OpenSSL) are not the caller's: they stay what they are.
    if (!(error instanceof TypeError)) throw error;
    if (error.message.startsWith(prefix) || error.message === SIGNAL_MESSAGE) throw error;
    throw new TypeError(`${prefix}the value cannot be read`, { cause: error });
  }
}

/** Copies a snapshot and checks its digest against the caller's (a mismatch is invalid). */
function readSnapshot(files, digest, name) {
  const snapshot = copySnapshot(files, `${REQUEST_PREFIX}${name}.`);
  if (snapshot.digest !== digest) {
    throw new TypeError(
      `${REQUEST_PREFIX}${name}.digest does not match ${name}.files (they hash to ${snapshot.digest})`,
    );
  }
  return snapshot;
}

/**
 * Validates run(request, signal) (invariant 1): the request's fields are read once from own
 * data properties (accessors and extra keys refused at every level), the snapshots' contents
 * are copied and their digests recomputed, and then the signal must be undefined or an
 * AbortSignal. Returns the deeply frozen request with the copied snapshots:
 * `{ runtime, profile, program: { files, digest, entry, args }, input: { files, digest },
 *   timeoutMs, maxOutputBytes, cpuSeconds, maxDescriptors }`.
 */
export function validateRunRequest(request, signal) {
  return prefixed(REQUEST_PREFIX, () => validateRequest(request, signal));
}

function validateRequest(request, signal) {
  const P = REQUEST_PREFIX;
  const r = readRecord(request, `${P}request`, REQUEST_KEYS, REQUEST_KEYS, P);
  const program = readRecord(r.program, `${P}program`, PROGRAM_KEYS, PROGRAM_KEYS);
  const input = readRecord(r.input, `${P}input`, INPUT_KEYS, INPUT_KEYS);

  // The cheap checks first: nothing is copied for a request they refuse.
  const runtime = digestString(r.runtime, 'runtime');
  const profile = digestString(r.profile, 'profile');
  const timeoutMs = integerIn(r.timeoutMs, P, 'timeoutMs', 1, MAX_TIMEOUT_MS);
  const maxOutputBytes = integerIn(r.maxOutputBytes, P, 'maxOutputBytes', 0, MAX_OUTPUT_BYTES);
  const cpuSeconds = integerIn(r.cpuSeconds, P, 'cpuSeconds', 1, MAX_CPU_SECONDS);
  const maxDescriptors = integerIn(
    r.maxDescriptors,
    P,
    'maxDescriptors',
    MIN_DESCRIPTORS,
    MAX_DESCRIPTORS,
  );
  const programDigest = digestString(program.digest, 'program.digest');
  const inputDigest = digestString(input.digest, 'input.digest');
  const { entry } = program;
  if (typeof entry !== 'string') throw new TypeError(`${P}program.entry must be a string`);
  if (!ENTRY_EXTENSIONS.some((extension) => entry.endsWith(extension))) {
    throw new TypeError(`${P}program.entry must end with ${ENTRY_EXTENSIONS.join(', ')}`);
  }
  const args = readArgs(program.args);

  const programSnapshot = readSnapshot(program.files, programDigest, 'program');
  if (!programSnapshot.files.some((file) => file.path === entry)) {
    const shown = entry.length > 256 ? `${entry.slice(0, 256)}...` : entry;
    throw new TypeError(`${P}program.entry ${JSON.stringify(shown)} is not a program file`);
  }
  const inputSnapshot = readSnapshot(input.files, inputDigest, 'input');

  if (signal !== undefined && !isAbortSignal(signal)) throw new TypeError(SIGNAL_MESSAGE);

  return freeze({
    runtime,
    profile,
    program: freeze({ files: programSnapshot.files, digest: programDigest, entry, args }),
    input: freeze({ files: inputSnapshot.files, digest: inputDigest }),
    timeoutMs,
    maxOutputBytes,
    cpuSeconds,
    maxDescriptors,
  });
}
