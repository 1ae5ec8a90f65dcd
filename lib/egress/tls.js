// The start of a CONNECT tunnel, read as TLS: the name a ClientHello asks for (SNI) must be the
// allowed host. A shared address (a CDN edge) routes TLS by that name, so without this check a
// tunnel to any allowed name on a CDN could reach every other site behind the same edge.
//
// What is checked: every ClientHello sent in the clear. That is the first one and, in TLS 1.3,
// the second one a HelloRetryRequest asks for (RFC 8446 4.1.2; the server's reply is read to know
// whether one was asked for). A ClientHello must name the host exactly (no name for an IP
// literal target, which SNI cannot carry) and must not hide its name (encrypted_client_hello or
// the older encrypted_server_name). A stream whose first byte is not a TLS handshake record is
// some other protocol, relayed as bytes from the start.
//
// Not checked, by construction: anything encrypted. The HTTP Host inside TLS can still name
// another site; most CDNs refuse a Host that differs from the SNI.

const CHANGE_CIPHER_SPEC = 0x14;
const HANDSHAKE = 0x16;
const CLIENT_HELLO = 1;
const SERVER_HELLO = 2;
const EXT_SERVER_NAME = 0x0000;
const EXT_SUPPORTED_VERSIONS = 0x002b;
const EXT_ECH = 0xfe0d;
const EXT_ESNI = 0xffce;
const TLS13 = 0x0304;
// RFC 8446 4.1.3: a ServerHello with this random is a HelloRetryRequest.
const HRR_RANDOM = Buffer.from('cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c', 'hex');
// A record is at most 2^14 bytes of plaintext (2^14 + 2048 ciphertext); a ClientHello is at most
// a few KiB in practice. Bigger is refused rather than buffered.
const MAX_RECORD = 16384 + 2048;
const MAX_HANDSHAKE = 64 * 1024;

/** A bounds-checked reader over one buffer: every read past the end throws. */
class Cursor {
  constructor(buf) {
    this.buf = buf;
    this.at = 0;
  }
  take(n) {
    if (this.at + n > this.buf.length) throw new RangeError('truncated');
    const out = this.buf.subarray(this.at, this.at + n);
    this.at += n;
    return out;
  }
  u8() {
    return this.take(1)[0];
  }
  u16() {
    return this.take(2).readUInt16BE(0);
  }
  vector(lengthBytes) {
    return new Cursor(this.take(lengthBytes === 1 ? this.u8() : this.u16()));
  }
  done() {
    return this.at === this.buf.length;
  }
}

/** Extensions of a hello, as a Map type -> Buffer; a duplicate or trailing byte throws. */
function extensions(c) {
  const out = new Map();
  if (c.done()) return out; // a hello may end before its extensions (TLS 1.2 and older)
  const list = c.vector(2);
  if (!c.done()) throw new RangeError('bytes after the extensions');
  while (!list.done()) {
    const type = list.u16();
    const data = list.vector(2).buf;
    if (out.has(type)) throw new RangeError('duplicate extension');
    out.set(type, data);
  }
  return out;
}

/**
 * The parts of a ClientHello body that matter here: { name (string or null), hidden }. Throws
 * on anything malformed.
 */
export function parseClientHello(body) {
  const c = new Cursor(body);
  c.take(2 + 32); // legacy_version, random
  if (c.vector(1).buf.length > 32) throw new RangeError('session id');
  const suites = c.vector(2).buf;
  if (suites.length < 2 || suites.length % 2) throw new RangeError('cipher suites');
  if (c.vector(1).buf.length < 1) throw new RangeError('compression methods');
  const ext = extensions(c);
  const hidden = ext.has(EXT_ECH) || ext.has(EXT_ESNI);
  const sni = ext.get(EXT_SERVER_NAME);
  if (sni === undefined) return { name: null, hidden };
  const s = new Cursor(sni);
  const list = s.vector(2);
  if (!s.done()) throw new RangeError('bytes after the server name list');
  // RFC 6066 3: one name of each type; host_name (0) is the only type defined.
  if (list.u8() !== 0) throw new RangeError('server name type');
  const name = list.vector(2).buf;
  if (!list.done()) throw new RangeError('more than one server name');
  if (name.length === 0 || name.some((b) => b < 0x21 || b > 0x7e)) throw new RangeError('server name bytes');
  return { name: name.toString('latin1'), hidden };
}

/** { tls13, retry } of a ServerHello body; throws on anything malformed. */
export function parseServerHello(body) {
  const c = new Cursor(body);
  c.take(2);
  const random = c.take(32);
  c.vector(1);
  c.take(2 + 1); // cipher suite, compression method
  const versions = extensions(c).get(EXT_SUPPORTED_VERSIONS);
  const tls13 = versions !== undefined && versions.length === 2 && versions.readUInt16BE(0) === TLS13;
  return { tls13, retry: tls13 && random.equals(HRR_RANDOM) };
}

/**
 * Splits a byte stream into TLS records and their handshake records into messages. push(chunk)
 * returns the complete records [{ type, raw }]; messages() yields the handshake messages
 * completed by the records given to handshake(). Throws on malformed framing.
 */
