// snapshotDigest and snapshot validation (owner: foundation/snapshot). Placeholder.
export function snapshotDigest(files) {
  throw new Error('not implemented');
}
