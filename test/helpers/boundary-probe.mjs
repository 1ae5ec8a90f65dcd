// Boundary probe: the program the boundary suite runs, confined (as the snapshot entry) and
// unconfined (the negative control, a plain `node boundary-probe.mjs` with a clean environment).
// Usage: node boundary-probe.mjs '<config JSON>' probe-name...
// Prints one JSON line per probe: { probe, ok, code?, value? }. `ok` means the attempted action
// SUCCEEDED; the host never trusts it alone (it checks its own side where it can), but a control
// that reports ok=true proves the probe really attempts the action.
import childProcess from 'node:child_process';
import dgram from 'node:dgram';
import dns from 'node:dns';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';

const config = JSON.parse(process.argv[2] ?? '{}');
const names = process.argv.slice(3);
const here = path.dirname(fileURLToPath(import.meta.url));
const marker = config.marker ?? 'no-marker';
const fileName = `boundary-${marker}`;

function outcome(error) {
  return { ok: false, code: error?.code ?? String(error?.message ?? error).slice(0, 200) };
}

function tryWrite(dir) {
  try {
    fs.writeFileSync(path.join(dir, fileName), 'written by the boundary probe\n');
    return { ok: true };
  } catch (error) {
    return outcome(error);
  }
}

function tryRead(file, max = 200) {
  try {
    return { ok: true, value: fs.readFileSync(file, 'utf8').slice(0, max) };
  } catch (error) {
    return outcome(error);
  }
}

function withTimeout(promise, ms, onTimeout) {
  return Promise.race([promise, new Promise((resolve) => setTimeout(() => resolve(onTimeout), ms))]);
}

function tcp(host, port) {
  return withTimeout(
    new Promise((resolve) => {
      const s = net.connect({ host, port });
      s.on('connect', () => {
        s.end(`probe ${marker}\n`);
        resolve({ ok: true });
      });
      s.on('error', (e) => resolve(outcome(e)));
    }),
    3000,
    { ok: false, code: 'TIMEOUT' },
  );
}

function unixConnect(p) {
  return withTimeout(
    new Promise((resolve) => {
      const s = net.connect({ path: p });
      s.on('connect', () => {
        s.end(`probe ${marker}\n`);
        resolve({ ok: true });
      });
      s.on('error', (e) => resolve(outcome(e)));
    }),
    3000,
    { ok: false, code: 'TIMEOUT' },
  );
}

function udpSend(host, port, type) {
  return withTimeout(
    new Promise((resolve) => {
      let s;
      try {
        s = dgram.createSocket(type);
      } catch (e) {
        resolve(outcome(e));
        return;
      }
      s.on('error', (e) => {
        resolve(outcome(e));
        s.close();
      });
      s.send(`probe ${marker}`, port, host, (e) => {
        resolve(e ? outcome(e) : { ok: true });
        s.close();
      });
    }),
    3000,
    { ok: false, code: 'TIMEOUT' },
  );
}

function listen(options) {
  return withTimeout(
    new Promise((resolve) => {
      const server = net.createServer();
      server.on('error', (e) => resolve(outcome(e)));
      server.listen(options, () => {
        const address = server.address();
        server.close();
        resolve({ ok: true, value: address });
      });
    }),
    3000,
    { ok: false, code: 'TIMEOUT' },
  );
}

// A child that would be seen by the host: its argv carries the marker and it lives a while.
const childArgs = ['-e', 'setTimeout(() => {}, 4000)', `boundary-child-${marker}`];

function spawnResult(fn) {
  return withTimeout(
    new Promise((resolve) => {
      let child;
      try {
        child = fn();
      } catch (e) {
        resolve(outcome(e));
        return;
      }
      child.on('error', (e) => resolve(outcome(e)));
      child.on('spawn', () => {
        child.unref?.();
        resolve({ ok: true, value: child.pid });
      });
    }),
    3000,
    { ok: false, code: 'TIMEOUT' },
  );
}

function scanProc(needle) {
  const found = [];
  let entries = [];
  try {
    entries = fs.readdirSync('/proc');
  } catch (e) {
    return outcome(e);
  }
  for (const e of entries) {
    if (!/^\d+$/.test(e) || Number(e) === process.pid) continue;
    try {
      const cmd = fs.readFileSync(`/proc/${e}/cmdline`, 'latin1');
      if (cmd.includes(needle)) found.push(Number(e));
    } catch {
      // gone or unreadable
    }
  }
  return { ok: found.length > 0, value: found };
}