class RecordStream {
  #buf = Buffer.alloc(0);
  #hs = Buffer.alloc(0);
  push(chunk) {
    this.#buf = this.#buf.length ? Buffer.concat([this.#buf, chunk]) : chunk;
    const out = [];
    while (this.#buf.length >= 5) {
      const length = this.#buf.readUInt16BE(3);
      if (this.#buf[1] !== 3 || length > MAX_RECORD) throw new RangeError('not a TLS record');
      if (this.#buf.length < 5 + length) break;
      out.push({ type: this.#buf[0], raw: this.#buf.subarray(0, 5 + length) });
      this.#buf = this.#buf.subarray(5 + length);
    }
    return out;
  }
  /** Bytes received that are not yet a complete record. */
  pending() {
    return this.#buf;
  }
  handshake(record) {
    if (record.raw.length === 5) throw new RangeError('empty handshake record');
    this.#hs = Buffer.concat([this.#hs, record.raw.subarray(5)]);
    if (this.#hs.length > MAX_HANDSHAKE) throw new RangeError('handshake too large');
  }
  /** The next complete handshake message { type, body }, or null. */
  message() {
    if (this.#hs.length < 4) return null;
    const length = this.#hs.readUIntBE(1, 3);
    if (length > MAX_HANDSHAKE) throw new RangeError('handshake too large');
    if (this.#hs.length < 4 + length) return null;
    const msg = { type: this.#hs[0], body: this.#hs.subarray(4, 4 + length) };
    this.#hs = this.#hs.subarray(4 + length);
    return msg;
  }
  /** Whether a handshake message was begun and not finished. */
  midMessage() {
    return this.#hs.length > 0;
  }
}

/**
 * The inspection of one tunnel to `target` ({ host, literal }). client(chunk) returns
 * { forward: Buffer, denied: string | null } (bytes the upstream may now get, in order, and a
 * reason once a ClientHello fails); server(chunk) reads the upstream's bytes (the client gets
 * them unchanged) and returns the client bytes it releases, in the same form; settled() says
 * that nothing is held back.
 */
export function tunnelInspector(target) {
  const wanted = target.literal ? null : target.host;
  let state = 'start'; // start -> hello -> await-server -> (retry ->) bytes | denied
  const client = new RecordStream();
  const server = new RecordStream();
  let serverDone = false;
  let retry = false;
  let held = []; // client records after the first hello, until the server's hello is read
  const none = Buffer.alloc(0);

  const verdict = (hello) => {
    const { name, hidden } = parseClientHello(hello.body);
    if (hidden) return 'the ClientHello hides the name it asks for (encrypted client hello)';
    const asked = name === null ? null : name.toLowerCase().replace(/\.$/, '');
    if (asked === wanted) return null;
    return asked === null ? 'the ClientHello names no host' : `the ClientHello names ${asked.slice(0, 255)}`;
  };
  const deny = (why) => {
    state = 'denied';
    held = [];
    return { forward: none, denied: why };
  };

  /** Runs the client's complete records through the state machine. */
  function advance(records) {
    const out = [];
    for (let i = 0; i < records.length; i++) {
      const r = records[i];
      if (state === 'bytes') {
        out.push(r.raw);
      } else if (state === 'hello' || state === 'retry') {
        if (r.type !== HANDSHAKE) {
          // TLS 1.3's compatibility mode may send a ChangeCipherSpec before the second hello.
          if (state === 'retry' && r.type === CHANGE_CIPHER_SPEC && held.length === 0) {
            out.push(r.raw);
            continue;
          }
          return deny('a record before the ClientHello was complete');
        }
        client.handshake(r);
        const msg = client.message();
        if (!msg) {
          held.push(r.raw); // a hello split over records: released whole or never
          continue;
        }
        if (msg.type !== CLIENT_HELLO || client.midMessage()) return deny('the first handshake message is not one ClientHello');
        const why = verdict(msg);
        if (why) return deny(why);
        out.push(...held, r.raw);
        held = [];
        state = state === 'hello' ? 'await-server' : 'bytes';
        if (state === 'await-server' && serverDone) state = retry ? 'retry' : 'bytes';
      } else if (state === 'await-server') {
        // Until the server's hello says whether it asked for a second ClientHello, a handshake
        // record could be one: hold it and what follows, in order.
        if (r.type === HANDSHAKE || held.length) held.push(r);
        else out.push(r.raw);
      }
    }
    return { forward: Buffer.concat(out), denied: null };
  }

  function onClient(chunk) {
    if (state === 'denied') return { forward: none, denied: null };
    if (state === 'bytes') return { forward: chunk, denied: null };
    if (state === 'start') {
      if (chunk.length === 0) return { forward: none, denied: null };
      if (chunk[0] !== HANDSHAKE) {
        state = 'bytes';
        return { forward: chunk, denied: null };
      }
      state = 'hello';
    }
    try {
      const result = advance(client.push(chunk));
      if (state === 'bytes' && !result.denied) {
        return { forward: Buffer.concat([result.forward, client.pending()]), denied: null };
      }
      return result;
    } catch (err) {
      return deny(`the ClientHello is malformed (${err.message})`);
    }
  }

  function onServer(chunk) {
    if (serverDone || state === 'denied') return { forward: none, denied: null };
    try {
      for (const r of server.push(chunk)) {
        if (r.type !== HANDSHAKE) {
          serverDone = true; // an alert or other: no hello follows, no second ClientHello either
          break;
        }
        server.handshake(r);
        const msg = server.message();
        if (!msg) continue;
        serverDone = true;
        retry = msg.type === SERVER_HELLO && parseServerHello(msg.body).retry;
        break;
      }
    } catch {
      serverDone = true; // not TLS from the server: the client's handshake cannot proceed
    }
    if (!serverDone || state !== 'await-server') return { forward: none, denied: null };
    state = retry ? 'retry' : 'bytes';
    const queued = held;
    held = [];
    try {
      const result = advance(queued);
      if (state === 'bytes' && !result.denied) {
        return { forward: Buffer.concat([result.forward, client.pending()]), denied: null };
      }
      return result;
    } catch (err) {
      return deny(`the ClientHello is malformed (${err.message})`);
    }
  }

  /** No client bytes are held back (a half-close may follow what was forwarded). */
  const settled = () => held.length === 0;

  return { client: onClient, server: onServer, settled };
}
