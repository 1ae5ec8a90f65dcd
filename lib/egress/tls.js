// The start of a CONNECT tunnel, read as TLS: the name a ClientHello asks for (SNI) must be the
// allowed host. A shared address (a CDN edge) routes TLS by that name, so without this check a
// tunnel to any allowed name on a CDN could reach every other site behind the same edge.
//
// What is checked: every ClientHello sent in the clear. That is the first one and, in TLS 1.3,
// the second one a HelloRetryRequest asks for (RFC 8446 4.1.2; the server's reply is read to know
// whether one was asked for). A ClientHello must name the host exactly (no name for an IP
// literal target, which SNI cannot carry) and must not hide its name (encrypted client hello,
// its drafts, or the older encrypted_server_name). Whether the stream is TLS is decided from the
// first record header, not the first byte: a stream that starts like any TLS record (an alert,
// say, which some servers skip before the hello) must start with the ClientHello. A stream that
// does not start like a TLS record is some other protocol, relayed as bytes from the start.
//
// Fail closed: a server reply that is not a readable ServerHello (an alert, other bytes, bytes
// before the client's hello was complete) ends the inspection with any further client handshake
// record refused. Held bytes are bounded.
//
// Not checked, by construction: anything encrypted, and protocols that start in the clear and
// turn to TLS later (STARTTLS). The HTTP Host inside TLS can still name another site; most CDNs
// refuse a Host that differs from the SNI.

const CHANGE_CIPHER_SPEC = 0x14;
const HANDSHAKE = 0x16;
const CLIENT_HELLO = 1;
const SERVER_HELLO = 2;
const EXT_SERVER_NAME = 0x0000;
// encrypted_client_hello (0xfe0d) and the draft code points before it, and the older ESNI.
const HIDING = new Set([0xfe08, 0xfe09, 0xfe0a, 0xfe0b, 0xfe0c, 0xfe0d, 0xffce]);
// RFC 8446 4.1.3: a ServerHello with this random is a HelloRetryRequest.
const HRR_RANDOM = Buffer.from('cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c', 'hex');
// A record is at most 2^14 bytes of plaintext (2^14 + 2048 ciphertext); a ClientHello is at most
// a few KiB in practice. Bigger is refused rather than buffered.
const MAX_RECORD = 16384 + 2048;
const MAX_HANDSHAKE = 64 * 1024;
const MAX_HELLO_RECORDS = 64;
const MAX_HELD = 64 * 1024;

/** Whether `b` (at least 3 bytes) is a record header we read: content type 20-24, version 3.0-3.4. */
function tlsRecordStart(b) {
  return b[0] >= 0x14 && b[0] <= 0x18 && b[1] === 3 && b[2] <= 4;
}

/**
 * How a stream's first bytes classify it: 'tls' (a record content type, then a major version
 * byte below 0x10, which servers accept with any minor: read as TLS, and refused unless it is
 * 3.0-3.4), 'sslv2' (a 2-byte length with the top bit set, then the ClientHello type 1), 'other',
 * or null while too few bytes are there to say.
 */