function dlopen(file) {
  const m = { exports: {} };
  try {
    process.dlopen(m, file);
    return { ok: true, value: typeof m.exports.hello === 'function' ? m.exports.hello() : 'loaded' };
  } catch (error) {
    // A plain .so without a Node module is mapped and its constructors ran when node reports
    // that it "did not self-register": that is a successful load.
    if (/did not self-register/.test(error.message)) return { ok: true, value: 'mapped' };
    return { ok: false, code: error.message.slice(0, 200) };
  }
}

const slotDir = path.dirname(here); // <namespace> when confined (entry is <ns>/program/...)

const probes = {
  // --- filesystem writes: each attempts a new file named after the marker
  'write-home': () => tryWrite(process.env.HOME),
  'write-tmpdir': () => tryWrite(process.env.TMPDIR),
  'write-tmp': () => tryWrite('/tmp'),
  'write-dev-shm': () => tryWrite('/dev/shm'),
  'write-dev': () => tryWrite('/dev'),
  'write-cwd': () => tryWrite(process.cwd()),
  'write-input-file': () => {
    try {
      fs.appendFileSync(path.join(process.cwd(), config.inputFile), 'appended\n');
      return { ok: true };
    } catch (e) {
      return outcome(e);
    }
  },
  'write-root': () => tryWrite('/'),
  'write-program': () => tryWrite(here),
  'write-runtime': () => tryWrite(path.dirname(process.execPath)),
  'write-runtime-file': () => {
    // Opening the runtime for writing (O_WRONLY|O_APPEND without data is enough to prove it).
    try {
      fs.closeSync(fs.openSync(config.runtimeLibrary ?? process.execPath, 'a'));
      return { ok: true };
    } catch (e) {
      return outcome(e);
    }
  },
  // --- filesystem reads
  'read-secret': () => tryRead(config.secret),
  'read-secret-alias': () => tryRead(config.secretAlias),
  'read-other-namespace': () => tryRead(config.otherNamespaceFile),
  'read-root': () => {
    try {
      return { ok: true, value: fs.readdirSync(config.root) };
    } catch (e) {
      return outcome(e);
    }
  },
  'read-canary': () => tryRead(path.join(slotDir, 'canary', 'canary')),
  'read-root-only': () => tryRead(config.rootOnly),
  'read-host-pid1': () => tryRead('/proc/1/cmdline'),
  // The marker travels base64-encoded: the probe's own argv (visible as the stage's cmdline)
  // must not contain it.
  'see-host-marker': () => scanProc(Buffer.from(config.hostMarker64, 'base64').toString()),
  'read-host-marker-cmdline': () => tryRead(`/proc/${config.hostPid}/cmdline`),
  // --- network
  'tcp4': () => tcp('127.0.0.1', config.tcpPort),
  'tcp6': () => tcp('::1', config.tcp6Port),
  'udp4': () => udpSend('127.0.0.1', config.udpPort, 'udp4'),
  'dns': () =>
    withTimeout(
      new Promise((resolve) => {
        const r = new dns.promises.Resolver({ timeout: 1000, tries: 1 });
        try {
          r.setServers([`127.0.0.1:${config.dnsPort}`]);
        } catch (e) {
          resolve(outcome(e));
          return;
        }
        r.resolve4(`probe-${marker}.test`).then(
          (a) => resolve({ ok: true, value: a }),
          (e) => resolve(outcome(e)),
        );
      }),
      4000,
      { ok: false, code: 'TIMEOUT' },
    ),
  'unix-path': () => unixConnect(config.unixPath),
  'unix-abstract': () => unixConnect(`\0${config.abstractName}`),
  'listen-tcp': () => listen({ host: '127.0.0.1', port: 0 }),
  'listen-abstract': () => listen({ path: `\0boundary-listen-${marker}` }),
  // --- processes
  'spawn': () => spawnResult(() => childProcess.spawn(process.execPath, childArgs, { stdio: 'ignore' })),
  'exec': () =>
    withTimeout(
      new Promise((resolve) => {
        try {
          childProcess.execFile(process.execPath, ['-p', '6*7'], (e, out) =>
            resolve(e ? outcome(e) : { ok: true, value: out.trim() }),
          );
        } catch (e) {
          resolve(outcome(e));
        }
      }),
      4000,
      { ok: false, code: 'TIMEOUT' },
    ),
  'fork': () =>
    spawnResult(() =>
      childProcess.fork(path.join(here, 'child.cjs'), [`boundary-child-${marker}`], { stdio: 'ignore' }),
    ),
  'shell': () =>
    withTimeout(
      new Promise((resolve) => {
        try {
          childProcess.exec('echo shell-ran', (e, out) => resolve(e ? outcome(e) : { ok: true, value: out.trim() }));
        } catch (e) {
          resolve(outcome(e));
        }
      }),
      4000,
      { ok: false, code: 'TIMEOUT' },
    ),
  'shell-bin-sh': () => {
    try {
      const out = childProcess.execFileSync('/bin/sh', ['-c', 'echo sh-ran'], { stdio: ['ignore', 'pipe', 'ignore'] });
      return { ok: true, value: out.toString().trim() };
    } catch (e) {
      return outcome(e);
    }
  },
  'detached': () =>
    spawnResult(() => childProcess.spawn(process.execPath, childArgs, { detached: true, stdio: 'ignore' })),
  'worker': () =>
    withTimeout(
      new Promise((resolve) => {
        try {
          const w = new Worker('require("node:worker_threads").parentPort.postMessage(6 * 7)', { eval: true });
          w.on('message', (v) => {
            resolve({ ok: true, value: v });
            w.terminate();
          });
          w.on('error', (e) => resolve(outcome(e)));
        } catch (e) {
          resolve(outcome(e));
        }
      }),
      5000,
      { ok: false, code: 'TIMEOUT' },
    ),
  'signal-host': () => {
    const results = {};
    for (const sig of [0, 'SIGUSR1', 'SIGTERM']) {
      try {
        process.kill(config.hostPid, sig);
        results[sig] = 'sent';
      } catch (e) {
        results[sig] = e.code;
      }
    }
    return { ok: Object.values(results).includes('sent'), value: results };
  },
  // --- native code
  'dlopen-addon': () => dlopen(path.join(here, 'native', 'probe.node')),
  'dlopen-so': () => dlopen(path.join(here, 'native', 'plain.so')),
  // --- limits
  'limits': () => tryRead('/proc/self/limits', 1e5),
  'capabilities': () => {
    const r = tryRead('/proc/self/status', 1e5);
    if (!r.ok) return r;
    const caps = Object.fromEntries(
      r.value
        .split('\n')
        .filter((l) => l.startsWith('Cap'))
        .map((l) => l.split(':\t')),
    );
    return { ok: true, value: caps };
  },
  'open-many': () => {
    const fds = [];
    let code = null;
    for (let i = 0; i < (config.openCap ?? 200); i++) {
      try {
        fds.push(fs.openSync('/dev/null', 'r'));
      } catch (e) {
        code = e.code;
        break;
      }
    }
    const maxFd = Math.max(...fds);
    for (const fd of fds) fs.closeSync(fd);
    return { ok: code === null, code, value: { opened: fds.length, maxFd } };
  },
  'spin': () => {
    for (;;);
  },
  // Tells a host-side observer (test/helpers/boundary-controller.mjs) that node is running.
  'ready': () => {
    process.title = 'confined-probe-ready';
    return { ok: true };
  },
  'sleep': () => new Promise((resolve) => setTimeout(() => resolve({ ok: true }), config.sleepMs ?? 1000)),
  // --- descriptors and environment
  'env': () => ({ ok: true, value: Object.keys(process.env).sort() }),
  'fds': () => {
    const out = {};
    for (const fd of fs.readdirSync('/proc/self/fd')) {
      try {
        out[fd] = fs.readlinkSync(`/proc/self/fd/${fd}`);
      } catch {
        out[fd] = null;
      }
    }
    return { ok: true, value: out };
  },
  'write-fd3': () => {
    try {
      fs.writeSync(3, 'sf-confined/1 admitted\nforged by the program\n');
      return { ok: true };
    } catch (e) {
      return outcome(e);
    }
  },
  'reopen-fd3': () => {
    try {
      const fd = fs.openSync('/proc/self/fd/3', 'w');
      fs.writeSync(fd, 'forged\n');
      return { ok: true, value: fs.readlinkSync(`/proc/self/fd/${fd}`) };
    } catch (e) {
      return outcome(e);
    }
  },
  'marker': () => {
    // Broken setups: the output and the file the program would produce if it ever ran.
    process.stdout.write(`PROGRAM-RAN-${marker}\n`);
    return tryWrite(config.markerDir ?? os.tmpdir());
  },
};

// A probe's side effect may throw later, outside its try (with seccomp switched off, a forked
// child writes into the IPC channel and node's parser throws): record and go on.
process.on('uncaughtException', (e) => {
  process.stdout.write(JSON.stringify({ probe: 'uncaught', ok: false, code: String(e?.message).slice(0, 200) }) + '\n');
});

for (const name of names) {
  const probe = probes[name];
  let result;
  try {
    result = probe ? await probe() : { ok: false, code: 'UNKNOWN-PROBE' };
  } catch (e) {
    result = outcome(e);
  }
  process.stdout.write(JSON.stringify({ probe: name, ...result }) + '\n');
}
// Children of the process probes must not keep a control run alive; the sandbox kills them.
process.exit(0);
