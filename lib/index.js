// Everything: the executor API and the command runner.
export * from './confined-executor.js';
export * from './confinement.js';
// Snapshots from a directory or a git tree (not in the spec: how a newcomer builds snapshots).
export { snapshotFromDirectory, snapshotFromGitTree } from './snapshot-tree.js';
