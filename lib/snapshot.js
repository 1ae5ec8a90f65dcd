// snapshotDigest and the snapshot copy taken by run() validation.
//
// The snapshot rules (path grammar, limits, duplicates, clashes, content type, total size) and
// the digest live in native/snapshot.c only; this module reads the caller's values, hands them
// to the addon and turns its reason into the TypeError's message.
import { MAX_SNAPSHOT_BYTES, MAX_SNAPSHOT_FILES } from './constants.js';
import { native } from './native.js';
import { readArray, readRecord } from './read.js';

const SNAPSHOT_PREFIX = 'invalid snapshot: ';

// Captured at load, so that copying bytes runs no code a caller could have replaced
// (a subclass's `length` getter, a patched Function.prototype.call, species constructors).
const { apply } = Reflect;
const { freeze } = Object;
const TypedArrayPrototype = Object.getPrototypeOf(Uint8Array.prototype);
const typedArrayLength = Object.getOwnPropertyDescriptor(TypedArrayPrototype, 'length').get;
const typedArraySet = TypedArrayPrototype.set;

/**
 * Copies the bytes the (validated) Uint8Arrays view now into one new buffer, and returns one
 * view of it per content: one allocation however many files there are.
 */
function copyContents(contents) {
  const lengths = contents.map((content) => apply(typedArrayLength, content, []));
  let total = 0;
  for (const length of lengths) total += length;
  const block = new ArrayBuffer(total);
  const copies = [];
  let offset = 0;
  for (let i = 0; i < contents.length; i++) {
    const copy = new Uint8Array(block, offset, lengths[i]);
    apply(typedArraySet, copy, [contents[i]]);
    copies.push(copy);
    offset += lengths[i];
  }
  return copies;
}

/** Calls the addon; a rule violation becomes a TypeError whose message starts with prefix. */
function callNative(fn, paths, contents, prefix) {
  try {
    return fn(paths, contents, MAX_SNAPSHOT_BYTES);
  } catch (error) {
    if (error instanceof TypeError) throw new TypeError(prefix + error.message);
    throw error;
  }
}

/**
 * The snapshot digest of files: `sha256:` + hex of SHA-256 over `sf-confined-snapshot/1\n` and
 * one `path\tsize\tsha256hex\n` line per file in byte order of the paths. Reads `files.length`,
 * each element and each element's `path` and `content` once. Throws a TypeError starting
 * `invalid snapshot: ` for anything a snapshot cannot hold.
 * @param {readonly {path: string, content: Uint8Array}[]} files
 * @returns {string}
 */
export function snapshotDigest(files) {
  if (!Array.isArray(files)) throw new TypeError(`${SNAPSHOT_PREFIX}files must be an array`);
  // One entry past the limit is enough for the addon to refuse; read no further.
  const length = Math.min(files.length, MAX_SNAPSHOT_FILES + 1);
  const paths = [];
  const contents = [];
  for (let i = 0; i < length; i++) {
    const file = files[i];
    if (file === null || typeof file !== 'object') {
      throw new TypeError(`${SNAPSHOT_PREFIX}files[${i}] is not an object`);
    }
    paths.push(file.path);
    contents.push(file.content);
  }
  return callNative(native.snapshotDigest, paths, contents, SNAPSHOT_PREFIX);
}

/**
 * Reads, validates and copies a snapshot for run(): every level must be own data properties
 * only (no accessors, no extra keys; arrays plain and without holes, elements plain objects
 * with exactly `path` and `content`), each read once. The contents are copied (into views of
 * one new ArrayBuffer) before they are hashed, so a caller changing its buffers afterwards
 * changes nothing here.
 *
 * `label` is the message prefix the errors start with, placed before `files`: for example
 * 'invalid confined run request: program.' gives 'invalid confined run request:
 * program.files[2] "a": path is empty'.
 * @returns {Readonly<{files: readonly Readonly<{path: string, content: Uint8Array}>[],
 *   digest: string, totalBytes: number}>}
 */
export function copySnapshot(files, label) {
  const where = `${label}files`;
  // One entry past the limit is enough for the addon to refuse; read no further.
  const elements = readArray(files, where, MAX_SNAPSHOT_FILES + 1);
  const paths = [];
  const contents = [];
  for (let i = 0; i < elements.length; i++) {
    const file = readRecord(
      elements[i],
      `${where}[${i}]`,
      ['path', 'content'],
      ['path', 'content'],
    );
    paths.push(file.path);
    contents.push(file.content);
  }
  // Refuse before copying, so an oversized snapshot is never duplicated in memory...
  callNative(native.snapshotValidate, paths, contents, label);
  const copies = copyContents(contents);
  // ...and hash the copies: they, not the caller's buffers, are what runs.
  const digest = callNative(native.snapshotDigest, paths, copies, label);
  let totalBytes = 0;
  const out = [];
  for (let i = 0; i < copies.length; i++) {
    totalBytes += copies[i].length;
    out.push(freeze({ path: paths[i], content: copies[i] }));
  }
  return freeze({ files: freeze(out), digest, totalBytes });
}
