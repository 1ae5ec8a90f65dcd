// describeRuntime and runtime verification (owner: foundation/runtime). Placeholder.
export function describeRuntime() {
  throw new Error('not implemented');
}
