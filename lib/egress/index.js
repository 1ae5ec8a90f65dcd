// Egress for a confined command with `network: { allowlist }`: the proxy on the host, the
// forwarder inside, and the environment that points the command at them.
//
// How runConfinedCommand wires it (the integration contract):
//
//   1. Before anything starts: `const allowlist = parseAllowlist(network.allowlist)` (throws
//      ConfinementError proxy.job-allowlist.*); without enforced confinement reject with
//      confinement.allowlist-requires-confinement; resolve `forwarderPath` (default
//      defaultForwarderPath()) and check it exists and is executable.
//   2. `const egress = startEgress({ allowlist, onDenied, violations, securityEventEmitter,
//      command })`, then `await egress.ready` (rejects ConfinementError
//      confinement.proxy-not-ready; then call egress.close() and reject the run with it).
//   3. Sandbox: keep the network namespace (loopback only). Bind `egress.socketDir` read-only
//      at the same path (connect(2) needs write permission on the socket inode, which a
//      read-only mount does not take away; the command cannot create, rename or remove
//      anything there), and bind the forwarder executable read-only (exec allowed):
//      egressBinds(egress.socketDir, forwarderPath) lists both. As a root caller the command
//      runs as host uid 65534, and the directory is 0700 root: runConfinedCommand stages both
//      as idmapped clones (uid 0 -> 65534, as for its other mounts) so the command sees the
//      directory and the 0600 socket as its own. (`socketOwner: { uid: 65534, gid: 65534 }` is
//      the alternative for a launcher without idmapped staging.) Add `egress.env` to the command
//      environment: the proxy variables override the caller's.
//   4. The program the stage execs becomes
//      `[...forwarderArgv(forwarderPath, FORWARDER_PORT, egress.socketPath), command, ...args]`:
//      the forwarder listens on 127.0.0.1:PORT and [::1]:PORT inside the namespace, then forks
//      the command, relays, and exits with the command's exact status (or its signal), so the
//      stage reports the command's own result. When the stage (pid 1) exits, the pid namespace
//      ends everything, the forwarder included.
//      Notes: the forwarder counts as one more process of the sandbox (maxProcesses) and holds
//      up to 6 + 2 x 64 descriptors (maxDescriptors: it still works with fewer, refusing
//      connections it has no descriptor for). Exit 125 with "confined-forwarder:" on stderr
//      means the bridge itself could not start (bad argv, port taken, socket path too long).
//   5. When the run settles, whatever ended it: `await egress.close()` (idempotent): every proxy
//      connection ends, and the socket and its directory are removed.
import { ConfinementError } from '../errors.js';
import { helperPath } from '../native.js';
import { isParsedAllowlist, parseAllowlist } from './allowlist.js';
import { startProxy } from './proxy.js';

export { parseAllowlist, parseHostPort, normaliseHost, findEntry, entryKey } from './allowlist.js';
export { classifyAddress, vetAddress } from './vet.js';
export { startProxy } from './proxy.js';

/** The loopback port the forwarder listens on inside the sandbox's network namespace. */
export const FORWARDER_PORT = 3128;
const READY_TIMEOUT_MS = 10_000;

/** The forwarder bridge this package builds (build/Release/confined-forwarder). */
export function defaultForwarderPath() {
  return helperPath('forwarder');
}

/** The proxy variables for a command, pointing at the forwarder on loopback. */
export function proxyEnv(port = FORWARDER_PORT) {
  const url = `http://127.0.0.1:${port}`;
  return Object.freeze({
    HTTP_PROXY: url,
    HTTPS_PROXY: url,
    ALL_PROXY: url,
    http_proxy: url,
    https_proxy: url,
    all_proxy: url,
  });
}

/**
 * The argv prefix that runs a command under the forwarder: append the command and its args.
 * `socketPath` is the proxy socket's path as seen inside the sandbox.
 */
export function forwarderArgv(forwarderPath, port, socketPath) {
  return Object.freeze([forwarderPath, String(port), socketPath, '--exec', '--']);
}

/**
 * What the sandbox must bind for egress, at the same paths: the proxy socket's directory and the
 * forwarder (which must stay executable), both read-only. connect(2) needs write permission on
 * the socket inode (its mode bits), which a read-only mount keeps: the kernel refuses writes on
 * a read-only mount only for regular files, directories and symlinks. As [{ source, target,
 * mode: 'ro' }].
 */
export function egressBinds(socketDir, forwarderPath) {
  return Object.freeze([
    Object.freeze({ source: socketDir, target: socketDir, mode: 'ro' }),
    Object.freeze({ source: forwarderPath, target: forwarderPath, mode: 'ro' }),
  ]);
}

/**
 * Starts the egress proxy for one run. `allowlist` is a raw list of strings or the result of
 * parseAllowlist. Returns { allowlist, socketDir, socketPath, port, env, ready, close, denials }
 * where `ready` resolves once the proxy listens or rejects with confinement.proxy-not-ready,
 * and `close()` (idempotent) ends every connection and removes the socket and its directory.
 */
export function startEgress(options) {
  const allowlist = isParsedAllowlist(options.allowlist) ? options.allowlist : parseAllowlist(options.allowlist);
  const port = options.port ?? FORWARDER_PORT;
  let proxy;
  try {
    proxy = startProxy({ ...options, allowlist });
  } catch (err) {
    const ready = Promise.reject(new ConfinementError('confinement.proxy-not-ready', `the egress proxy could not start: ${err.message}`, { cause: err }));
    ready.catch(() => {});
    return Object.freeze({ allowlist, socketDir: null, socketPath: null, port, env: proxyEnv(port), ready, close: async () => {}, denials: [] });
  }
  let timer;
  const ready = Promise.race([
    proxy.ready,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error('timed out')), options.readyTimeoutMs ?? READY_TIMEOUT_MS);
    }),
  ]).then(
    () => clearTimeout(timer),
    (err) => {
      clearTimeout(timer);
      throw new ConfinementError('confinement.proxy-not-ready', `the egress proxy did not report ready: ${err.message}`, { cause: err });
    },
  );
  ready.catch(() => {});
  return Object.freeze({
    allowlist,
    socketDir: proxy.socketDir,
    socketPath: proxy.socketPath,
    port,
    env: proxyEnv(port),
    ready,
    close: proxy.close,
    denials: proxy.denials,
  });
}
