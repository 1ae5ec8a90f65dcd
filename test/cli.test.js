// The `confined` command as a subprocess (run, exec, doctor, --help, usage errors, exit codes,
// --json), the snapshot builders (snapshotFromDirectory, snapshotFromGitTree) and the README's
// quick start verbatim. Expected values are computed here, independently of the CLI: contents
// written by the test, digests from the node:crypto reference, codes chosen at random.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes, randomInt } from 'node:crypto';
import {
  chmodSync,
  cpSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  realpathSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { bwrapPath } from '../lib/host.js';
import { runExitCode, RUN_EXIT } from '../lib/cli/run.js';
import { snapshotFromDirectory, snapshotFromGitTree } from '../lib/index.js';
import { referenceDigest } from './helpers/snapshot-reference.js';

const packageRoot = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const BIN = path.join(packageRoot, 'bin', 'confined.js');
// Under test:nobody the temporary directory must be os.tmpdir(): nobody can write nowhere else.
const scratch = mkdtempSync(path.join(realpathSync(os.tmpdir()), 'confined-cli-test-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

let counter = 0;
function tempDir(label) {
  const dir = path.join(scratch, `${label}-${counter++}`);
  mkdirSync(dir, { recursive: true });
  return dir;
}

/** Writes files ({ relpath: content }) under dir. */
function writeTree(dir, files) {
  for (const [rel, content] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    writeFileSync(path.join(dir, rel), content);
  }
}

const cliEnv = { ...process.env };
delete cliEnv.CONFINED_BWRAP;

function cli(args, { cwd = packageRoot, env = cliEnv } = {}) {
  const run = spawnSync(process.execPath, [BIN, ...args], {
    cwd,
    env,
    encoding: 'utf8',
    timeout: 180_000,
  });
  assert.equal(run.error, undefined, `the CLI ran: ${run.error}`);
  return run;
}

function show(run) {
  return `status ${run.status} signal ${run.signal}\n--- stdout\n${run.stdout}\n--- stderr\n${run.stderr}`;
}

/** The files of a directory as a snapshot, read here with plain fs (the independent side). */
function readTreeIndependently(dir, prefix = '') {
  const out = [];
  for (const entry of readdirSync(path.join(dir, prefix), { withFileTypes: true })) {
    const rel = prefix ? `${prefix}/${entry.name}` : entry.name;
    if (entry.isDirectory()) out.push(...readTreeIndependently(dir, rel));
    else out.push({ path: rel, content: new Uint8Array(execFileSync('cat', [path.join(dir, rel)])) });
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// --help and usage errors

describe('help and usage errors', () => {
  test('--help on the command and on each subcommand exits 0 and describes it', () => {
    const top = cli(['--help']);
    assert.equal(top.status, 0, show(top));
    for (const name of ['run', 'exec', 'doctor']) assert.match(top.stdout, new RegExp(`^  ${name}\\b`, 'm'));
    for (const [name, marker] of [
      ['run', /Usage: confined run <program-dir>/],
      ['exec', /Usage: confined exec \[options\] -- COMMAND/],
      ['doctor', /Usage: confined doctor/],
    ]) {
      for (const flag of ['--help', '-h']) {
        const run = cli([name, flag]);
        assert.equal(run.status, 0, show(run));
        assert.match(run.stdout, marker);
        assert.match(run.stdout, /Exit status/);
      }
    }
  });

  test('usage errors exit 64 and name the bad argument', () => {
    const cases = [
      [[], /Usage: confined <command>/],
      [['frobnicate'], /unknown command "frobnicate"/],
      [['run'], /missing <program-dir>/],
      [['run', path.join(scratch, 'absent')], /<program-dir> ".*absent": no such directory/],
      [['run', 'examples/hello', '--timeout-ms', 'soon'], /--timeout-ms "soon" is not a whole number/],
      [['run', 'examples/hello', '--max-descriptors', '3'], /--max-descriptors 3 is outside 32\.\./],
      [['run', 'examples/hello', '--cpu-seconds'], /--cpu-seconds needs a value/],
      [['run', 'examples/hello', '--frob'], /unknown option --frob/],
      [['run', 'examples/hello', 'extra'], /unexpected argument "extra" \(program arguments go after --\)/],
      [['run', 'examples/hello', '--entry', 'absent.mjs'], /--entry "absent.mjs" is not a file of the snapshot/],
      [['run', 'examples/hello', '--json', '--json'], /--json is given more than once/],
      [['exec'], /missing COMMAND/],
      [['exec', '--frob', '--', 'true'], /unknown option --frob/],
      [['exec', '--env', 'NOVALUE', '--', 'true'], /--env "NOVALUE" is not NAME=VALUE/],
      [['exec', '--ro', path.join(scratch, 'absent'), '--', 'true'], /--ro ".*absent": no such file or directory/],
      [['exec', '--allow', 'example.com', '--', 'true'], /--allow "example.com" is not HOST:PORT/],
      [['exec', '--timeout-ms', '-5', '--', 'true'], /unknown option "-5"|--timeout-ms "-5" is not a whole number/],
      [['doctor', 'now'], /unexpected argument "now"/],
    ];
    for (const [args, message] of cases) {
      const run = cli(args);
      assert.equal(run.status, 64, `${args.join(' ')}: ${show(run)}`);
      assert.match(run.stderr, message, args.join(' '));
    }
  });
});

// ---------------------------------------------------------------------------------------------
// confined run

describe('confined run', () => {
  test('the readable summary shows the status, attribution, exit, stop, duration, resources and output', () => {
    const who = randomBytes(6).toString('hex');
    const run = cli(['run', 'examples/hello', '--', who]);
    assert.equal(run.status, 0, show(run));
    assert.match(run.stdout, /^status +observed$/m);
    assert.match(run.stdout, /^attributable +yes$/m);
    assert.match(run.stdout, /^exit +code 0$/m);
    assert.match(run.stdout, /^stopped +no/m);
    assert.match(run.stdout, /^duration +\d+(\.\d+)? ms$/m);
    assert.match(run.stdout, /^resources +user [\d.]+ ms, system [\d.]+ ms, max RSS \d+ KiB$/m);
    assert.match(run.stdout, /^namespace +removed/m);
    assert.match(run.stdout, new RegExp(`^--- stdout ---\\nhello, ${who}, from a confined node ${process.version}$`, 'm'));
    // Only the five environment names of invariant 11 reach the program.
    assert.match(run.stdout, /^environment: HOME LC_ALL OPENSSL_CONF TMPDIR TZ$/m);
  });

  test('--json gives the frozen result; the exit code is the program\'s', () => {
    const program = tempDir('program');
    const input = tempDir('input');
    const code = randomInt(1, 64);
    const secret = randomBytes(12).toString('hex');
    writeTree(program, {
      'main.mjs':
        "import { readFileSync } from 'node:fs';\n" +
        "import { tell } from './lib/tell.mjs';\n" +
        "tell(readFileSync('data/secret.txt', 'utf8'));\n" +
        "console.error('to stderr');\n" +
        'process.exitCode = Number(process.argv[2]);\n',
      'lib/tell.mjs': 'export function tell(text) { console.log(`input says ${text}`); }\n',
    });
    writeTree(input, { 'data/secret.txt': secret, 'other.bin': randomBytes(100) });
    const run = cli([
      'run',
      program,
      '--entry',
      'main.mjs',
      '--input',
      input,
      '--json',
      '--timeout-ms',
      '60000',
      '--max-descriptors',
      '96',
      '--',
      String(code),
    ]);
    assert.equal(run.status, code, show(run));
    const result = JSON.parse(run.stdout);
    assert.equal(result.status, 'observed');
    assert.equal(result.attributable, true);
    assert.deepEqual(result.problems, []);
    assert.deepEqual(result.process.exit, { code, signal: null });
    assert.equal(result.process.admission, 'admitted');
    assert.equal(result.process.stopped, null);
    assert.equal(result.process.stdout, `input says ${secret}\n`);
    assert.equal(result.process.stdoutEncoding, 'utf8');
    assert.equal(result.process.stderr, 'to stderr\n');
    assert.equal(result.process.stderrEncoding, 'utf8');
    assert.equal(result.process.outputBytes, Buffer.byteLength(`input says ${secret}\n`) + 10);
    assert.equal(result.identities.program.digest, referenceDigest(readTreeIndependently(program)));
    assert.equal(result.identities.input.digest, referenceDigest(readTreeIndependently(input)));
    assert.equal(result.identities.program.entry, 'main.mjs');
    assert.deepEqual(result.identities.program.args, [String(code)]);
    assert.deepEqual(result.identities.bounds, {
      timeoutMs: 60000,
      maxOutputBytes: 1024 * 1024,
      cpuSeconds: 10,
      maxDescriptors: 96,
    });
    assert.deepEqual(result.process.limits.descriptors, { soft: 96, hard: 96 });
    assert.equal(result.namespace.state, 'removed');
  });

  test('--json output that is not UTF-8 is base64', () => {
    const program = tempDir('binary');
    const bytes = Buffer.from([0xff, 0xfe, 0x00, 0x80, ...randomBytes(16)]);
    writeTree(program, {
      'index.mjs': `process.stdout.write(Buffer.from('${bytes.toString('base64')}', 'base64'));\n`,
    });
    const run = cli(['run', program, '--json']);
    assert.equal(run.status, 0, show(run));
    const result = JSON.parse(run.stdout);
    assert.equal(result.process.stdoutEncoding, 'base64');
    assert.deepEqual(Buffer.from(result.process.stdout, 'base64'), bytes);
  });

  test('a timeout is a stop reason; the exit code follows the reported end', () => {
    const program = tempDir('spin');
    writeTree(program, { 'index.mjs': 'for (;;) {}\n' });
    const run = cli(['run', program, '--json', '--timeout-ms', '1500']);
    const result = JSON.parse(run.stdout);
    assert.equal(result.status, 'observed', show(run));
    assert.equal(result.process.stopped, 'timeout');
    assert.equal(result.process.exit.signal, 'SIGKILL');
    assert.equal(result.process.killSent, true);
    assert.equal(run.status, result.attributable ? 128 + os.constants.signals.SIGKILL : RUN_EXIT.notAttributable);
  });

  test('not-started exits 70 (a root that is not private is refused, nothing is created)', () => {
    const program = tempDir('refused-program');
    writeTree(program, { 'index.mjs': 'console.log(1)\n' });
    const root = tempDir('open-root');
    chmodSync(root, 0o755);
    const run = cli(['run', program, '--root', root, '--json']);
    assert.equal(run.status, RUN_EXIT.notStarted, show(run));
    assert.equal(RUN_EXIT.notStarted, 70);
    const result = JSON.parse(run.stdout);
    assert.equal(result.status, 'not-started');
    assert.equal(result.reason, 'setup-failed');
    assert.equal(result.namespace, null);
    assert.deepEqual(readdirSync(root), []);
    const text = cli(['run', program, '--root', root]);
    assert.equal(text.status, 70);
    assert.match(text.stdout, /^status +not-started\nreason +setup-failed\nmessage +executor root refused/m);
  });

  test('a directory a snapshot cannot hold exits 65 and names the path', () => {
    const program = tempDir('with-link');
    writeTree(program, { 'index.mjs': 'console.log(1)\n' });
    symlinkSync('/etc/passwd', path.join(program, 'passwd'));
    const run = cli(['run', program]);
    assert.equal(run.status, RUN_EXIT.snapshot, show(run));
    assert.equal(RUN_EXIT.snapshot, 65);
    assert.match(run.stderr, /"passwd" is a symbolic link/);
    // --ignore skips it (at any depth), and the run goes ahead.
    mkdirSync(path.join(program, 'deps', 'passwd'), { recursive: true });
    const ignored = cli(['run', program, '--ignore', 'passwd', '--json']);
    assert.equal(ignored.status, 0, show(ignored));
    assert.equal(JSON.parse(ignored.stdout).process.stdout, '1\n');
    const bad = tempDir('input-bad-name');
    writeTree(bad, { 'a b.txt': 'x' });
    const input = cli(['run', 'examples/hello', '--input', bad]);
    assert.equal(input.status, 65, show(input));
    assert.match(input.stderr, /"a b.txt": path has a character other than/);
  });

  test('the fresh root is removed afterwards (it is empty)', () => {
    const tmp = tempDir('tmpdir');
    const run = cli(['run', 'examples/hello'], { env: { ...cliEnv, TMPDIR: tmp } });
    assert.equal(run.status, 0, show(run));
    const rootLine = /^root +(.+)$/m.exec(run.stdout);
    assert.ok(rootLine, 'the summary names the root');
    assert.equal(path.dirname(rootLine[1]), tmp);
    assert.deepEqual(readdirSync(tmp), []);
  });

  test('exit codes: the program\'s when observed and attributable, else 70, 71, 72', () => {
    const facts = (exit) => ({ exit });
    assert.equal(runExitCode({ status: 'not-started' }), 70);
    assert.equal(runExitCode({ status: 'unresolved', process: facts(null) }), 71);
    assert.equal(runExitCode({ status: 'observed', attributable: false, process: facts({ code: 0, signal: null }) }), 72);
    assert.equal(runExitCode({ status: 'observed', attributable: true, process: facts({ code: 9, signal: null }) }), 9);
    assert.equal(
      runExitCode({ status: 'observed', attributable: true, process: facts({ code: null, signal: 'SIGTERM' }) }),
      128 + os.constants.signals.SIGTERM,
    );
  });
});

// ---------------------------------------------------------------------------------------------
// confined exec

const probe = cli(['exec', '--', '/bin/true']);
const execPlaceholder =
  probe.status === 78 && /\(confinement\.refused\): not implemented/.test(probe.stderr)
    ? 'runConfinedCommand is still the placeholder on this branch (it refuses "not implemented")'
    : false;

describe('confined exec', { skip: execPlaceholder }, () => {
  test('streams the output and exits with the command\'s code', () => {
    const work = tempDir('exec-work');
    const code = randomInt(1, 100);
    const word = randomBytes(8).toString('hex');
    const run = cli([
      'exec',
      '--rw',
      work,
      '--cwd',
      work,
      '--env',
      `WORD=${word}`,
      '--',
      '/bin/sh',
      '-c',
      `echo "$WORD" > out.txt; echo "$WORD"; echo err >&2; exit ${code}`,
    ]);
    assert.equal(run.status, code, show(run));
    assert.equal(run.stdout, `${word}\n`);
    assert.match(run.stderr, /^err$/m);
    assert.equal(execFileSync('cat', [path.join(work, 'out.txt')], { encoding: 'utf8' }), `${word}\n`);
  });

  test('a command killed by a signal exits 128+n', () => {
    const work = tempDir('exec-signal');
    const run = cli(['exec', '--rw', work, '--cwd', work, '--', '/bin/sh', '-c', 'kill -TERM $$']);
    assert.equal(run.status, 128 + os.constants.signals.SIGTERM, show(run));
  });

  test('a refusal exits 78 and names its code', () => {
    const work = tempDir('exec-refused');
    const run = cli(['exec', '--ro', work, '--cwd', '/', '--', '/bin/true']);
    assert.equal(run.status, 78, show(run));
    assert.match(run.stderr, /refused \(confinement\.cwd-not-mounted\)/);
  });

  test('a wall timeout ends the command (SIGKILL: 137)', () => {
    const work = tempDir('exec-timeout');
    const run = cli(['exec', '--rw', work, '--cwd', work, '--timeout-ms', '1000', '--', '/bin/sh', '-c', 'sleep 60']);
    assert.equal(run.status, 128 + os.constants.signals.SIGKILL, show(run));
    assert.match(run.stderr, /wall timeout fired/);
  });
});

test('confined exec refuses while runConfinedCommand is the placeholder (exit 78)', { skip: execPlaceholder ? false : 'runConfinedCommand is implemented' }, () => {
  assert.equal(probe.status, 78, show(probe));
});

// ---------------------------------------------------------------------------------------------
// confined doctor

describe('confined doctor', () => {
  const REQUIRED = [
    'kernel and architecture',
    'bwrap path',
    'bwrap version',
    'bwrap features',
    'unprivileged user namespaces',
    'seccomp',
    'addon',
    'host check (library)',
    'runtime pin',
    'end-to-end probe',
  ];

  function lines(stdout) {
    return stdout
      .split('\n')
      .map((line) => /^(PASS|FAIL|INFO) ([^:]+): (.*)$/.exec(line))
      .filter(Boolean)
      .map(([, state, what, detail]) => ({ state, what, detail }));
  }

  test('on this machine every requirement passes, on the bwrap the library uses', () => {
    const run = cli(['doctor']);
    assert.equal(run.status, 0, show(run));
    const found = lines(run.stdout);
    for (const what of REQUIRED) assert.ok(found.some((l) => l.what === what), `a line for ${what}`);
    assert.deepEqual(found.filter((l) => l.state === 'FAIL'), []);
    const bwrapLine = found.find((l) => l.what === 'bwrap path');
    assert.ok(bwrapLine.detail.startsWith(`${bwrapPath()} `), bwrapLine.detail);
    const version = execFileSync(bwrapPath(), ['--version'], { encoding: 'utf8' }).trim().split(' ')[1];
    assert.equal(found.find((l) => l.what === 'bwrap version').detail, version);
    const root = process.getuid() === 0;
    assert.equal(found.some((l) => l.what === 'running as root' && l.state === 'PASS'), root);
    assert.match(found.find((l) => l.what === 'end-to-end probe').detail, /^a hello program ran confined as uid 65534, admitted, attributable/);
    assert.match(run.stdout, /every requirement passes/);
  });

  test('a missing bwrap fails its line with a fix, and doctor exits 1 (--bwrap and CONFINED_BWRAP)', () => {
    const missing = path.join(scratch, 'no-such-bwrap');
    for (const [args, env] of [
      [['doctor', '--bwrap', missing], cliEnv],
      [['doctor'], { ...cliEnv, CONFINED_BWRAP: missing }],
    ]) {
      const run = cli(args, { env });
      assert.equal(run.status, 1, show(run));
      const bwrapLine = lines(run.stdout).find((l) => l.what === 'bwrap path');
      assert.equal(bwrapLine.state, 'FAIL');
      assert.match(bwrapLine.detail, new RegExp(`^${missing.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: no such file`));
      assert.match(run.stdout, /FAIL bwrap path: .*\n +fix: install bubblewrap/);
      assert.match(run.stdout, /requirement\(s\) fail/);
    }
  });
});

// ---------------------------------------------------------------------------------------------
// snapshotFromDirectory

describe('snapshotFromDirectory', () => {
  test('nested directories: every regular file, relative paths, sorted; .git skipped by default', () => {
    const dir = tempDir('tree');
    const files = {
      'a.txt': randomBytes(10),
      'b/c/d/e.bin': randomBytes(5000),
      'b/c/f.mjs': 'export {}\n',
      'b/empty.txt': '',
      'z-last/x_1.2-3': randomBytes(1),
      '.git/HEAD': 'ref: refs/heads/main\n',
      '.git/weird name': 'x',
    };
    writeTree(dir, files);
    mkdirSync(path.join(dir, 'empty-dir'));
    const snapshot = snapshotFromDirectory(dir);
    const expected = Object.keys(files)
      .filter((rel) => !rel.startsWith('.git/'))
      .sort();
    assert.deepEqual(
      snapshot.map((f) => f.path),
      expected,
    );
    for (const file of snapshot) {
      assert.ok(file.content instanceof Uint8Array);
      assert.deepEqual(Buffer.from(file.content), Buffer.from(files[file.path]));
    }
    // An explicit list replaces the default.
    const withGit = snapshotFromDirectory(path.join(dir, 'b'), { ignore: ['d'] });
    assert.deepEqual(withGit.map((f) => f.path), ['c/f.mjs', 'empty.txt']);
    assert.throws(() => snapshotFromDirectory(dir, { ignore: [] }), /"\.git\/weird name": path has a character/);
    assert.throws(() => snapshotFromDirectory(dir, { ignored: [] }), /unknown option "ignored"/);
  });

  function refuses(setup, pattern) {
    const dir = tempDir('refuse');
    const culprit = setup(dir);
    assert.throws(
      () => snapshotFromDirectory(dir),
      (error) => {
        assert.equal(error.name, 'TypeError');
        assert.ok(error.message.startsWith(`cannot snapshot ${dir}: `), error.message);
        assert.ok(error.message.includes(JSON.stringify(culprit)), `${error.message} names ${culprit}`);
        assert.match(error.message, pattern);
        return true;
      },
    );
  }

  test('refuses a symbolic link, naming it', () => {
    refuses((dir) => {
      writeTree(dir, { 'sub/ok.txt': 'x' });
      symlinkSync('ok.txt', path.join(dir, 'sub', 'link.txt'));
      return 'sub/link.txt';
    }, /is a symbolic link/);
  });

  test('refuses a FIFO, naming it', () => {
    refuses((dir) => {
      mkdirSync(path.join(dir, 'p'));
      execFileSync('mkfifo', [path.join(dir, 'p', 'pipe')]);
      return 'p/pipe';
    }, /is a named pipe/);
  });

  test('refuses a path with more than 16 segments', () => {
    refuses((dir) => {
      const segments = Array.from({ length: 17 }, (_, i) => `d${i}`);
      writeTree(dir, { [`${segments.join('/')}/f.txt`]: 'x' });
      return segments.join('/');
    }, /more than 16 segments/);
  });

  test('refuses a path longer than 256 characters', () => {
    refuses((dir) => {
      const rel = `${'a'.repeat(200)}/${'b'.repeat(60)}`;
      writeTree(dir, { [rel]: 'x' });
      return rel;
    }, /longer than 256 characters/);
  });

  test('refuses a character outside A-Z a-z 0-9 . _ -', () => {
    refuses((dir) => {
      writeTree(dir, { 'ok/caf\u00e9.txt': 'x' });
      return 'ok/caf\u00e9.txt';
    }, /character other than/);
  });

  test('refuses paths that differ only in case', () => {
    const dir = tempDir('case');
    writeTree(dir, { 'Read.me': 'a', 'read.me': 'b' });
    assert.throws(() => snapshotFromDirectory(dir), /duplicates .*case-insensitively/);
  });
});

// ---------------------------------------------------------------------------------------------
// snapshotFromGitTree

const GIT_ENV = {
  PATH: '/usr/local/bin:/usr/bin:/bin',
  HOME: scratch,
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_CONFIG_GLOBAL: '/dev/null',
  GIT_AUTHOR_NAME: 't',
  GIT_AUTHOR_EMAIL: 't@example.invalid',
  GIT_COMMITTER_NAME: 't',
  GIT_COMMITTER_EMAIL: 't@example.invalid',
};

function git(repo, ...args) {
  return execFileSync('git', ['-C', repo, ...args], { env: GIT_ENV, encoding: 'utf8' }).trim();
}

function commitTree(repo, files, message) {
  writeTree(repo, files);
  git(repo, 'add', '-A');
  git(repo, 'commit', '--quiet', '-m', message);
  return git(repo, 'rev-parse', 'HEAD');
}

describe('snapshotFromGitTree', () => {
  test('reads each commit\'s tree from the object store, not the work tree', () => {
    const repo = tempDir('repo');
    git(repo, 'init', '--quiet');
    const first = { 'main.mjs': 'console.log(1)\n', 'src/deep/a.txt': randomBytes(3000), 'src/b.bin': randomBytes(1) };
    const one = commitTree(repo, first, 'one');
    const second = { 'main.mjs': 'console.log(2)\n', 'new.txt': randomBytes(20) };
    const two = commitTree(repo, second, 'two');
    chmodSync(path.join(repo, 'main.mjs'), 0o755);
    // Uncommitted changes in the work tree are not read.
    writeTree(repo, { 'main.mjs': 'dirty\n', 'untracked.txt': 'u' });

    const expectOne = { ...first };
    const expectTwo = { ...first, ...second };
    for (const [rev, expected] of [
      [one, expectOne],
      ['HEAD~1', expectOne],
      [two, expectTwo],
      ['HEAD', expectTwo],
    ]) {
      const snapshot = snapshotFromGitTree(repo, rev);
      assert.deepEqual(snapshot.map((f) => f.path), Object.keys(expected).sort(), rev);
      for (const file of snapshot) assert.deepEqual(Buffer.from(file.content), Buffer.from(expected[file.path]), `${rev} ${file.path}`);
      assert.equal(
        referenceDigest(snapshot),
        referenceDigest(Object.entries(expected).map(([p, c]) => ({ path: p, content: new Uint8Array(Buffer.from(c)) }))),
      );
    }
    assert.throws(() => snapshotFromGitTree(repo, 'no-such-branch'), /no such revision/);
    assert.throws(() => snapshotFromGitTree(repo, '--output=/tmp/x'), { name: 'TypeError' });
    assert.throws(() => snapshotFromGitTree(scratch, 'HEAD'), /git rev-parse exited|no such revision|not a git repository/);
  });

  test('refuses a symbolic link and a submodule in the tree, naming them', () => {
    const repo = tempDir('repo-link');
    git(repo, 'init', '--quiet');
    writeTree(repo, { 'dir/target.txt': 'x' });
    symlinkSync('target.txt', path.join(repo, 'dir', 'link'));
    const withLink = commitTree(repo, {}, 'link');
    assert.throws(() => snapshotFromGitTree(repo, withLink), (error) => {
      assert.equal(error.name, 'TypeError');
      assert.match(error.message, /"dir\/link" is a symbolic link/);
      return true;
    });
    git(repo, 'rm', '--quiet', 'dir/link');
    git(repo, 'update-index', '--add', '--cacheinfo', `160000,${withLink},vendor/sub`);
    git(repo, 'commit', '--quiet', '-m', 'submodule');
    assert.throws(() => snapshotFromGitTree(repo, 'HEAD'), /"vendor\/sub" is a submodule/);
    // The tree before the link is still readable.
    git(repo, 'rm', '--quiet', '--cached', 'vendor/sub');
    git(repo, 'commit', '--quiet', '-m', 'no submodule');
    assert.deepEqual(snapshotFromGitTree(repo, 'HEAD').map((f) => f.path), ['dir/target.txt']);
  });
});

// ---------------------------------------------------------------------------------------------
// The quick start, verbatim

test('the quick start: `npx confined run examples/hello` works from the package directory', () => {
  // npm needs a writable cache: under test:nobody HOME is not writable.
  const cache = tempDir('npm-cache');
  // npx links the package and chmods its bin, which only the files' owner may do: a user runs
  // it in a clone of their own. Under test:nobody the package is root's, so run it in a copy
  // owned by this user (without node_modules and .git), as a clean clone would be.
  let cwd = packageRoot;
  if (statSync(BIN).uid !== process.getuid()) {
    cwd = tempDir('clone');
    cpSync(packageRoot, cwd, {
      recursive: true,
      filter: (source) => !/^(node_modules|\.git)(\/|$)/.test(path.relative(packageRoot, source)),
    });
  }
  const run = spawnSync('npx', ['confined', 'run', 'examples/hello'], {
    cwd,
    env: { ...cliEnv, npm_config_cache: cache, npm_config_update_notifier: 'false', npm_config_offline: 'true' },
    encoding: 'utf8',
    timeout: 180_000,
  });
  assert.equal(run.error, undefined, `npx ran: ${run.error}`);
  assert.equal(run.status, 0, show(run));
  assert.match(run.stdout, /^status +observed$/m);
  assert.match(run.stdout, /^hello, world, from a confined node v\d+/m);
});

test('the repository collector demo runs one check per commit', () => {
  const run = spawnSync(process.execPath, [path.join(packageRoot, 'examples', 'repository-collector.mjs'), '--demo', '--json'], {
    cwd: packageRoot,
    env: cliEnv,
    encoding: 'utf8',
    timeout: 180_000,
  });
  assert.equal(run.status, 0, show(run));
  const { base, candidate } = JSON.parse(run.stdout);
  assert.equal(base.result.status, 'observed');
  assert.equal(base.result.attributable, true);
  assert.deepEqual(base.result.process.exit, { code: 0, signal: null });
  assert.match(base.result.process.stdout, /^ok {3}src\/add\.js\ncheck passed\n$/);
  assert.equal(candidate.result.attributable, true);
  assert.deepEqual(candidate.result.process.exit, { code: 1, signal: null });
  assert.match(candidate.result.process.stdout, /FAIL src\/mul\.js/);
  assert.notEqual(base.commit, candidate.commit);
  assert.equal(base.files + 1, candidate.files);
});
