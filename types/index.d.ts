// Declarations of the package root `confined`: the executor API and the command runner.
export * from './confined-executor.js';
export * from './confinement.js';
// Snapshot builders (root only; not in the spec).
export * from './snapshot-tree.js';
