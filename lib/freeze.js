// Deep freezing of results. Buffers (stdout/stderr) stay unfrozen, as the spec says:
// typed arrays cannot be frozen and their bytes belong to the caller.

export function deepFreeze(value) {
  if (value === null || typeof value !== 'object' || Object.isFrozen(value)) return value;
  if (ArrayBuffer.isView(value)) return value;
  for (const key of Reflect.ownKeys(value)) deepFreeze(value[key]);
  return Object.freeze(value);
}
