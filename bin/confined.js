#!/usr/bin/env node
// The `confined` command: run, exec, doctor. See `confined --help`.
import { EXIT_USAGE, UsageError } from '../lib/cli/args.js';

const HELP = `Usage: confined <command> [options]

Commands:
  run <program-dir>     run a Node.js program confined and report what the host observed
  exec -- COMMAND       run a command confined, output streamed live
  doctor                check that this host can confine, line by line

"confined <command> --help" describes each command.
`;

const COMMANDS = {
  run: async (argv, io) => (await import('../lib/cli/run.js')).runCommand(argv, io),
  exec: async (argv, io) => (await import('../lib/cli/exec.js')).execCommand(argv, io),
  doctor: async (argv, io) => (await import('../lib/cli/doctor.js')).doctorCommand(argv, io),
};

async function main(argv) {
  const io = { stdout: process.stdout, stderr: process.stderr };
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    (name === undefined ? process.stderr : process.stdout).write(HELP);
    return name === undefined ? EXIT_USAGE : 0;
  }
  const command = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : null;
  if (!command) {
    process.stderr.write(`confined: unknown command ${JSON.stringify(name)}\n${HELP}`);
    return EXIT_USAGE;
  }
  try {
    return await command(rest, io);
  } catch (error) {
    if (error instanceof UsageError) {
      process.stderr.write(`confined ${name}: ${error.message}\nTry "confined ${name} --help".\n`);
      return EXIT_USAGE;
    }
    process.stderr.write(`confined ${name}: ${error.stack ?? error}\n`);
    return 70;
  }
}

process.exitCode = await main(process.argv.slice(2));
