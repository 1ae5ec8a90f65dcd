// `confined run`: one program directory through the executor, with a fresh private root.
import { isUtf8 } from 'node:buffer';
import { existsSync, mkdtempSync, realpathSync, rmdirSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  MAX_CPU_SECONDS,
  MAX_DESCRIPTORS,
  MAX_OUTPUT_BYTES,
  MAX_TIMEOUT_MS,
  MIN_DESCRIPTORS,
} from '../constants.js';
import { integerOption, parseArgs, UsageError } from './args.js';

/** Exit codes of `confined run` when the program's own code cannot stand for the run. */
export const RUN_EXIT = Object.freeze({
  /** The program or input directory cannot be held by a snapshot (sysexits EX_DATAERR). */
  snapshot: 65,
  /** not-started: no process existed (including a host describeRuntime refuses). */
  notStarted: 70,
  /** unresolved: the process was not confirmed gone, or its pipes stayed open. */
  unresolved: 71,
  /** observed but not attributable: the output cannot be credited to the pins. */
  notAttributable: 72,
});

export const RUN_DEFAULTS = Object.freeze({
  timeoutMs: 30_000,
  cpuSeconds: 10,
  maxOutputBytes: 1024 * 1024,
  maxDescriptors: 128,
});

/** Entries tried, in order, when --entry is not given. */
export const DEFAULT_ENTRIES = Object.freeze([
  'index.mjs',
  'index.js',
  'index.cjs',
  'main.mjs',
  'main.js',
  'main.cjs',
  'index.mts',
  'index.ts',
]);

export const RUN_HELP = `Usage: confined run <program-dir> [options] [-- args...]

Runs the Node.js program in <program-dir> confined (read-only snapshots, no network, no
writes, no child processes) and prints what the host observed.

Options:
  --entry FILE            entry file, relative to <program-dir>
                          (default: the first of ${DEFAULT_ENTRIES.join(', ')})
  --input DIR             directory snapshotted as the read-only working directory
                          (default: an empty one)
  --ignore NAME           skip files and directories with this name, at any depth; repeatable
                          (default: .git)
  --timeout-ms N          wall-clock limit (default ${RUN_DEFAULTS.timeoutMs})
  --cpu-seconds N         CPU-time limit (default ${RUN_DEFAULTS.cpuSeconds})
  --max-output-bytes N    stdout+stderr kept (default ${RUN_DEFAULTS.maxOutputBytes})
  --max-descriptors N     open-file limit (default ${RUN_DEFAULTS.maxDescriptors}, at least ${MIN_DESCRIPTORS})
  --root DIR              executor root: an existing directory you own, mode 0700
                          (default: a fresh one under the temporary directory, removed
                          afterwards when empty)
  --json                  print the frozen result as JSON; stdout and stderr are strings,
                          with stdoutEncoding/stderrEncoding "utf8", or "base64" when the
                          bytes are not valid UTF-8
  -h, --help              this help

Exit status:
  the program's exit code    observed and attributable (128+n if it died of signal n)
  ${RUN_EXIT.notAttributable}                         observed, not attributable (see problems)
  ${RUN_EXIT.unresolved}                         unresolved (the process was not confirmed gone)
  ${RUN_EXIT.notStarted}                         not started (host, pins, root, capacity...)
  ${RUN_EXIT.snapshot}                         a directory cannot be snapshotted (symlink, special file, path rules)
  64                         usage error
A program may itself exit with one of these codes: use --json to tell them apart. With
--json, an error before the run (64, 65, or 70 when the runtime cannot be pinned) prints a
message on stderr and nothing on stdout.
`;

const SPEC = {
  entry: { value: true },
  input: { value: true },
  ignore: { value: true, multiple: true },
  'timeout-ms': { value: true },
  'cpu-seconds': { value: true },
  'max-output-bytes': { value: true },
  'max-descriptors': { value: true },
  root: { value: true },
  json: { value: false },
  help: { value: false },
};

function directoryArgument(value, name) {
  let st;
  try {
    st = statSync(value);
  } catch (error) {
    throw new UsageError(`${name} ${JSON.stringify(value)}: ${error.code === 'ENOENT' ? 'no such directory' : error.message}`);
  }
  if (!st.isDirectory()) throw new UsageError(`${name} ${JSON.stringify(value)} is not a directory`);
  return path.resolve(value);
}

