// Declarations of the snapshot builders (lib/snapshot-tree.js), exported from the package root
// `confined` only. They are not in the spec: they build the SnapshotFile[] the executor takes.

import type { SnapshotFile } from './confined-executor.js';

/** Options of {@link snapshotFromDirectory}. No other key is accepted. */
export interface SnapshotDirectoryOptions {
  /**
   * Names (not paths) skipped at any depth, with everything below them.
   * Default: `['.git']`. Pass `[]` to keep everything.
   */
  readonly ignore?: readonly string[];
}

/**
 * The regular files under `dir` as a snapshot, sorted by path (`/`-separated, relative).
 * Empty directories, file modes, owners and times are not kept.
 * @throws {TypeError} naming the relative path of what a snapshot cannot hold: a symbolic
 *   link, a FIFO, socket or device, a path the snapshot rules refuse (character, length,
 *   depth, case-insensitive duplicate), more files or bytes than a snapshot holds.
 */
export declare function snapshotFromDirectory(dir: string, options?: SnapshotDirectoryOptions): SnapshotFile[];

/**
 * The files of the tree of `rev` (a commit or any tree-ish) in the repository at `repoDir`,
 * read from the object store without a checkout; git runs with a clean environment.
 * @throws {TypeError} naming the path of a symbolic link, a submodule or a path the snapshot
 *   rules refuse; an Error with git's reason when git fails (no repository, unknown revision).
 */
export declare function snapshotFromGitTree(repoDir: string, rev: string): SnapshotFile[];
