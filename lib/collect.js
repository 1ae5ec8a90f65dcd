// Collection of one executor run: output bounds, the control channel, the gate, stop reasons,
// reaping and settling. Produces the raw facts; lib/executor.js shapes the result.
import {
  CLOSE_GRACE_MS,
  CONTROL_MAX_BYTES,
  GO_BYTE,
  KILL_CONFIRM_MS,
  REFUSAL_EXIT_CODE,
} from './constants.js';
import { ADMISSION_RECORD } from './profile.js';
import { signalName } from './signals.js';

const LIMIT_LINE = /^limit (cpu|descriptors|core|file|processes) (soft|hard) (unlimited|[0-9]{1,20})$/;
const LIMIT_KEYS = {
  cpu: 'cpuSeconds',
  descriptors: 'descriptors',
  core: 'coreBlocks',
  file: 'fileBlocks',
  processes: 'processes',
};
const LIMIT_ORDER = ['cpu', 'descriptors', 'core', 'file', 'processes'];
const STATUS_LINE = /^status (exited|signaled|unexecuted) ([0-9]{1,3}) ([0-9]{1,20}) ([0-9]{1,20}) ([0-9]{1,20})\n$/;

/**
 * Parses the stage's limit lines (native/exe/stage.c): each limit soft then hard, in the stage's
 * order; four limits, or five when processes was asked for. Returns { cpuSeconds: { soft, hard },
 * ... } or null when `lines` are not exactly that.
 */
function parseLimitLines(lines) {
  if (lines.length !== 8 && lines.length !== 10) return null;
  const limits = {};
  for (let i = 0; i < lines.length; i++) {
    const m = LIMIT_LINE.exec(lines[i]);
    if (!m || m[1] !== LIMIT_ORDER[i >> 1]) return null;
    if (m[2] !== (i % 2 === 0 ? 'soft' : 'hard')) return null;
    const key = LIMIT_KEYS[m[1]];
    const value = m[3] === 'unlimited' ? 'unlimited' : Number(m[3]);
    limits[key] = { ...(limits[key] ?? {}), [m[2]]: value };
  }
  return limits;
}

/**
 * Parses a control text that holds only the stage's limit report (a program that does not keep
 * the control channel, such as a command): the limits, or null when malformed.
 */
export function parseLimitReport(text) {
  const lines = text.split('\n');
  if (lines.pop() !== '') return null;
  return parseLimitLines(lines);
}

/**
 * Parses the control text: eight limit lines (each limit soft then hard, in the stage's
 * order), optionally followed by the admission record. Returns { limits, admitted } or null
 * when the text is not exactly that (malformed).
 */
export function parseControl(text) {
  const lines = text.split('\n');
  if (lines.pop() !== '') return null; // must end with a newline (or be empty)
  if (lines.length === 0) return { limits: null, admitted: false };
  if (lines.length !== 8 && lines.length !== 9) return null;
  const limits = parseLimitLines(lines.slice(0, 8));
  if (!limits) return null;
  if (lines.length === 9 && `${lines[8]}\n` !== ADMISSION_RECORD) return null;
  return { limits, admitted: lines.length === 9 };
}

/** True when the measured limits are exactly what the request asked for. */
export function limitsMatch(limits, request) {
  const eq = (pair, v) => pair.soft === v && pair.hard === v;
  return (
    eq(limits.cpuSeconds, request.cpuSeconds) &&
    eq(limits.descriptors, request.maxDescriptors) &&
    eq(limits.coreBlocks, 0) &&
    eq(limits.fileBlocks, 0)
  );
}

/**
 * Parses the stage's status record. `unexecuted` is the errno of a failed execve after the
 * gate (the child then exited REFUSAL_EXIT_CODE, which is reported as its exit); otherwise null.
 */
export function parseStatus(text) {
  const m = STATUS_LINE.exec(text);
  if (!m) return null;
  const n = Number(m[2]);
  let exit;
  if (m[1] === 'exited') exit = { code: n, signal: null };
  else if (m[1] === 'signaled') exit = { code: null, signal: signalName(n) };
  else exit = { code: REFUSAL_EXIT_CODE, signal: null };
  return {
    exit,
    unexecuted: m[1] === 'unexecuted' ? n : null,
    resources: {
      userCpuMs: Number(m[3]) / 1000,
      systemCpuMs: Number(m[4]) / 1000,
      maxRssKiB: Number(m[5]),
    },
  };
}

/** Observation seam for benchmarks (reached through lib/testing.js only). */
export const observers = { onFacts: null };

/**
 * Collects one launched process. Resolves once, with the raw facts:
 * { control, controlOverflow, statusText, stopped, killSent, launcherExit, reaped,
 *   pipesClosed, stdout, stderr, outputBytes, goSent, durationMs }.
 * `hooks.onAdmitted()` runs synchronously when the admission record arrived (diagnostics).
 */
