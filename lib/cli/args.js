// Command-line parsing for bin/confined.js: small, strict, and every error names the argument.

/** Exit code of a usage error (sysexits EX_USAGE). */
export const EXIT_USAGE = 64;

/** A bad command line: printed with the command's name, exits EXIT_USAGE. */
export class UsageError extends Error {
  constructor(message) {
    super(message);
    this.name = 'UsageError';
  }
}

/**
 * Parses argv against `spec`, a map of long option names (without `--`) to
 * `{ value: boolean, multiple?: boolean }`. `--name value` and `--name=value` both work; `--`
 * ends the options and everything after it is `rest`. With `stopAtPositional`, the first
 * positional also ends the options (it and what follows are `rest`, as for `env` or `sudo`).
 * Returns `{ options, positionals, rest, sawDashDash }`.
 */
export function parseArgs(argv, spec, { stopAtPositional = false } = {}) {
  const options = { __proto__: null };
  const positionals = [];
  let rest = [];
  let sawDashDash = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--') {
      rest = argv.slice(i + 1);
      sawDashDash = true;
      break;
    }
    if (arg.startsWith('--') || (arg.startsWith('-') && arg.length > 1)) {
      if (arg === '-h') {
        options.help = true;
        continue;
      }
      if (!arg.startsWith('--')) throw new UsageError(`unknown option ${JSON.stringify(arg)}`);
      const eq = arg.indexOf('=');
      const name = eq < 0 ? arg.slice(2) : arg.slice(2, eq);
      const def = spec[name];
      if (!def) throw new UsageError(`unknown option --${name}`);
      let value = true;
      if (def.value) {
        if (eq >= 0) value = arg.slice(eq + 1);
        else if (i + 1 < argv.length) value = argv[++i];
        else throw new UsageError(`--${name} needs a value`);
      } else if (eq >= 0) {
        throw new UsageError(`--${name} takes no value`);
      }
      if (def.multiple) (options[name] ??= []).push(value);
      else if (name in options) throw new UsageError(`--${name} is given more than once`);
      else options[name] = value;
      continue;
    }
    if (stopAtPositional) {
      rest = argv.slice(i);
      break;
    }
    positionals.push(arg);
  }
  return { options, positionals, rest, sawDashDash };
}

/** An integer option within [min, max], or `fallback` when absent; the error names the option. */
export function integerOption(options, name, min, max, fallback) {
  const text = options[name];
  if (text === undefined) return fallback;
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(Number(text)))
    throw new UsageError(`--${name} ${JSON.stringify(text)} is not a whole number`);
  const n = Number(text);
  if (n < min || n > max) throw new UsageError(`--${name} ${n} is outside ${min}..${max}`);
  return n;
}
