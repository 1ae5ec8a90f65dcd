// The lifecycle both command backends share (Linux bwrap in lib/confinement.js, macOS Seatbelt in
// lib/darwin/confinement.js): the frozen handle, first-wins stop reasons (stop, abort, wall
// timeout, a limit report that does not match), the capped output, the start-up stages, pipe and
// exit accounting and the frozen result. What differs per platform is the process: the backend's
// spawn() returns
//   { pid, pipes: { stdout, stderr, control, ...more }, kill() -> sent, exited() -> bool,
//     onExit(cb), exitOf(killSent) -> { code, signal }, unref() }
// where kill() sends SIGKILL to the whole tree only while its process is unreaped, exited() says
// the command's exit is already known (a stop then records nothing), and exitOf() reads the exit
// once the result is settled. spawn() throws the refusal itself (it records the admission).
import { cappedOutput, watchLimitReport } from './command-output.js';
import { CLOSE_GRACE_MS, KILL_CONFIRM_MS } from './constants.js';

/**
 * Runs one admitted command. The start-up stages are published on `channel` (a
 * diagnostics_channel) as frozen { event, command, pid, stop }; `beforeResult()` (optional) is
 * awaited before wait() resolves (the egress proxy's close). Returns the frozen handle.
 */
export function commandLifecycle(opts, posture, { channel, stderrTailBytes, limitsMatch, spawn, beforeResult = null }) {
  const limits = opts.limits;
  const output = cappedOutput({ stdout: limits.maxStdoutBytes, stderr: limits.maxStderrBytes }, stderrTailBytes);
  let proc = null;
  let stopped = null; // 'stop' | 'abort' | 'timeout' | 'limits'
  let killSent = false;
  let settled = null;
  let resolveResult;
  const resultPromise = new Promise((r) => {
    resolveResult = r;
  });
  let timers = [];
  let open = new Set();
  const onAbort = () => stopWith('abort');

  const handle = Object.freeze({
    get pid() {
      return proc ? proc.pid : 0;
    },
    stdout: output.streams.stdout,
    stderr: output.streams.stderr,
    confined: true,
    posture,
    wait: () => resultPromise,
    stop: () => {
      stopWith('stop');
      return resultPromise;
    },
  });
  const stage = (event) => {
    if (channel.hasSubscribers) channel.publish(Object.freeze({ event, command: opts.command, pid: handle.pid, stop: handle.stop }));
  };

  function stopWith(reason) {
    if (settled || stopped !== null) return;
    if (proc === null) {
      stopped = reason; // not spawned yet: nothing will be
      return;
    }
    if (proc.exited()) return; // the exit was seen first
    stopped = reason;
    killSent = proc.kill() || killSent;
    timers.push(setTimeout(settle, KILL_CONFIRM_MS));
  }

  function settle() {
    if (settled) return;
    for (const t of timers) clearTimeout(t);
    timers = [];
    opts.signal?.removeEventListener('abort', onAbort);
    const { code, signal } = proc ? proc.exitOf(killSent) : { code: null, signal: null };
    // Abandoned (never reaped, or a pipe still open): it stops keeping the event loop alive.
    if (proc && (!proc.reaped || open.size > 0)) proc.unref();
    output.end();
    settled = Object.freeze({
      code,
      signal,
      timedOut: stopped === 'timeout',
      truncated: output.truncated,
      aborted: stopped === 'stop' || stopped === 'abort',
      confined: true,
      posture,
      stderrTail: output.stderrTail(),
    });
    const result = settled;
    const done = () => {
      resolveResult(result);
      stage('settled');
    };
    if (beforeResult) beforeResult().then(done, done);
    else done();
  }

  // Stage "admitted": validated, admission recorded, nothing spawned yet.
  opts.signal?.addEventListener('abort', onAbort, { once: true });
  stage('admitted');
  if (stopped === null && opts.signal?.aborted) stopped = 'abort';
  if (stopped !== null) {
    settle();
    return handle;
  }

  try {
    proc = spawn();
  } catch (err) {
    opts.signal?.removeEventListener('abort', onAbort);
    throw err;
  }
  if (limits.wallTimeoutMs !== null) timers.push(setTimeout(() => stopWith('timeout'), limits.wallTimeoutMs));
  proc.pipes.stdout.on('data', output.onOutput('stdout'));
  proc.pipes.stderr.on('data', output.onOutput('stderr'));
  watchLimitReport(proc.pipes.control, (measured) => limitsMatch(measured, limits), {
    onMatch: () => stage('running'),
    onMismatch: () => stopWith('limits'),
  });
  open = new Set(Object.keys(proc.pipes));
  for (const name of open) {
    proc.pipes[name].on('error', () => {});
    proc.pipes[name].on('close', () => {
      open.delete(name);
      if (open.size === 0 && proc.reaped) settle();
    });
  }
  proc.onExit(() => {
    stage('exited');
    if (open.size === 0) return settle();
    timers.push(setTimeout(settle, CLOSE_GRACE_MS));
  });
  // Stage "spawned": the process exists and the handle knows its pid; 'running' follows once
  // the stage's limit report matched.
  stage('spawned');
  return handle;
}
