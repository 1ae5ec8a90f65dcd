// Snapshots from trees: a directory on disk, or a commit's tree in a git repository.
//
// The snapshot rules (path grammar, limits, duplicates, clashes) live in native/snapshot.c
// only. This module walks a tree, checks each path it meets with snapshotDigest (one path at a
// time, so that the walk stops at the first path the rules refuse, before reading what lies
// below it) and checks the whole set with snapshotDigest at the end. What it adds is what a
// tree has and a snapshot cannot: symbolic links, special files and git submodules.
import { spawnSync } from 'node:child_process';
import { closeSync, constants, fstatSync, lstatSync, openSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { MAX_SNAPSHOT_BYTES, MAX_SNAPSHOT_FILES } from './constants.js';
import { snapshotDigest } from './snapshot.js';

/** Names skipped at any depth when `options.ignore` is not given. */
export const DEFAULT_IGNORE = Object.freeze(['.git']);

const EMPTY = new Uint8Array(0);
const NATIVE_PREFIX = 'invalid snapshot: ';

/** The rule's reason from a snapshotDigest message (`files[i] "path": reason`). */
function ruleReason(message) {
  const text = message.startsWith(NATIVE_PREFIX) ? message.slice(NATIVE_PREFIX.length) : message;
  // The native message quotes the path with `"` and `\` escaped, so the first `": ` ends it.
  const end = text.indexOf('": ');
  return end >= 0 && text.startsWith('files[') ? text.slice(end + 3) : text;
}

/**
 * Refuses, with a TypeError naming `where` and the path, a path the snapshot rules reject
 * (a character outside A-Z a-z 0-9 . _ -, longer than 256 characters, more than 16 segments).
 */
function checkPath(rel, where) {
  try {
    snapshotDigest([{ path: rel, content: EMPTY }]);
  } catch (error) {
    if (!(error instanceof TypeError)) throw error;
    throw new TypeError(`${where}: ${JSON.stringify(rel)}: ${ruleReason(error.message)}`);
  }
}

/** Checks the whole set (case-insensitive duplicates, file/directory clashes, totals). */
function checkAll(files, where) {
  try {
    snapshotDigest(files);
  } catch (error) {
    if (!(error instanceof TypeError)) throw error;
    throw new TypeError(`${where}: ${error.message.slice(NATIVE_PREFIX.length)}`);
  }
}

function byPath(a, b) {
  return a.path < b.path ? -1 : a.path > b.path ? 1 : 0;
}

/** A running count of files and bytes, refused as soon as a limit is passed. */
function budget(where) {
  let files = 0;
  let bytes = 0;
  return (rel, size) => {
    files += 1;
    bytes += size;
    if (files > MAX_SNAPSHOT_FILES)
      throw new TypeError(`${where}: more than ${MAX_SNAPSHOT_FILES} files (at ${JSON.stringify(rel)})`);
    if (bytes > MAX_SNAPSHOT_BYTES)
      throw new TypeError(
        `${where}: contents total more than ${MAX_SNAPSHOT_BYTES} bytes (at ${JSON.stringify(rel)})`,
      );
  };
}

function kindOf(st) {
  if (st.isSymbolicLink()) return 'a symbolic link';
  if (st.isFIFO()) return 'a named pipe (FIFO)';
  if (st.isSocket()) return 'a socket';
  if (st.isCharacterDevice()) return 'a character device';
  if (st.isBlockDevice()) return 'a block device';
  return 'not a regular file or directory';
}

function readOptions(options) {
  if (options === undefined) return { ignore: new Set(DEFAULT_IGNORE) };
  if (options === null || typeof options !== 'object' || Array.isArray(options))
    throw new TypeError('snapshotFromDirectory: options must be an object');
  for (const key of Object.keys(options)) {
    if (key !== 'ignore') throw new TypeError(`snapshotFromDirectory: unknown option ${JSON.stringify(key)}`);
  }
  const { ignore } = options;
  if (ignore === undefined) return { ignore: new Set(DEFAULT_IGNORE) };
  if (!Array.isArray(ignore) || !ignore.every((name) => typeof name === 'string' && name !== ''))
    throw new TypeError('snapshotFromDirectory: options.ignore must be an array of non-empty names');
  for (const name of ignore) {
    if (name.includes('/'))
      throw new TypeError(
        `snapshotFromDirectory: options.ignore entry ${JSON.stringify(name)} is a path; give a name (it matches at any depth)`,
      );
  }
  return { ignore: new Set(ignore) };
}

/** Reads one regular file without following a link or blocking on a FIFO swapped in. */
function readRegular(abs, rel, where) {
  const fd = openSync(abs, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw new TypeError(`${where}: ${JSON.stringify(rel)} is ${kindOf(st)}`);
    const content = readFileSync(fd);
    return new Uint8Array(content.buffer, content.byteOffset, content.length);
  } finally {
    closeSync(fd);
  }
}

/**
 * The regular files under `dir` as a snapshot: one `{ path, content }` per file, `path`
 * relative to `dir` with `/` separators, sorted by path. Directories contribute only the files
 * they hold (an empty directory leaves no trace); file modes, owners and times are not kept.
 *
 * `options.ignore` is a list of names skipped at any depth, with everything below them
 * (default `['.git']`; pass `[]` to keep everything). Throws a TypeError naming `dir` and the
 * relative path for anything a snapshot cannot hold: a symbolic link, a FIFO, socket or device,
 * a path the snapshot rules refuse (a character other than A-Z a-z 0-9 . _ -, longer than 256
 * characters, more than 16 segments, case-insensitive duplicates), more files or bytes than a
 * snapshot holds. Errors reading the tree (ENOENT, EACCES) are thrown as they come.
 * @param {string} dir
 * @param {{ ignore?: readonly string[] }} [options]
 * @returns {{ path: string, content: Uint8Array }[]}
 */
export function snapshotFromDirectory(dir, options) {
  if (typeof dir !== 'string' || dir === '')
    throw new TypeError('snapshotFromDirectory: dir must be a non-empty string');
  const { ignore } = readOptions(options);
  const root = path.resolve(dir);
  const where = `cannot snapshot ${root}`;
  if (!statSync(root).isDirectory()) throw new TypeError(`${where}: not a directory`);
  const count = budget(where);
  const files = [];
  const walk = (absDir, relDir) => {
    const names = readdirSync(absDir).sort();
    for (const name of names) {
      if (ignore.has(name)) continue;
      const rel = relDir === '' ? name : `${relDir}/${name}`;
      // The rules first: a bad name, or a path too long or too deep, stops the walk here.
      checkPath(rel, where);
      const abs = path.join(absDir, name);
      const st = lstatSync(abs);
      if (st.isDirectory()) {
        walk(abs, rel);
      } else if (st.isFile()) {
        count(rel, st.size);
        files.push({ path: rel, content: readRegular(abs, rel, where) });
      } else {
        const hint = st.isSymbolicLink() ? ' (a snapshot holds regular files only; copy the target in or ignore it)' : '';
        throw new TypeError(`${where}: ${JSON.stringify(rel)} is ${kindOf(st)}${hint}`);
      }
    }
  };
  walk(root, '');
  files.sort(byPath);
  checkAll(files, where);
  return files;
}

// ---------------------------------------------------------------------------------------------
// git

/**
 * The environment git runs with: nothing of the caller's (no GIT_DIR, GIT_INDEX_FILE,
 * GIT_OBJECT_DIRECTORY...), no system or global configuration, no replace refs (they would
 * substitute objects), no prompts.
 */
const GIT_ENV = Object.freeze({
  PATH: '/usr/local/bin:/usr/bin:/bin',
  LC_ALL: 'C',
  HOME: '/nonexistent',
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_CONFIG_GLOBAL: '/dev/null',
  GIT_NO_REPLACE_OBJECTS: '1',
  GIT_TERMINAL_PROMPT: '0',
  GIT_OPTIONAL_LOCKS: '0',
});

function git(repoDir, args, where, { input, maxBuffer = 64 * 1024 * 1024 } = {}) {
  const run = spawnSync('git', ['-C', repoDir, ...args], {
    env: GIT_ENV,
    input,
    maxBuffer,
    stdio: ['pipe', 'pipe', 'pipe'],
    windowsHide: true,
  });
  if (run.error) throw new Error(`${where}: git ${args[0]} failed: ${run.error.message}`, { cause: run.error });
  if (run.status !== 0) {
    const stderr = run.stderr.toString('utf8').trim();
    throw new Error(
      `${where}: git ${args[0]} exited ${run.status ?? run.signal}${stderr ? `: ${stderr}` : ''}`,
    );
  }
  return run.stdout;
}

const LS_TREE_LINE = /^([0-7]{6}) ([a-z]+) ([0-9a-f]{40,64}) +(-|\d+)\t([\s\S]*)$/;

/**
 * The files of a commit's tree (or any tree-ish `rev`) in the git repository at `repoDir`, read
 * from the object store without a checkout (`git ls-tree -r -z -l` and `git cat-file --batch`,
 * run with a clean environment). Same shape and rules as {@link snapshotFromDirectory}; file
 * modes (the executable bit) are not kept. Throws a TypeError naming the path for a symbolic
 * link, a submodule or a path the snapshot rules refuse, and an Error carrying git's message
 * when git fails (no repository, unknown revision).
 * @param {string} repoDir
 * @param {string} rev
 * @returns {{ path: string, content: Uint8Array }[]}
 */
export function snapshotFromGitTree(repoDir, rev) {
  if (typeof repoDir !== 'string' || repoDir === '')
    throw new TypeError('snapshotFromGitTree: repoDir must be a non-empty string');
  if (typeof rev !== 'string' || rev === '' || rev.startsWith('-') || /[\0\n\r]/.test(rev))
    throw new TypeError(`snapshotFromGitTree: rev ${JSON.stringify(rev)} is not a revision`);
  const repo = path.resolve(repoDir);
  const where = `cannot snapshot ${rev} of ${repo}`;
  let tree;
  try {
    tree = git(repo, ['rev-parse', '--verify', '--quiet', '--end-of-options', `${rev}^{tree}`], where)
      .toString('latin1')
      .trim();
  } catch (error) {
    // --quiet leaves git silent for an unknown revision; anything else keeps git's message.
    if (/exited 1$/.test(error.message))
      throw new Error(`${where}: no such revision, or it names no tree`, { cause: error });
    throw error;
  }
  if (!/^[0-9a-f]{40,64}$/.test(tree)) throw new Error(`${where}: git rev-parse gave ${JSON.stringify(tree)}`);

  const listing = git(repo, ['ls-tree', '-r', '-z', '-l', '--full-tree', tree], where, {
    maxBuffer: 256 * 1024 * 1024,
  });
  const count = budget(where);
  const entries = [];
  let total = 0;
  for (const record of listing.toString('utf8').split('\0')) {
    if (record === '') continue;
    const m = LS_TREE_LINE.exec(record);
    if (!m) throw new Error(`${where}: unexpected git ls-tree line ${JSON.stringify(record)}`);
    const [, mode, type, oid, size, rel] = m;
    if (mode === '120000') throw new TypeError(`${where}: ${JSON.stringify(rel)} is a symbolic link`);
    if (type === 'commit') throw new TypeError(`${where}: ${JSON.stringify(rel)} is a submodule`);
    if (type !== 'blob' || (mode !== '100644' && mode !== '100755'))
      throw new TypeError(`${where}: ${JSON.stringify(rel)} has git mode ${mode} (${type})`);
    checkPath(rel, where);
    count(rel, Number(size));
    total += Number(size);
    entries.push({ rel, oid, size: Number(size) });
  }
  if (entries.length === 0) return [];

  const input = entries.map((e) => `${e.oid}\n`).join('');
  const out = git(repo, ['cat-file', '--batch'], where, {
    input,
    maxBuffer: total + entries.length * 128 + 1024,
  });
  const files = [];
  let at = 0;
  for (const entry of entries) {
    const eol = out.indexOf(0x0a, at);
    if (eol < 0) throw new Error(`${where}: git cat-file output ended early`);
    const header = out.toString('latin1', at, eol);
    const expected = `${entry.oid} blob ${entry.size}`;
    if (header !== expected)
      throw new Error(`${where}: git cat-file gave ${JSON.stringify(header)} for ${JSON.stringify(entry.rel)}`);
    const start = eol + 1;
    const end = start + entry.size;
    if (end + 1 > out.length || out[end] !== 0x0a) throw new Error(`${where}: git cat-file output is truncated`);
    files.push({ path: entry.rel, content: new Uint8Array(out.buffer, out.byteOffset + start, entry.size) });
    at = end + 1;
  }
  files.sort(byPath);
  checkAll(files, where);
  return files;
}
