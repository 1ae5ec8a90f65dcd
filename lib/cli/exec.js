// `confined exec`: one command through runConfinedCommand, its output streamed live.
import { realpathSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { integerOption, parseArgs, UsageError } from './args.js';

/** Exit codes of `confined exec` beyond the command's own. */
export const EXEC_EXIT = Object.freeze({
  /** runConfinedCommand refused: nothing was started (sysexits EX_CONFIG). */
  refused: 78,
  /** The command's end could not be read (neither code nor signal). */
  unknown: 70,
});

export const EXEC_HELP = `Usage: confined exec [options] -- COMMAND [ARGS...]

Runs COMMAND confined by bubblewrap: the system directories read-only, only the mounts
you list, no network unless allowed, a fresh environment. Output is streamed live.

Options:
  --ro PATH               bind PATH read-only at the same path; repeatable
  --rw PATH               bind PATH read-write at the same path; repeatable
  --cwd DIR               working directory, inside a mount (default: the current one)
  --env K=V               set an environment variable (nothing is inherited); repeatable
  --allow HOST:PORT       allow connections to exactly HOST:PORT through the egress
                          proxy; repeatable (default: loopback only)
  --timeout-ms N          wall-clock limit; the whole process tree is ended
  --max-output-bytes N    cap of each of stdout and stderr (default 1 MiB each)
  -h, --help              this help

Paths may be relative; they are resolved and must exist. The first argument that is not an
option also starts the command, so "--" is needed only before a command starting with "-".

Exit status:
  the command's exit code, or 128+n if it died of signal n (a timeout kills: 137)
  ${EXEC_EXIT.refused}    refused before anything started (no confinement on this host, a cwd
        outside the mounts, an invalid allowlist entry...)
  64    usage error
  ${EXEC_EXIT.unknown}    the command's end could not be read
`;

const SPEC = {
  ro: { value: true, multiple: true },
  rw: { value: true, multiple: true },
  cwd: { value: true },
  env: { value: true, multiple: true },
  allow: { value: true, multiple: true },
  'timeout-ms': { value: true },
  'max-output-bytes': { value: true },
  help: { value: false },
};

function existingPath(value, name) {
  try {
    return realpathSync(path.resolve(value));
  } catch (error) {
    throw new UsageError(
      `${name} ${JSON.stringify(value)}: ${error.code === 'ENOENT' ? 'no such file or directory' : error.message}`,
    );
  }
}

/** Parses the command line of `confined exec`; throws UsageError. */
export function parseExec(argv) {
  const { options, rest } = parseArgs(argv, SPEC, { stopAtPositional: true });
  if (options.help) return { help: true };
  if (rest.length === 0) throw new UsageError('missing COMMAND (after --)');
  const mounts = [];
  for (const value of options.ro ?? []) mounts.push({ path: existingPath(value, '--ro'), mode: 'ro' });
  for (const value of options.rw ?? []) mounts.push({ path: existingPath(value, '--rw'), mode: 'rw' });
  const env = {};
  for (const pair of options.env ?? []) {
    const eq = pair.indexOf('=');
    if (eq <= 0) throw new UsageError(`--env ${JSON.stringify(pair)} is not NAME=VALUE`);
    env[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  const limits = {};
  const timeout = integerOption(options, 'timeout-ms', 1, Number.MAX_SAFE_INTEGER, undefined);
  if (timeout !== undefined) limits.wallTimeoutMs = timeout;
  const cap = integerOption(options, 'max-output-bytes', 1, Number.MAX_SAFE_INTEGER, undefined);
  if (cap !== undefined) {
    limits.maxStdoutBytes = cap;
    limits.maxStderrBytes = cap;
  }
  for (const entry of options.allow ?? []) {
    if (!/^[^\s:]+:\d+$|^\[[^\]]+\]:\d+$/.test(entry))
      throw new UsageError(`--allow ${JSON.stringify(entry)} is not HOST:PORT`);
  }
  const request = { command: rest[0], args: rest.slice(1), mounts, env, limits };
  if (options.cwd !== undefined) request.cwd = existingPath(options.cwd, '--cwd');
  return { help: false, request, allow: options.allow ?? [] };
}

/**
 * Runs `confined exec`. Returns the exit code.
 * @param {string[]} argv
 * @param {{ stdout: NodeJS.WritableStream, stderr: NodeJS.WritableStream }} io
 */
export async function execCommand(argv, io) {
  const parsed = parseExec(argv);
  if (parsed.help) {
    io.stdout.write(EXEC_HELP);
    return 0;
  }
  const { runConfinedCommand, ConfinementError } = await import('../confinement.js');
  const controller = new AbortController();
  const options = { ...parsed.request, signal: controller.signal };
  if (parsed.allow.length > 0) {
    options.network = {
      allowlist: parsed.allow,
      onDenied: (denial) =>
        io.stderr.write(`confined exec: egress denied: ${denial.host}:${denial.port ?? '?'} (${denial.reason})\n`),
    };
  }
  const onSignal = () => controller.abort();
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    let handle;
    try {
      handle = await runConfinedCommand(options);
    } catch (error) {
      if (error instanceof ConfinementError) {
        io.stderr.write(`confined exec: refused (${error.code}): ${error.message}\n`);
        return EXEC_EXIT.refused;
      }
      throw error;
    }
    handle.stdout.on('data', (chunk) => io.stdout.write(chunk));
    handle.stderr.on('data', (chunk) => io.stderr.write(chunk));
    const result = await handle.wait();
    if (result.timedOut) io.stderr.write(`confined exec: the wall timeout fired; the command was ended\n`);
    if (result.truncated) io.stderr.write(`confined exec: output beyond the cap was discarded\n`);
    if (result.code !== null) return result.code;
    const n = result.signal ? os.constants.signals[result.signal] : undefined;
    return n ? 128 + n : EXEC_EXIT.unknown;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}
