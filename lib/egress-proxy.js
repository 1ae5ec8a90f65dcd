// The host-side egress proxy of a command's network allowlist (issue 6). It listens on a Unix
// socket that is bound into the sandbox (the forwarder bridge relays loopback connections to it)
// and serves HTTP CONNECT only. For each request it:
//   1. parses and normalises the target (lib/allowlist.js parseHostPort: case, trailing dot,
//      inet_aton shorthands, IPv6 canonical form; NUL, CR/LF, zone ids refused);
//   2. requires the exact host:port to be an entry of the allowlist;
//   3. resolves a name itself, once (dns.lookup, all addresses), and refuses unless every
//      address passes vetting (lib/allowlist.js addressAllowed); an entry naming an IP literal
//      is dialled as named, without vetting;
//   4. dials exactly the vetted address: there is no second resolution, so no DNS rebinding.
// Plain HTTP forwarding (absolute-form GET) is not served: such requests are denied as
// 'unsupported-request' (clients use CONNECT for both http and https through HTTPS_PROXY, or
// curl --proxytunnel).
import { lookup } from 'node:dns/promises';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { addressAllowed, formatHostPort, parseHostPort } from './allowlist.js';

/** Most bytes of a request head (request line and headers). */
export const MAX_REQUEST_HEAD_BYTES = 8192;
/** How long a client may take to send its request head. */
const HEAD_TIMEOUT_MS = 10_000;

function sanitize(text) {
  // eslint-disable-next-line no-control-regex
  return String(text).replace(/[\u0000-\u001f\u007f]/g, '').slice(0, 255);
}

/**
 * Starts a proxy for one command. `allowlist` is parseAllowlist's canonical entries.
 * Resolves to { socketPath, close() } once listening; rejects when it cannot listen.
 */
export async function startEgressProxy({ allowlist, command, onDenied, violations, securityEventEmitter }) {
  const allowed = new Set(allowlist);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'confined-proxy-'));
  chmodSync(dir, 0o700);
  const socketPath = path.join(dir, 'proxy.sock');
  const sockets = new Set();

  const deny = (socket, host, port, reason) => {
    const at = new Date().toISOString();
    const denial = Object.freeze({ host, port, reason, at });
    const event = Object.freeze({ type: 'sandbox:violation', kind: 'network', host, port, reason, command, at });
    for (const fn of [
      () => onDenied?.(denial),
      () => violations?.(event),
      () => securityEventEmitter?.emit('sandbox:violation', event),
    ]) {
      try {
        fn();
      } catch {
        // observers cannot change the decision
      }
    }
    socket.end('HTTP/1.1 403 Forbidden\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
  };

  async function decide(socket, head, rest) {
    const line = head.split('\r\n')[0];
    const m = /^CONNECT ([^ ]+) HTTP\/1\.[01]$/.exec(line);
    if (!m) {
      const target = /^[A-Z]+ ([^ ]+) /.exec(line)?.[1] ?? '';
      return deny(socket, sanitize(target), null, 'unsupported-request');
    }
    let target;
    try {
      target = parseHostPort(m[1]);
    } catch {
      const raw = m[1];
      const port = /:([0-9]{1,5})$/.exec(raw)?.[1];
      return deny(socket, sanitize(raw.replace(/:[0-9]*$/, '')), port && Number(port) <= 65535 ? Number(port) : null, 'invalid-target');
    }
    const hostText = target.host;
    if (!allowed.has(formatHostPort(target))) return deny(socket, hostText, target.port, 'not-allowlisted');
    let address;
    if (target.family !== 0) {
      address = target.host; // named literally by an entry: dialled as named
    } else {
      let addrs;
      try {
        addrs = await lookup(target.host, { all: true, verbatim: true });
      } catch {
        return deny(socket, hostText, target.port, 'resolution-failed');
      }
      if (addrs.length === 0) return deny(socket, hostText, target.port, 'resolution-failed');
      if (!addrs.every((a) => addressAllowed(a.address))) return deny(socket, hostText, target.port, 'address-refused');
      address = addrs[0].address;
    }
    if (socket.destroyed) return;
    const upstream = net.connect({ host: address, port: target.port });
    sockets.add(upstream);
    upstream.on('close', () => sockets.delete(upstream));
    upstream.once('error', () => {
      if (!socket.destroyed) socket.end('HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
    });
    upstream.once('connect', () => {
      upstream.removeAllListeners('error');
      upstream.on('error', () => socket.destroy());
      socket.on('error', () => upstream.destroy());
      socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (rest.length) upstream.write(rest);
      socket.pipe(upstream);
      upstream.pipe(socket);
    });
  }

  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    let buf = Buffer.alloc(0);
    const timer = setTimeout(() => socket.destroy(), HEAD_TIMEOUT_MS);
    const onData = (chunk) => {
      buf = Buffer.concat([buf, chunk]);
      const endOfHead = buf.indexOf('\r\n\r\n');
      if (endOfHead < 0) {
        if (buf.length > MAX_REQUEST_HEAD_BYTES) {
          clearTimeout(timer);
          socket.off('data', onData);
          deny(socket, '', null, 'invalid-target');
        }
        return;
      }
      clearTimeout(timer);
      socket.off('data', onData);
      socket.pause();
      const head = buf.subarray(0, endOfHead).toString('latin1');
      const rest = buf.subarray(endOfHead + 4);
      decide(socket, head, rest).catch(() => socket.destroy());
    };
    socket.on('data', onData);
  });

  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, () => {
      server.off('error', reject);
      resolve();
    });
  });

  let closed = null;
  return {
    socketPath,
    close() {
      closed ??= new Promise((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => {
          rmSync(dir, { recursive: true, force: true });
          resolve();
        });
      });
      return closed;
    },
  };
}
