// The host-side egress proxy: the only way out of a confined command's network namespace.
//
// It listens on a Unix socket in a private 0700 directory (bound into the sandbox and reached
// through the forwarder bridge) and speaks HTTP CONNECT and plain absolute-URI HTTP/1.x. For
// each request it normalises the target with the allowlist grammar, requires an exact host AND
// port match, resolves the name itself, vets every resolved address (vet.js) and dials exactly
// one vetted address by IP: the name is never resolved again, so a rebinding resolver cannot
// swap the address between check and use.
//
// One request per client connection. After CONNECT succeeds the connection is a byte tunnel:
// no request in it is parsed again, so a CONNECT inside an allowed tunnel reaches only the
// allowed upstream, as bytes. Its TLS start is read (tls.js): a ClientHello sent in the clear
// must ask for the allowed host, so a shared address (a CDN edge) cannot be asked for another
// site by name. A plain request is forwarded with `Connection: close` and its
// Host header rewritten to the checked authority (no fronting through a shared IP); a second
// request on the same connection is refused, never forwarded.
import { lookup as dnsLookup } from 'node:dns';
import { chmodSync, chownSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { findEntry, parseHostPort } from './allowlist.js';
import { parseAddress } from './ip.js';
import { tunnelInspector } from './tls.js';
import { vetAddress } from './vet.js';

const MAX_HEAD = 16 * 1024;
const HEAD_TIMEOUT_MS = 30_000;
const CONNECT_TIMEOUT_MS = 30_000;
const LOOKUP_TIMEOUT_MS = 30_000;
const MAX_CONNECTIONS = 256;
const MAX_RECORDED = 1000;
const PLAIN_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'OPTIONS', 'PATCH']);
// Hop-by-hop headers (RFC 9110 7.6.1) and the proxy's own: never forwarded upstream.
const DROPPED = new Set(['host', 'connection', 'proxy-connection', 'proxy-authorization', 'keep-alive', 'te', 'trailer', 'upgrade']);

export const SOCKET_NAME = 'egress.sock';

/** Resolves every address of a name: [{ address, family }], as dns.lookup with all: true. */
function defaultLookup(host) {
  return new Promise((resolve, reject) => {
    dnsLookup(host, { all: true, verbatim: true }, (err, list) => (err ? reject(err) : resolve(list)));
  });
}

/** A printable, bounded form of a host that failed to parse, for the denial record. */
function shownHost(raw) {
  return String(raw).toLowerCase().replace(/[^\x21-\x7e]/g, '?').slice(0, 255);
}

function splitTarget(raw) {
  // Best effort host/port of an unparseable target, for the record only.
  const m = /^(.*):([0-9]{1,5})$/.exec(raw);
  if (!m) return { host: shownHost(raw), port: null };
  const port = Number(m[2]);
  return { host: shownHost(m[1]), port: port >= 1 && port <= 65535 ? port : null };
}

/** Parses a request head (without the final CRLF CRLF): { method, target, headers } or null. */
function parseHead(text) {
  if (/[\x00\x7f]/.test(text)) return null;
  const lines = text.split('\r\n');
  // A bare CR or LF would be read differently by different parsers: refused.
  if (lines.some((l) => /[\r\n]/.test(l))) return null;
  const m = /^([A-Z]{1,16}) ([\x21-\x7e]{1,8192}) HTTP\/1\.[01]$/.exec(lines[0]);
  if (!m) return null;
  const headers = [];
  for (const line of lines.slice(1)) {
    const h = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*(.*?)[ \t]*$/.exec(line);
    if (!h) return null;
    headers.push([h[1], h[2]]);
  }
  return { method: m[1], target: m[2], headers };
}