/** Parses the command line of `confined run`; throws UsageError. */
export function parseRun(argv) {
  const { options, positionals, rest } = parseArgs(argv, SPEC);
  if (options.help) return { help: true };
  if (positionals.length === 0) throw new UsageError('missing <program-dir>');
  if (positionals.length > 1)
    throw new UsageError(`unexpected argument ${JSON.stringify(positionals[1])} (program arguments go after --)`);
  const programDir = directoryArgument(positionals[0], '<program-dir>');
  const inputDir = options.input === undefined ? null : directoryArgument(options.input, '--input');
  let entry = options.entry;
  if (entry !== undefined && entry.startsWith('./')) entry = entry.slice(2);
  if (entry === undefined) {
    entry = DEFAULT_ENTRIES.find((name) => existsSync(path.join(programDir, name)));
    if (!entry)
      throw new UsageError(`<program-dir> ${positionals[0]} has none of ${DEFAULT_ENTRIES.join(', ')}: give --entry`);
  }
  let root = null;
  if (options.root !== undefined) {
    root = directoryArgument(options.root, '--root');
  }
  return {
    help: false,
    programDir,
    inputDir,
    entry,
    ignore: options.ignore,
    args: rest,
    root,
    json: options.json === true,
    timeoutMs: integerOption(options, 'timeout-ms', 1, MAX_TIMEOUT_MS, RUN_DEFAULTS.timeoutMs),
    cpuSeconds: integerOption(options, 'cpu-seconds', 1, MAX_CPU_SECONDS, RUN_DEFAULTS.cpuSeconds),
    maxOutputBytes: integerOption(options, 'max-output-bytes', 0, MAX_OUTPUT_BYTES, RUN_DEFAULTS.maxOutputBytes),
    maxDescriptors: integerOption(
      options,
      'max-descriptors',
      MIN_DESCRIPTORS,
      MAX_DESCRIPTORS,
      RUN_DEFAULTS.maxDescriptors,
    ),
  };
}

/** Bytes as a JSON-friendly string: UTF-8 text when valid, base64 otherwise. */
export function encodeOutput(buffer) {
  return isUtf8(buffer)
    ? { text: buffer.toString('utf8'), encoding: 'utf8' }
    : { text: buffer.toString('base64'), encoding: 'base64' };
}

/** The result as plain JSON data: the Buffers become strings with their encoding beside them. */
export function resultToJson(result) {
  if (!result.process) return result;
  const { stdout, stderr, ...facts } = result.process;
  const out = encodeOutput(stdout);
  const err = encodeOutput(stderr);
  return {
    ...result,
    process: {
      ...facts,
      stdout: out.text,
      stdoutEncoding: out.encoding,
      stderr: err.text,
      stderrEncoding: err.encoding,
    },
  };
}

/** The CLI's exit code for a result (see RUN_HELP). */
export function runExitCode(result) {
  if (result.status === 'not-started') return RUN_EXIT.notStarted;
  if (result.status === 'unresolved') return RUN_EXIT.unresolved;
  if (!result.attributable) return RUN_EXIT.notAttributable;
  const { exit } = result.process;
  if (exit.code !== null) return exit.code;
  const n = os.constants.signals[exit.signal];
  return n ? 128 + n : RUN_EXIT.notAttributable;
}

function formatLimit(pair) {
  return pair.soft === pair.hard ? String(pair.soft) : `${pair.soft}/${pair.hard}`;
}

/** The readable summary of a result. */
export function summarise(result, { programDir, inputDir, root }) {
  const lines = [];
  const row = (name, value) => lines.push(`${name.padEnd(14)}${value}`);
  row('status', result.status);
  if (result.status === 'not-started') {
    row('reason', result.reason);
    row('message', result.message);
    row('namespace', describeNamespace(result.namespace));
    return lines.join('\n') + '\n';
  }
  const p = result.process;
  if (result.status === 'observed') row('attributable', result.attributable ? 'yes' : 'no');
  for (const problem of result.problems) row('problem', problem);
  row('exit', p.exit === null ? 'not observed (not reaped)' : p.exit.signal ? `signal ${p.exit.signal}` : `code ${p.exit.code}`);
  row('stopped', p.stopped ?? 'no (ran to its end)');
  row('admission', p.admission);
  row('duration', `${p.durationMs.toFixed(1)} ms`);
  if (p.resources)
    row(
      'resources',
      `user ${p.resources.userCpuMs.toFixed(1)} ms, system ${p.resources.systemCpuMs.toFixed(1)} ms, max RSS ${p.resources.maxRssKiB} KiB`,
    );
  if (p.limits)
    row(
      'limits',
      `cpu ${formatLimit(p.limits.cpuSeconds)} s, descriptors ${formatLimit(p.limits.descriptors)}, core ${formatLimit(p.limits.coreBlocks)}, file ${formatLimit(p.limits.fileBlocks)} blocks`,
    );
  const kept = p.stdout.length + p.stderr.length;
  row('output', `${p.outputBytes} bytes${kept < p.outputBytes ? ` (${kept} kept)` : ''}`);
  const id = result.identities;
  row('program', `${programDir} (${id.program.digest}) entry ${id.program.entry}`);
  row('input', `${inputDir ?? '(empty)'} (${id.input.digest})`);
  row('runtime', id.runtime);
  row('profile', `${id.profile.name} ${id.profile.digest}`);
  row('namespace', describeNamespace(result.namespace));
  row('root', root);
  lines.push('--- stdout ---');
  const text = (buf) => (buf.length === 0 ? '' : buf.toString('utf8') + (buf[buf.length - 1] === 0x0a ? '' : '\n'));
  let body = lines.join('\n') + '\n' + text(p.stdout);
  body += '--- stderr ---\n' + text(p.stderr);
  return body;
}

