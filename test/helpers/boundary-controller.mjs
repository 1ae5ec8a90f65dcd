// A controller process of the boundary suite: runs one confined probe run in its own node
// process and reports on stdout, one JSON line each:
//   { event: 'launched', pid, namespace }       (pid: the bwrap monitor, host side)
//   { event: 'admitted', program, stage }   (host-side /proc view at admission, before go)
//   { event: 'running', fds, environ, hostInodes }   (with job.inspectRunning: the host-side view
//     of the program once its probe set the title 'confined-probe-ready', i.e. node is running)
//   { event: 'result', status, reason, namespace, admission, exit, lines }
// Usage: node boundary-controller.mjs '<job JSON>' with job = { root, maxRetained, probes,
// config }. The suite uses it for controller loss (it SIGKILLs this process), shared capacity
// (two of them on one root) and the inherited-descriptor check (it starts this process with a
// descriptor open without close-on-exec).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { childrenOf, runConfined } from './boundary-run.js';

const job = JSON.parse(process.argv[2]);

function say(obj) {
  fs.writeSync(1, JSON.stringify(obj) + '\n');
}

/** The host view of a process's descriptors: fd -> { link, dev, ino }. */
function fdView(pid) {
  const out = {};
  for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
    try {
      const st = fs.statSync(`/proc/${pid}/fd/${fd}`);
      out[fd] = { link: fs.readlinkSync(`/proc/${pid}/fd/${fd}`), dev: st.dev, ino: st.ino };
    } catch (error) {
      out[fd] = { error: error.code };
    }
  }
  return out;
}

// The host's own descriptors (the host ends of the launcher pipes are among them).
function ownInodes() {
  return Object.values(fdView(process.pid))
    .map((v) => v.ino)
    .filter(Boolean);
}

// A descriptor inherited at fd 3 without close-on-exec: node marks inherited descriptors
// close-on-exec at startup, so a host-side addon built by the test clears the flag again.
if (job.clearCloexec) {
  const m = { exports: {} };
  process.dlopen(m, job.clearCloexec);
  const flags = m.exports.clearCloexec(3);
  const fdinfo = fs.readFileSync('/proc/self/fdinfo/3', 'latin1');
  say({ event: 'cloexec-cleared', fdFlags: flags, fdinfoFlags: /^flags:\s*(\S+)/m.exec(fdinfo)[1] });
}

// Negative control of the descriptor check: an ordinary unconfined child of this process, with
// default stdio, lists its descriptors' inodes; a descriptor this process holds without
// close-on-exec shows up there.
if (job.controlFds) {
  const listing = spawnSync(
    process.execPath,
    [
      '-e',
      "const fs=require('fs');console.log(JSON.stringify(fs.readdirSync('/proc/self/fd').map(f=>{try{return fs.statSync('/proc/self/fd/'+f).ino}catch{return null}})))",
    ],
    { stdio: ['ignore', 'pipe', 'ignore'], env: {} },
  );
  say({ event: 'control-fds', inodes: JSON.parse(listing.stdout.toString()) });
}

// At admission the program is still the stage's child, before its exec (the gate runs there):
// the program's own descriptors and environment exist once node runs. Its probe says so by
// setting its title, which the host reads in /proc/<pid>/cmdline.
function inspectWhenReady(pid) {
  const started = performance.now();
  const timer = setInterval(() => {
    let cmdline = '';
    try {
      cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, 'latin1');
    } catch (error) {
      clearInterval(timer);
      say({ event: 'running', error: `${error.code ?? ''} ${error.message}` });
      return;
    }
    if (!cmdline.startsWith('confined-probe-ready')) {
      if (performance.now() - started > 20_000) {
        clearInterval(timer);
        say({ event: 'running', error: 'the probe never became ready' });
      }
      return;
    }
    clearInterval(timer);
    const report = { event: 'running' };
    try {
      report.hostInodes = ownInodes();
      report.fds = fdView(pid);
      report.environ = fs.readFileSync(`/proc/${pid}/environ`, 'latin1').split('\0').filter(Boolean);
    } catch (error) {
      report.error = `${error.code ?? ''} ${error.message}`;
    }
    say(report);
  }, 5);
}

let launched = null;
const { result, lines } = await runConfined({
  root: job.root,
  maxRetained: job.maxRetained,
  probes: job.probes,
  config: job.config ?? {},
  onEvent(message) {
    if (message.event === 'launched') {
      launched = message.pid;
      say({ event: 'launched', pid: message.pid, namespace: message.namespace });
    }
    if (message.event === 'admitted') {
      // Synchronous, before the go byte: bwrap monitor -> stage (pid 1 inside) -> program.
      const report = { event: 'admitted' };
      try {
        const stages = childrenOf(launched);
        const programs = stages.flatMap((s) => childrenOf(s));
        report.stage = stages;
        report.program = programs;
        report.hostInodes = ownInodes();
        if (job.inspectRunning && programs.length === 1) inspectWhenReady(programs[0]);
      } catch (error) {
        report.error = `${error.code ?? ''} ${error.message}`;
      }
      say(report);
    }
  },
});
say({
  event: 'result',
  status: result.status,
  reason: result.reason ?? null,
  namespace: result.namespace,
  admission: result.process?.admission ?? null,
  exit: result.process?.exit ?? null,
  lines,
});