/** Splits `http://authority/path` into { authority, path } or null. */
function splitAbsolute(target) {
  const m = /^http:\/\/([^/?#]*)([/?#].*)?$/i.exec(target);
  if (!m) return null;
  const rest = m[2] ?? '/';
  if (rest.startsWith('#')) return null;
  return { authority: m[1], path: rest.startsWith('/') ? rest.replace(/#.*$/, '') : `/${rest.replace(/#.*$/, '')}` };
}

/**
 * Starts the proxy. Options:
 *   allowlist: the frozen list from parseAllowlist (required);
 *   onDenied(denial), violations(event), securityEventEmitter, command (for the event);
 *   dir: where the private socket directory is made (default os.tmpdir());
 *   socketOwner: { uid, gid } to chown the directory and socket to (a root caller whose
 *     sandbox side runs as another uid without an idmapped bind; see index.js);
 *   lookup(host) -> Promise<[{ address, family }]> and connect(netConnectOptions) -> Socket:
 *     internal seams for tests (the rebinding test records what is dialled).
 * Returns { socketDir, socketPath, ready: Promise<void>, close(): Promise<void>, denials }.
 */
export function startProxy(options) {
  const { allowlist, onDenied, violations, securityEventEmitter, command = '' } = options;
  const lookup = options.lookup ?? defaultLookup;
  const connect = options.connect ?? net.connect;
  const socketDir = mkdtempSync(path.join(options.dir ?? os.tmpdir(), 'confined-egress-'));
  chmodSync(socketDir, 0o700);
  const socketPath = path.join(socketDir, SOCKET_NAME);
  const sockets = new Set();
  const denials = [];
  let closed = false;

  function track(sock) {
    sockets.add(sock);
    sock.once('close', () => sockets.delete(sock));
    sock.on('error', () => sock.destroy());
  }

  function report(host, port, reason) {
    const at = new Date().toISOString();
    const denial = Object.freeze({ host, port, reason, at });
    const event = Object.freeze({ type: 'sandbox:violation', kind: 'network', host, port, reason, command, at });
    if (denials.length < MAX_RECORDED) denials.push(denial);
    // A throwing callback must not take the proxy (and every other connection) down.
    for (const call of [() => onDenied?.(denial), () => violations?.(event), () => securityEventEmitter?.emit('sandbox:violation', event)]) {
      try {
        call();
      } catch {
        /* the caller's problem, not the proxy's */
      }
    }
  }

  function respond(client, status, text, reason) {
    const body = `${text}\n`;
    const extra = reason ? `X-Confined-Egress-Denied: ${reason}\r\n` : '';
    client.end(`HTTP/1.1 ${status} ${text}\r\n${extra}Content-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
    // Discard whatever else the client sends, and do not wait forever for it to hang up.
    client.removeAllListeners('data');
    client.resume();
    client.setTimeout(HEAD_TIMEOUT_MS, () => client.destroy());
  }

  function deny(client, host, port, reason) {
    report(host, port, reason);
    respond(client, 403, 'Forbidden', reason);
  }

  async function resolveVetted(target, entry) {
    let list;
    if (target.literal) {
      list = [{ address: target.host }];
    } else {
      let timer;
      try {
        list = await Promise.race([
          lookup(target.host),
          new Promise((_, reject) => {
            timer = setTimeout(() => reject(new Error('lookup timeout')), LOOKUP_TIMEOUT_MS);
          }),
        ]);
      } catch {
        return { reason: 'resolution-failed' };
      } finally {
        clearTimeout(timer);
      }
    }
    if (!Array.isArray(list) || list.length === 0) return { reason: 'resolution-failed' };
    const addresses = [];
    for (const item of list) {
      // Every address must pass: a name that also resolves somewhere refused is refused.
      if (!vetAddress(item?.address, entry).allowed) return { reason: 'address-refused' };
      addresses.push(item.address);
    }
    return { addresses };
  }

  function dial(address, port) {
    return new Promise((resolve, reject) => {
      const family = parseAddress(address).family;
      const upstream = connect({
        host: address,
        port,
        family,
        allowHalfOpen: true,
        // The address is an IP; should net ever want to resolve it, it gets that IP only.
        lookup: (_h, _o, cb) => cb(null, address, family),
      });
      const timer = setTimeout(() => upstream.destroy(new Error('connect timeout')), CONNECT_TIMEOUT_MS);
      upstream.once('connect', () => {
        clearTimeout(timer);
        upstream.removeAllListeners('error');
        resolve(upstream);
      });
      upstream.once('error', (err) => {
        clearTimeout(timer);
        upstream.destroy();
        reject(err);
      });
    });
  }

  /** Checks, resolves, vets and dials; replies and returns null on refusal. */
  async function open(client, target) {
    const entry = findEntry(allowlist, target.host, target.port);
    if (!entry) return deny(client, target.host, target.port, 'not-allowlisted'), null;
    const vetted = await resolveVetted(target, entry);
    if (vetted.reason) return deny(client, target.host, target.port, vetted.reason), null;
    for (const address of vetted.addresses) {
      if (closed || client.destroyed) return null;
      try {
        const upstream = await dial(address, target.port);
        if (closed || client.destroyed) return upstream.destroy(), null;
        track(upstream);
        return upstream;
      } catch {
        /* try the next vetted address */
      }
    }
    respond(client, 502, 'Bad Gateway', null);
    return null;
  }

  async function onConnect(client, head, rest) {
    const target = parseHostPort(head.target);
    if (!target.ok) {
      const { host, port } = splitTarget(head.target);
      return deny(client, host, port, 'invalid-target');
    }
    const upstream = await open(client, target);
    if (!upstream) return;
    client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    // From here on the connection is bytes: nothing is re-dispatched. Its TLS start is read
    // (lib/egress/tls.js): a ClientHello must ask for the allowed host.
    relayInspected(client, upstream, target, rest);
  }

  /**
   * Relays both ways, each direction half-closing its destination when its source ends, with the
   * client's bytes held back until tunnelInspector released them. A denied tunnel is recorded
   * and closed; the upstream never got the refused hello.
   */
  function relayInspected(client, upstream, target, rest) {
    const inspect = tunnelInspector(target);
    let clientEnded = false;
    let denied = false;
    let halfClosed = false;
    // Both directions finished (read to the end, every write flushed): only then destroyed, so
    // that a slow reader still gets every byte after a half-close.
    const done = () => {
      for (const s of [client, upstream]) if (!s.readableEnded || !s.writableFinished) return;
      client.destroy();
      upstream.destroy();
    };
    // The client's end reaches the upstream after every byte released before it.
    const halfClose = () => {
      if (halfClosed || !clientEnded || denied || !inspect.settled()) return;
      halfClosed = true;
      upstream.end();
    };
    const pass = ({ forward, denied: why }) => {
      if (denied) return;
      if (why) {
        denied = true;
        report(target.host, target.port, why.reason);
        client.destroy();
        upstream.destroy();
        return;
      }
      if (forward.length && !upstream.write(forward)) {
        client.pause();
        upstream.once('drain', () => client.resume());
      }
    };
    upstream.on('data', (chunk) => {
      // The client gets the upstream's bytes unchanged (and first: they may release held ones).
      if (!client.write(chunk)) {
        upstream.pause();
        client.once('drain', () => upstream.resume());
      }
      pass(inspect.server(chunk));
      halfClose();
    });
    client.on('data', (chunk) => pass(inspect.client(chunk)));
    client.on('finish', done);
    upstream.on('finish', done);
    client.on('end', () => {
      clientEnded = true;
      pass(inspect.clientEnd());
      halfClose();
      done();
    });
    upstream.on('end', () => {
      client.end();
      done();
    });
    // A side that closed before its end (reset, error) takes the other down; one that ended
    // normally lets the other flush what it still has to write.
    client.once('close', () => {
      if (!client.readableEnded || !inspect.settled()) return upstream.destroy();
      clientEnded = true;
      halfClose();
    });
    upstream.once('close', () => (upstream.readableEnded ? client.end() : client.destroy()));
    if (rest.length) pass(inspect.client(rest));
    client.resume();
  }

  async function onPlain(client, head, rest) {
    const parts = splitAbsolute(head.target);
    if (!parts) return deny(client, shownHost(head.target), null, 'unsupported-request');
    const authority = /:[^\]]*$/.test(parts.authority) ? parts.authority : `${parts.authority}:80`;
    const target = parseHostPort(authority);
    if (!target.ok) {
      const { host, port } = splitTarget(authority);
      return deny(client, host, port, 'invalid-target');
    }
    const lengths = head.headers.filter(([n]) => n.toLowerCase() === 'content-length').map(([, v]) => v);
    const chunked = head.headers.some(([n]) => n.toLowerCase() === 'transfer-encoding');
    // Only Content-Length framing: a body whose end the proxy could not find could smuggle a
    // second request to the upstream.
    if (chunked || lengths.length > 1 || (lengths.length === 1 && !/^[0-9]{1,15}$/.test(lengths[0]))) {
      return deny(client, target.host, target.port, 'unsupported-request');
    }
    const upstream = await open(client, target);
    if (!upstream) return;
    const dropped = new Set(DROPPED);
    for (const [n, v] of head.headers) {
      if (n.toLowerCase() === 'connection') for (const t of v.split(',')) dropped.add(t.trim().toLowerCase());
    }
    const hostHeader = target.port === 80 ? bracket(target.host) : `${bracket(target.host)}:${target.port}`;
    let out = `${head.method} ${parts.path} HTTP/1.1\r\nHost: ${hostHeader}\r\n`;
    for (const [n, v] of head.headers) if (!dropped.has(n.toLowerCase())) out += `${n}: ${v}\r\n`;
    out += 'Connection: close\r\n\r\n';
    upstream.write(out);
    let remaining = lengths.length ? Number(lengths[0]) : 0;
    let extra = Buffer.alloc(0);
    const feed = (chunk) => {
      if (remaining > 0) {
        const n = Math.min(remaining, chunk.length);
        // Backpressure: a large body waits for the upstream instead of filling memory.
        if (!upstream.write(chunk.subarray(0, n))) {
          client.pause();
          upstream.once('drain', () => client.resume());
        }
        remaining -= n;
        chunk = chunk.subarray(n);
        if (remaining === 0) upstream.end();
      }
      if (chunk.length) extra = secondRequest(client, Buffer.concat([extra, chunk]));
    };
    if (remaining === 0) upstream.end();
    feed(rest);
    client.on('data', feed);
    client.on('end', () => upstream.end());
    upstream.pipe(client);
    client.once('close', () => upstream.destroy());
    upstream.once('close', () => client.destroy());
    client.resume();
  }

  /** Bytes after a forwarded plain request: a second request, refused and never forwarded. */
  function secondRequest(client, buf) {
    if (client.secondRefused) return Buffer.alloc(0);
    const end = buf.indexOf('\r\n\r\n');
    if (end < 0 && buf.length < MAX_HEAD) return buf;
    client.secondRefused = true;
    const head = end >= 0 ? parseHead(buf.subarray(0, end).toString('latin1')) : null;
    let host = '';
    let port = null;
    if (head) {
      const parts = head.method === 'CONNECT' ? { authority: head.target } : splitAbsolute(head.target);
      if (parts) {
        const t = parseHostPort(/:[^\]]*$/.test(parts.authority) ? parts.authority : `${parts.authority}:80`);
        ({ host, port } = t.ok ? t : splitTarget(parts.authority));
      }
    }
    report(host, port, 'unsupported-request');
    return Buffer.alloc(0);
  }

  function onClient(client) {
    if (closed) return client.destroy();
    track(client);
    let buf = Buffer.alloc(0);
    client.setTimeout(HEAD_TIMEOUT_MS, () => client.destroy());
    const onData = (chunk) => {
      buf = Buffer.concat([buf, chunk]);
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) {
        if (buf.length > MAX_HEAD) {
          client.removeListener('data', onData);
          deny(client, '', null, 'unsupported-request');
        }
        return;
      }
      client.removeListener('data', onData);
      client.pause();
      client.setTimeout(0);
      const head = parseHead(buf.subarray(0, end).toString('latin1'));
      const rest = buf.subarray(end + 4);
      if (!head) return deny(client, '', null, 'invalid-target');
      const run = head.method === 'CONNECT' ? onConnect : PLAIN_METHODS.has(head.method) ? onPlain : null;
      if (!run) return deny(client, shownHost(head.target), null, 'unsupported-request');
      run(client, head, rest).catch(() => client.destroy());
    };
    client.on('data', onData);
  }

  const server = net.createServer({ allowHalfOpen: true, pauseOnConnect: false }, onClient);
  server.maxConnections = MAX_CONNECTIONS;

  const ready = new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen({ path: socketPath, exclusive: true }, () => {
      server.removeListener('error', reject);
      try {
        chmodSync(socketPath, 0o600);
        if (options.socketOwner) {
          chownSync(socketPath, options.socketOwner.uid, options.socketOwner.gid);
          chownSync(socketDir, options.socketOwner.uid, options.socketOwner.gid);
        }
      } catch (err) {
        reject(err);
        return;
      }
      resolve();
    });
  });
  ready.catch(() => {});

  let closing = null;
  function close() {
    if (closing) return closing;
    closed = true;
    closing = new Promise((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
      if (!server.listening) resolve();
    }).then(() => {
      rmSync(socketDir, { recursive: true, force: true });
    });
    return closing;
  }

  return { socketDir, socketPath, ready, close, denials };
}

function bracket(host) {
  return host.includes(':') ? `[${host}]` : host;
}