function classify(b) {
  if (b.length === 0) return null;
  if (b[0] >= 0x14 && b[0] <= 0x18) return b.length < 2 ? null : b[1] < 0x10 ? 'tls' : 'other';
  if ((b[0] & 0x80) === 0) return 'other';
  return b.length < 3 ? null : b[2] === 1 ? 'sslv2' : 'other';
}

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
function parseClientHello(body) {
  const c = new Cursor(body);
  c.take(2 + 32); // legacy_version, random
  if (c.vector(1).buf.length > 32) throw new RangeError('session id');
  const suites = c.vector(2).buf;
  if (suites.length < 2 || suites.length % 2) throw new RangeError('cipher suites');
  if (c.vector(1).buf.length < 1) throw new RangeError('compression methods');
  const ext = extensions(c);
  const hidden = [...ext.keys()].some((t) => HIDING.has(t));
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

/**
 * Whether a ServerHello body is a HelloRetryRequest: its random alone says so, whatever version
 * it names (drafts of 1.3 too). Throws on anything malformed.
 */
function isRetryRequest(body) {
  const c = new Cursor(body);
  c.take(2);
  const random = c.take(32);
  c.vector(1);
  c.take(2 + 1); // cipher suite, compression method
  extensions(c); // read to the end: a malformed hello is no answer
  return random.equals(HRR_RANDOM);
}

/**
 * Splits a byte stream into TLS records, and handshake records into messages. Throws on
 * malformed framing and on messages over MAX_HANDSHAKE or MAX_HELLO_RECORDS records.
 */
class RecordStream {
  #pend = []; // bytes not yet a complete record, as received: joined once a record is complete
  #len = 0;
  #need = 5; // bytes needed for the next step: a header, then the whole record
  #parts = []; // handshake bytes not yet a complete message, joined once it is
  #partBytes = 0;
  #join() {
    if (this.#pend.length > 1) this.#pend = [Buffer.concat(this.#pend)];
    return this.#pend[0] ?? Buffer.alloc(0);
  }
  /**
   * Appends a chunk and yields its complete records { type, raw }, one at a time: a consumer
   * that stops (a denial) leaves the rest unparsed, so a flood of tiny records costs nothing
   * past the point of refusal. What is not yet yielded stays pending.
   */
  *records(chunk) {
    if (chunk.length) {
      this.#pend.push(chunk);
      this.#len += chunk.length;
    }
    while (this.#len >= this.#need) {
      const buf = this.#join();
      const length = buf.readUInt16BE(3);
      if (!tlsRecordStart(buf) || length > MAX_RECORD) throw new RangeError('not a TLS record');
      this.#need = 5 + length;
      if (buf.length < this.#need) break;
      const raw = buf.subarray(0, this.#need);
      const rest = buf.subarray(this.#need);
      this.#pend = rest.length ? [rest] : [];
      this.#len = rest.length;
      this.#need = 5;
      yield { type: raw[0], raw };
    }
  }
  /** Puts bytes back in front of what is pending (held records, parsed again in order). */
  unshift(buf) {
    if (!buf.length) return;
    this.#pend.unshift(buf);
    this.#len += buf.length;
    this.#need = 5;
  }
  /** Takes the bytes received that are not yet a complete record. */
  takePending() {
    const out = this.#join();
    this.#pend = [];
    this.#len = 0;
    this.#need = 5;
    return out;
  }
  pending() {
    return this.#len;
  }
  /** Adds a handshake record; returns the next complete message { type, body } or null. */
  handshake(record) {
    if (record.raw.length === 5) throw new RangeError('empty handshake record');
    this.#parts.push(record.raw.subarray(5));
    this.#partBytes += record.raw.length - 5;
    if (this.#partBytes > MAX_HANDSHAKE + 4 || this.#parts.length > MAX_HELLO_RECORDS) throw new RangeError('handshake too large');
    if (this.#partBytes < 4) return null;
    const head = this.#parts.length === 1 ? this.#parts[0] : Buffer.concat(this.#parts);
    const length = head.readUIntBE(1, 3);
    if (length > MAX_HANDSHAKE) throw new RangeError('handshake too large');
    if (this.#partBytes < 4 + length) return null;
    // One message per hello: bytes of a next message in the same records are refused by the
    // caller (midMessage), so everything here is this message.
    const all = Buffer.concat(this.#parts);
    this.#parts = all.length > 4 + length ? [all.subarray(4 + length)] : [];
    this.#partBytes = all.length - 4 - length;
    return { type: all[0], body: all.subarray(4, 4 + length) };
  }
  /** Whether handshake bytes of a further message are waiting. */
  midMessage() {
    return this.#partBytes > 0;
  }
}

/**
 * The inspection of one tunnel to `target` ({ host, literal }). client(chunk) returns
 * { forward: Buffer, denied } (bytes the upstream may now get, in order, and once a check
 * fails { reason: 'tls-name-mismatch' | 'tls-malformed', detail }); server(chunk) reads the
 * upstream's bytes (the client gets them unchanged) and returns the client bytes it releases, in
 * the same form; settled() says that nothing held back could still be released.
 */
export function tunnelInspector(target) {
  const wanted = target.literal ? null : target.host;
  // start -> hello -> await-server -> (retry ->) bytes; await-server -> strict (the server did
  // not answer with a hello: client records pass, a handshake record is refused); denied.
  let state = 'start';
  const client = new RecordStream();
  const server = new RecordStream();
  let serverDone = false;
  let serverAnswer = 'none'; // 'hello' | 'retry' | 'other'
  let held = []; // records (raw buffers) held back, in order
  let heldBytes = 0;
  let retryCcs = false;
  const none = Buffer.alloc(0);
  const ok = (forward) => ({ forward, denied: null });

  const nameCheck = (hello) => {
    const { name, hidden } = parseClientHello(hello.body);
    if (hidden) return 'the ClientHello hides the name it asks for (encrypted client hello)';
    const asked = name === null ? null : name.toLowerCase().replace(/\.$/, '');
    if (asked === wanted) return null;
    return asked === null ? 'the ClientHello names no host' : `the ClientHello names ${asked.slice(0, 255)}`;
  };
  const deny = (reason, detail) => {
    state = 'denied';
    held = [];
    heldBytes = 0;
    return { forward: none, denied: { reason, detail } };
  };
  const hold = (raw) => {
    held.push(raw);
    heldBytes += raw.length;
    return heldBytes <= MAX_HELD;
  };
  /** The state after a hello was released: decided by the server's answer, once known. */
  const afterHello = (first) => {
    if (!first) return 'bytes';
    if (!serverDone) return 'await-server';
    return serverAnswer === 'retry' ? 'retry' : serverAnswer === 'hello' ? 'bytes' : 'strict';
  };

  /** Runs complete client records through the state machine. */
  function advance(records) {
    const out = [];
    for (const r of records) {
      if (state === 'bytes') {
        out.push(r.raw);
        break; // the rest, parsed or not, is bytes: taken below
      } else if (state === 'strict') {
        if (r.type === HANDSHAKE) return deny('tls-malformed', 'a handshake record after the server answered without a hello');
        out.push(r.raw);
      } else if (state === 'hello' || state === 'retry') {
        if (r.type !== HANDSHAKE) {
          // TLS 1.3's compatibility mode sends one ChangeCipherSpec (a single byte 1) before
          // the second hello.
          const ccs = r.type === CHANGE_CIPHER_SPEC && r.raw.length === 6 && r.raw[5] === 1;
          if (state === 'retry' && ccs && !retryCcs && held.length === 0) {
            retryCcs = true;
            out.push(r.raw);
            continue;
          }
          return deny('tls-malformed', 'a record before the ClientHello was complete');
        }
        const msg = client.handshake(r);
        if (!msg) {
          // A hello split over records: released whole or never.
          if (!hold(r.raw)) return deny('tls-malformed', 'the ClientHello is too large');
          continue;
        }
        if (msg.type !== CLIENT_HELLO || client.midMessage()) return deny('tls-malformed', 'the handshake is not one ClientHello');
        const why = nameCheck(msg);
        if (why) return deny('tls-name-mismatch', why);
        out.push(...held, r.raw);
        held = [];
        heldBytes = 0;
        state = afterHello(state === 'hello');
      } else if (state === 'await-server') {
        // Until the server's answer says whether it asked for a second ClientHello, a handshake
        // record could be one: hold it and what follows, in order.
        if (r.type === HANDSHAKE || held.length) {
          if (!hold(r.raw)) return deny('tls-malformed', 'too many bytes before the server answered');
        } else {
          out.push(r.raw);
        }
      }
    }
    if (state === 'bytes') out.push(client.takePending());
    return ok(Buffer.concat(out));
  }

  const malformed = (err) => deny('tls-malformed', `the ClientHello is malformed (${err.message})`);

  function onClient(chunk) {
    if (state === 'denied') return ok(none);
    if (state === 'bytes') return ok(chunk);
    if (state === 'start') {
      // Decided from the first 1-3 bytes; fewer are kept pending (released at the client's end).
      const head = Buffer.concat([client.takePending(), chunk]);
      const kind = classify(head);
      if (kind === null) {
        client.unshift(head);
        return ok(none);
      }
      if (kind === 'sslv2') return deny('tls-name-mismatch', 'an SSL 2.0 ClientHello cannot name a host');
      if (kind === 'other') {
        state = 'bytes';
        return ok(head);
      }
      state = 'hello';
      chunk = head;
    }
    try {
      return advance(client.records(chunk));
    } catch (err) {
      return malformed(err);
    }
  }

  function onServer(chunk) {
    if (serverDone || state === 'denied' || state === 'bytes') return ok(none);
    if (state === 'start' || state === 'hello') {
      // The server spoke before the client's hello was complete: not a TLS server's answer.
      serverDone = true;
      serverAnswer = 'other';
      return ok(none);
    }
    try {
      for (const r of server.records(chunk)) {
        if (r.type !== HANDSHAKE) {
          serverDone = true; // an alert or other: no hello
          break;
        }
        const msg = server.handshake(r);
        if (!msg) continue;
        serverDone = true;
        if (msg.type === SERVER_HELLO) serverAnswer = isRetryRequest(msg.body) ? 'retry' : 'hello';
        break;
      }
    } catch {
      serverDone = true; // not a readable TLS answer
    }
    if (serverDone && serverAnswer === 'none') serverAnswer = 'other';
    if (!serverDone || state !== 'await-server') return ok(none);
    state = afterHello(true);
    client.unshift(Buffer.concat(held));
    held = [];
    heldBytes = 0;
    try {
      return advance(client.records(none));
    } catch (err) {
      return malformed(err);
    }
  }

  /**
   * The client's end: bytes too few to classify the stream are released (they cannot be a
   * hello). Returns the same form as client().
   */
  function onClientEnd() {
    if (state !== 'start') return ok(none);
    state = 'bytes';
    return ok(client.takePending());
  }

  /**
   * Nothing is held back that a later server answer could still release (fragments of a hello
   * that never completed never will).
   */
  const settled = () => state !== 'start' && (state !== 'await-server' || (held.length === 0 && client.pending() === 0));

  return { client: onClient, clientEnd: onClientEnd, server: onServer, settled };
}
