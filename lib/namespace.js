// The executor's namespace lifecycle (spec invariants 2, 3, 4 and 12), over the native
// code in native/namespace.c. Everything here is synchronous, so the pre-launch verify can
// sit immediately before a synchronous spawn with no await in between.
//
// Layout: the executor root holds namespaces slot-<n>; each holds program/, input/, home/
// and any further top-level directories the caller names (e.g. canary/). Every function
// returns a frozen result value; nothing here decides what a failure means for a run.
import { native } from './native.js';

const handles = new WeakMap();
const removed = new WeakSet();

/** What materialise created: pass it to verify() and remove(). */
export class NamespaceManifest {
  /** Absolute path of the namespace (the slot). */
  path;
  constructor(handle, path) {
    this.path = path;
    handles.set(this, handle);
    Object.freeze(this);
  }
}

function handleOf(manifest) {
  const handle = handles.get(manifest);
  if (handle === undefined) throw new TypeError('manifest must be a NamespaceManifest');
  return handle;
}

const OK = Object.freeze({ ok: true });

function shaped(result) {
  return result.ok ? OK : Object.freeze({ ok: false, reason: result.reason });
}

/**
 * The root must be absolute, canonical, a directory owned by this user and private
 * (mode & 0o077 == 0). Returns { ok: true } or { ok: false, reason }.
 */
export function checkRoot(root) {
  if (typeof root !== 'string') throw new TypeError('root must be a string');
  return shaped(native.namespaceCheckRoot(root));
}

/** Counts every root entry. Returns { ok: true, count } or { ok: false, reason }. */
export function countEntries(root) {
  if (typeof root !== 'string') throw new TypeError('root must be a string');
  const r = native.namespaceCountEntries(root);
  return Object.freeze(r.ok ? { ok: true, count: r.count } : { ok: false, reason: r.reason });
}

/**
 * Claims the lowest free slot-<n>, n < maxRetained, with an exclusive mkdir. Returns
 * { ok: true, path }, { ok: false, full: true, reason: 'every slot is taken' } or
 * { ok: false, full: false, reason } for any other failure.
 */
export function claimSlot(root, maxRetained) {
  if (typeof root !== 'string') throw new TypeError('root must be a string');
  if (!Number.isSafeInteger(maxRetained) || maxRetained < 1)
    throw new TypeError('maxRetained must be a positive integer');
  const r = native.namespaceClaimSlot(root, maxRetained);
  return Object.freeze(
    r.ok ? { ok: true, path: r.path } : { ok: false, full: r.full, reason: r.reason },
  );
}

const FIXED = ['program', 'input', 'home'];

/**
 * Writes the namespace into a claimed, empty slot. `tree` maps top-level directory names
 * to lists of { path, content } (path relative to that directory); program, input and
 * home are always created, further keys (e.g. canary) add directories. Files get
 * `fileMode` (default 0o600, at most 0o644); directories 0o700.
 * Returns { ok: true, manifest } or { ok: false, reason, manifest }: on failure the
 * manifest records what was created, for remove(). manifest is null only if nothing was.
 */
export function materialise(slot, tree, { fileMode = 0o600 } = {}) {
  if (typeof slot !== 'string') throw new TypeError('slot must be a string');
  if (tree === null || typeof tree !== 'object') throw new TypeError('tree must be an object');
  if (!Number.isInteger(fileMode) || (fileMode & ~0o644) !== 0 || fileMode < 0)
    throw new TypeError('fileMode must grant at most 0o644');
  const names = [...FIXED, ...Object.keys(tree).filter((k) => !FIXED.includes(k))];
  const paths = [];
  const contents = [];
  for (const name of names) {
    const files = Object.hasOwn(tree, name) ? tree[name] : [];
    if (!Array.isArray(files)) throw new TypeError(`tree.${name} must be an array`);
    for (const file of files) {
      if (typeof file?.path !== 'string' || !(file.content instanceof Uint8Array))
        throw new TypeError(`tree.${name} entries must be { path: string, content: Uint8Array }`);
      paths.push(`${name}/${file.path}`);
      contents.push(file.content);
    }
  }
  const r = native.namespaceMaterialise(slot, names, paths, contents, fileMode);
  const manifest = r.manifest === null ? null : new NamespaceManifest(r.manifest, slot);
  return Object.freeze(
    r.ok ? { ok: true, manifest } : { ok: false, reason: r.reason, manifest },
  );
}

/**
 * The pre-launch integrity check (invariant 4). Returns { ok: true } or
 * { ok: false, reason } naming the first entry that differs from the record.
 */
export function verify(manifest) {
  return shaped(native.namespaceVerify(handleOf(manifest)));
}

/**
 * Removes the namespace after re-verifying it (invariant 12). Returns
 * { state: 'removed', durable } or, at the first surprise, the quarantine disposition
 * { state: 'quarantined', path, reason } (what is left stays where it is, slot claimed).
 */
export function remove(manifest) {
  const handle = handleOf(manifest);
  if (removed.has(manifest)) throw new Error(`namespace ${manifest.path} was already removed`);
  const r = native.namespaceRemove(handle);
  if (r.ok) {
    removed.add(manifest);
    return Object.freeze({ state: 'removed', durable: r.durable });
  }
  return quarantine(manifest, r.reason);
}

/** The quarantine disposition. Changes nothing on disk: the namespace keeps its slot. */
export function quarantine(manifest, reason) {
  handleOf(manifest);
  return Object.freeze({ state: 'quarantined', path: manifest.path, reason: String(reason) });
}

/** The recorded entries (diagnostics and tests): path, type, dev, ino, uid, mode, ... */
export function recordedEntries(manifest) {
  return native.namespaceEntries(handleOf(manifest)).map((e) => Object.freeze(e));
}