function describeNamespace(ns) {
  if (ns === null) return 'none created';
  if (ns.state === 'removed') return `removed${ns.durable ? ' (durable)' : ''}`;
  return `quarantined at ${ns.path}: ${ns.reason}`;
}

/** A fresh 0700 root for this invocation, under the (real) temporary directory. */
function freshRoot() {
  const base = realpathSync(os.tmpdir());
  return mkdtempSync(path.join(base, 'confined-run-'));
}

/**
 * Runs `confined run`. Returns the exit code; writes to the given streams.
 * @param {string[]} argv
 * @param {{ stdout: NodeJS.WritableStream, stderr: NodeJS.WritableStream }} io
 */
export async function runCommand(argv, io) {
  const req = parseRun(argv);
  if (req.help) {
    io.stdout.write(RUN_HELP);
    return 0;
  }
  // Loaded here, not at the top: `--help` and usage errors work without the addon.
  const lib = await import('../index.js');
  const ignore = req.ignore === undefined ? undefined : { ignore: req.ignore };
  let program;
  let input;
  try {
    program = lib.snapshotFromDirectory(req.programDir, ignore);
    input = req.inputDir === null ? [] : lib.snapshotFromDirectory(req.inputDir, ignore);
  } catch (error) {
    io.stderr.write(`confined run: ${error.message}\n`);
    return RUN_EXIT.snapshot;
  }
  if (!program.some((file) => file.path === req.entry)) {
    throw new UsageError(`--entry ${JSON.stringify(req.entry)} is not a file of the snapshot of ${req.programDir}`);
  }
  let runtime;
  let profile;
  try {
    runtime = lib.describeRuntime().digest;
    profile = lib.confinedProfile().digest;
  } catch (error) {
    io.stderr.write(`confined run: not started: ${error.code ?? error.name}: ${error.message}\n`);
    io.stderr.write(`confined run: run "confined doctor" to see what this host lacks\n`);
    return RUN_EXIT.notStarted;
  }
  const ownRoot = req.root === null;
  const root = ownRoot ? freshRoot() : req.root;
  const controller = new AbortController();
  const onSignal = () => controller.abort();
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  let result;
  try {
    const executor = new lib.ConfinedExecutor({ root });
    result = await executor.run(
      {
        runtime,
        profile,
        program: { files: program, digest: lib.snapshotDigest(program), entry: req.entry, args: req.args },
        input: { files: input, digest: lib.snapshotDigest(input) },
        timeoutMs: req.timeoutMs,
        maxOutputBytes: req.maxOutputBytes,
        cpuSeconds: req.cpuSeconds,
        maxDescriptors: req.maxDescriptors,
      },
      controller.signal,
    );
  } catch (error) {
    if (error instanceof TypeError) throw new UsageError(error.message);
    throw error;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    if (ownRoot) {
      try {
        rmdirSync(root);
      } catch (error) {
        // A quarantined namespace stays for inspection: never removed recursively.
        io.stderr.write(`confined run: kept the root ${root} (${error.code ?? error.message})\n`);
      }
    }
  }
  if (req.json) io.stdout.write(JSON.stringify(resultToJson(result), null, 2) + '\n');
  else io.stdout.write(summarise(result, { programDir: req.programDir, inputDir: req.inputDir, root }));
  return runExitCode(result);
}
