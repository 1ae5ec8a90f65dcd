// Reading caller-supplied objects for validation: own data properties only, each read once.
//
// A value is read through its property descriptor, once: an accessor would run caller code
// and could answer differently on a second read, so it is refused rather than called. The
// descriptors come from Reflect.getOwnPropertyDescriptor, so a Proxy is read through exactly
// one getOwnPropertyDescriptor trap per field (and one ownKeys trap per object), never `get`.
//
// Every reflective operation on a caller's value goes through `reflect`: a Proxy trap that
// throws (or a revoked Proxy) makes the value unreadable, which is an invalid value, so it
// becomes a TypeError with the caller's prefix (the original error as `cause`, unread).

const { apply } = Reflect;
const { hasOwn } = Object;
const Reflection = Object.freeze({
  isArray: Array.isArray,
  getPrototypeOf: Reflect.getPrototypeOf,
  ownKeys: Reflect.ownKeys,
  getOwnPropertyDescriptor: Reflect.getOwnPropertyDescriptor,
});
const ObjectPrototype = Object.prototype;
const ArrayPrototype = Array.prototype;

function reflect(where, operation, ...args) {
  try {
    return apply(operation, undefined, args);
  } catch (error) {
    throw new TypeError(`${where} cannot be read`, { cause: error });
  }
}

const isArray = (value, where) => reflect(where, Reflection.isArray, value);
const getPrototypeOf = (value, where) => reflect(where, Reflection.getPrototypeOf, value);
const ownKeys = (value, where) => reflect(where, Reflection.ownKeys, value);
const getOwnPropertyDescriptor = (value, key, where) =>
  reflect(where, Reflection.getOwnPropertyDescriptor, value, key);

function describeKey(key) {
  return typeof key === 'symbol' ? key.toString() : JSON.stringify(key);
}

/** The value of one own data property (descriptor read once); throws for an accessor. */
function readOwnData(object, key, where) {
  const descriptor = getOwnPropertyDescriptor(object, key, where);
  if (descriptor === undefined) throw new TypeError(`${where} is missing`);
  if (!hasOwn(descriptor, 'value')) throw new TypeError(`${where} is an accessor property`);
  return descriptor.value;
}

/**
 * Reads a plain object (prototype Object.prototype or null) whose own keys are among
 * `allowed` and include every key of `required`. Returns a null-prototype object holding
 * the values read. `where` names the object in messages (and starts them); a field's
 * messages start with `fieldPrefix` and the key (by default `where` and a dot).
 */
export function readRecord(value, where, allowed, required, fieldPrefix = `${where}.`) {
  if (value === null || typeof value !== 'object' || isArray(value, where)) {
    throw new TypeError(`${where} must be a plain object`);
  }
  const prototype = getPrototypeOf(value, where);
  if (prototype !== ObjectPrototype && prototype !== null) {
    throw new TypeError(`${where} must be a plain object`);
  }
  const record = { __proto__: null };
  for (const key of ownKeys(value, where)) {
    if (typeof key !== 'string' || !allowed.includes(key)) {
      throw new TypeError(`${where} has an unexpected key ${describeKey(key)}`);
    }
    record[key] = readOwnData(value, key, `${fieldPrefix}${key}`);
  }
  for (const key of required) {
    if (!hasOwn(record, key)) throw new TypeError(`${fieldPrefix}${key} is missing`);
  }
  return record;
}

function isIndex(key, length) {
  if (typeof key !== 'string') return false;
  const n = Number(key);
  return Number.isInteger(n) && n >= 0 && n < length && String(n) === key;
}

/**
 * Reads a plain array (prototype Array.prototype, no holes, no keys but its indices and
 * `length`, elements own data properties). Returns a new array of its elements. When the
 * array is longer than `readLimit`, only the first `readLimit` elements are read and its keys
 * are not checked: the caller refuses such an array anyway, and reading no further bounds the
 * work a huge array can cause.
 */
export function readArray(value, where, readLimit) {
  if (!isArray(value, where) || getPrototypeOf(value, where) !== ArrayPrototype) {
    throw new TypeError(`${where} must be a plain array`);
  }
  const length = readOwnData(value, 'length', `${where}.length`);
  // Only a Proxy can report another length than an array's own.
  if (!Number.isSafeInteger(length) || length < 0) {
    throw new TypeError(`${where}.length is not a valid array length`);
  }
  const count = Math.min(length, readLimit);
  if (length <= readLimit) {
    for (const key of ownKeys(value, where)) {
      if (key !== 'length' && !isIndex(key, length)) {
        throw new TypeError(`${where} has an unexpected key ${describeKey(key)}`);
      }
    }
  }
  const elements = [];
  for (let i = 0; i < count; i++) {
    const descriptor = getOwnPropertyDescriptor(value, String(i), `${where}[${i}]`);
    if (descriptor === undefined) throw new TypeError(`${where}[${i}] is a hole`);
    if (!hasOwn(descriptor, 'value')) throw new TypeError(`${where}[${i}] is an accessor property`);
    elements.push(descriptor.value);
  }
  return elements;
}
