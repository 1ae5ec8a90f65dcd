// Network fixtures for test/egress.test.js: loopback servers, raw proxy exchanges, an echoing
// Unix socket server, and a /proc liveness probe.
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

/** A loopback HTTP server that records each request it gets. */
export async function httpServer(body = 'hello from upstream') {
  const requests = [];
  let connections = 0;
  const server = http.createServer((req, res) => {
    requests.push({ method: req.method, url: req.url, host: req.headers.host });
    res.setHeader('content-type', 'text/plain');
    res.end(`${body} ${req.url}`);
  });
  server.on('connection', () => connections++);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, port: server.address().port, requests, connections: () => connections, close: () => new Promise((r) => server.close(r)) };
}

/** A loopback TCP server recording the raw bytes it receives. */
export async function rawServer() {
  const received = [];
  let connections = 0;
  const server = net.createServer((s) => {
    connections++;
    s.on('data', (d) => received.push(d));
    s.on('error', () => {});
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { port: server.address().port, text: () => Buffer.concat(received).toString('latin1'), connections: () => connections, close: () => new Promise((r) => server.close(r)) };
}

/** Sends raw bytes to the proxy socket and collects the whole answer until the proxy closes. */
export function exchange(socketPath, request, { endAfter = false } = {}) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    const sock = net.connect({ path: socketPath });
    sock.on('data', (d) => chunks.push(d));
    sock.on('error', reject);
    sock.on('close', () => resolve(Buffer.concat(chunks).toString('latin1')));
    sock.write(request);
    if (endAfter) sock.end();
  });
}

/** Opens a CONNECT tunnel; resolves { sock, status, head } once the proxy answered. */
export function tunnel(socketPath, target) {
  return new Promise((resolve, reject) => {
    const sock = net.connect({ path: socketPath });
    let buf = Buffer.alloc(0);
    const onData = (d) => {
      buf = Buffer.concat([buf, d]);
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      sock.removeListener('data', onData);
      const head = buf.subarray(0, end).toString('latin1');
      const rest = buf.subarray(end + 4);
      if (rest.length) sock.unshift(rest);
      resolve({ sock, status: Number(head.split(' ')[1]), head });
    };
    sock.on('data', onData);
    sock.on('error', reject);
    sock.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`);
  });
}

export function readAll(sock) {
  return new Promise((resolve) => {
    const chunks = [];
    sock.on('data', (d) => chunks.push(d));
    sock.on('close', () => resolve(Buffer.concat(chunks).toString('latin1')));
  });
}

/** A Unix socket server that echoes, and ends its side once the client ended its own. */
export async function unixEcho() {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'egress-echo-'));
  const socketPath = path.join(dir, 'echo.sock');
  const server = net.createServer({ allowHalfOpen: true }, (s) => {
    s.on('error', () => {});
    s.pipe(s);
  });
  server.listen(socketPath);
  await once(server, 'listening');
  return {
    socketPath,
    close: async () => {
      await new Promise((r) => server.close(r));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export function alive(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}