export function collect(proc, { request, signal, startedAt, hooks }) {
  return new Promise((resolve) => {
    const max = request.maxOutputBytes;
    const kept = { stdout: [], stderr: [] };
    let keptBytes = 0;
    let outputBytes = 0;
    let control = Buffer.alloc(0);
    let controlOverflow = false;
    let statusText = '';
    let stopped = null;
    let killSent = false;
    let programExited = false;
    let goSent = false;
    let settled = false;
    let stoppedAt = null;
    let reapedAt = null;
    const open = new Set(['stdout', 'stderr', 'control', 'status']);
    let graceTimer = null;
    let killTimer = null;

    const stop = (reason) => {
      // First stop wins, and none is recorded after the exit was seen.
      if (stopped !== null || proc.reaped || programExited) return;
      stopped = reason;
      stoppedAt = performance.now();
      proc.closeStdin();
      // The launcher's death ends every process of the run (its pid namespace), at any moment.
      killSent = proc.kill();
      killTimer = setTimeout(() => settle(), KILL_CONFIRM_MS);
    };

    const timeout = setTimeout(() => stop('timeout'), request.timeoutMs);
    const onAbort = () => stop('cancelled');
    signal?.addEventListener('abort', onAbort, { once: true });
    // An abort between the spawn and this point (EX-1) fires no event any more: stop now
    // rather than wait for the gate, which a launcher that hangs before it never reaches.
    if (signal?.aborted) onAbort();

    const onOutput = (name) => (chunk) => {
      outputBytes += chunk.length;
      if (keptBytes < max) {
        const take = Math.min(chunk.length, max - keptBytes);
        kept[name].push(take === chunk.length ? chunk : chunk.subarray(0, take));
        keptBytes += take;
      }
      if (outputBytes > max) stop('output-limit');
    };
    proc.stdout.on('data', onOutput('stdout'));
    proc.stderr.on('data', onOutput('stderr'));

    proc.control.on('data', (chunk) => {
      if (control.length + chunk.length > CONTROL_MAX_BYTES) {
        controlOverflow = true;
        stop('control-malformed');
        return;
      }
      control = Buffer.concat([control, chunk]);
    });
    // The gate: decided when the control channel reaches end-of-file, which means no process
    // holds its write end any more (the stage's gate closed it before waiting for go).
    proc.control.on('end', () => {
      if (controlOverflow) return;
      const parsed = parseControl(control.toString('latin1'));
      if (!parsed) return stop('control-malformed');
      if (!parsed.admitted) return; // absent or refused: the program never runs
      hooks.onAdmitted?.();
      if (!limitsMatch(parsed.limits, request)) return stop('limits-mismatch');
      if (stopped !== null) return;
      // Checked at this very moment: an abort before go never lets the entry load.
      if (signal?.aborted) return stop('cancelled');
      goSent = proc.writeStdinAndClose(Buffer.of(GO_BYTE));
    });
    proc.status.on('data', (chunk) => {
      if (statusText.length < 256) statusText += chunk.toString('latin1');
      if (statusText.endsWith('\n')) programExited = true;
    });

    for (const name of open) {
      proc[name].on('close', () => {
        open.delete(name);
        if (open.size === 0 && proc.reaped) settle();
      });
      proc[name].on('error', () => {}); // a read error ends the stream; 'close' follows
    }

    proc.onExit(() => {
      reapedAt = performance.now();
      proc.closeStdin();
      if (open.size === 0) return settle();
      graceTimer = setTimeout(() => settle(), CLOSE_GRACE_MS);
    });

    function settle() {
      if (settled) return;
      settled = true;
      clearTimeout(timeout);
      clearTimeout(graceTimer);
      clearTimeout(killTimer);
      signal?.removeEventListener('abort', onAbort);
      const pipesClosed = open.size === 0;
      if (!proc.reaped || !pipesClosed) proc.unref();
      const stdout = Buffer.concat(kept.stdout);
      const stderr = Buffer.concat(kept.stderr);
      const facts = {
        control: control.toString('latin1'),
        controlOverflow,
        statusText,
        stopped,
        killSent,
        goSent,
        launcherExit: proc.exit,
        reaped: proc.reaped,
        pipesClosed,
        stdout,
        stderr,
        outputBytes,
        durationMs: performance.now() - startedAt,
      };
      // Benchmarks (bench/) read how long a stop took to reap; nothing else does.
      observers.onFacts?.({ ...facts, stoppedAt, reapedAt });
      resolve(facts);
    }
  });
}

export { REFUSAL_EXIT_CODE };
