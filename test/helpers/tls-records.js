// Hand-made TLS records for test/egress.test.js: ClientHellos and ServerHellos with exactly the
// fields a test needs (names, hidden names, a HelloRetryRequest), framed into records.
const u16 = (n) => Buffer.from([n >> 8, n & 0xff]);
const vec16 = (b) => Buffer.concat([u16(b.length), b]);
const vec8 = (b) => Buffer.concat([Buffer.from([b.length]), b]);

export function extension(type, data) {
  return Buffer.concat([u16(type), vec16(data)]);
}

/** server_name extension data with the given names (each a host_name entry). */
export function serverNameData(names) {
  return vec16(Buffer.concat(names.map((n) => Buffer.concat([Buffer.from([0]), vec16(Buffer.from(n, 'latin1'))]))));
}

/** A ClientHello handshake message: { names (default none), extensions (more, raw) }. */
export function clientHello({ names = [], extensions = [], rawExtensions = null } = {}) {
  const exts = [...(names.length ? [extension(0, serverNameData(names))] : []), ...extensions];
  const body = Buffer.concat([
    u16(0x0303),
    Buffer.alloc(32, 7),
    vec8(Buffer.alloc(0)),
    vec16(u16(0x1301)),
    vec8(Buffer.from([0])),
    rawExtensions ?? vec16(Buffer.concat(exts)),
  ]);
  return handshake(1, body);
}

/** A ServerHello (TLS 1.3 when tls13); a HelloRetryRequest when retry. */
export function serverHello({ tls13 = true, retry = false } = {}) {
  const random = retry ? Buffer.from('cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c', 'hex') : Buffer.alloc(32, 9);
  const exts = tls13 ? extension(0x002b, u16(0x0304)) : Buffer.alloc(0);
  const body = Buffer.concat([u16(0x0303), random, vec8(Buffer.alloc(0)), u16(0x1301), Buffer.from([0]), vec16(exts)]);
  return handshake(2, body);
}

export function handshake(type, body) {
  return Buffer.concat([Buffer.from([type, body.length >> 16, (body.length >> 8) & 0xff, body.length & 0xff]), body]);
}

/** Frames bytes as records of `type` (0x16 handshake), at most `size` bytes each. */
export function records(bytes, { type = 0x16, size = 16384 } = {}) {
  const out = [];
  for (let at = 0; at < bytes.length || at === 0; at += size) {
    const part = bytes.subarray(at, at + size);
    out.push(Buffer.from([type, 3, 1]), u16(part.length), part);
    if (bytes.length === 0) break;
  }
  return Buffer.concat(out);
}

export const changeCipherSpec = () => records(Buffer.from([1]), { type: 0x14 });
