// The declarations in types/: a strict type-check of a consumer that uses every export, and a
// comparison of what the .d.ts files declare with what the spec names and what lib/ exports.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, realpathSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const packageRoot = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const require = createRequire(import.meta.url);
const tscBin = path.join(packageRoot, 'node_modules', '.bin', 'tsc');
const tsconfigPath = path.join(packageRoot, 'test', 'types', 'tsconfig.json');
const pkg = JSON.parse(readFileSync(path.join(packageRoot, 'package.json'), 'utf8'));

let ts = null;
try {
  ts = require('typescript');
} catch {
  ts = null;
}
const skip =
  ts !== null && existsSync(tscBin)
    ? false
    : 'typescript is not installed (it is a devDependency: run npm install)';

// The names spec/confined-executor.md gives ("Public interface", "Types", "Constants"; design.md
// "API decisions" lists the exported constants), and those spec/confined-command-runner.md and
// design.md give the command runner.
const SPEC = {
  './confined-executor': {
    values: [
      'ConfinedExecutor',
      'describeRuntime',
      'confinedProfile',
      'snapshotDigest',
      'ConfinedExecutorError',
      'MAX_RETAINED',
      'MAX_SNAPSHOT_BYTES',
      'CONFINED_PROFILE',
      'SNAPSHOT_PROTOCOL',
      'EXECUTOR_CHANNEL',
      'CONFINED_ENVIRONMENT_KEYS',
      'CLOSE_GRACE_MS',
      'KILL_CONFIRM_MS',
    ],
    types: [
      'ConfinedExecutorOptions',
      'SnapshotFile',
      'ConfinedRunRequest',
      'ConfinedRunResult',
      'NotStartedReason',
      'NamespaceDisposition',
      'ProcessFacts',
      'ConfinedIdentities',
      'RuntimeIdentity',
      'RuntimeFile',
      'RuntimeAlias',
      'ProfileIdentity',
      'LimitPair',
      'MeasuredLimits',
      'ExecutorErrorCode',
    ],
  },
  './confinement': {
    values: ['runConfinedCommand', 'ConfinementError'],
    types: [
      'ConfinedCommandOptions',
      'ConfinedCommandHandle',
      'ConfinedCommandResult',
      'ConfinementPosture',
      'ConfinementErrorCode',
      'SurfaceAdmissionRecord',
      'EgressDenial',
    ],
  },
};
// Declared and exported by the package root only (types/snapshot-tree.d.ts, lib/snapshot-tree.js).
const ROOT_ONLY = {
  values: ['snapshotFromDirectory', 'snapshotFromGitTree'],
  types: ['SnapshotDirectoryOptions'],
};
SPEC['.'] = {
  values: [...SPEC['./confined-executor'].values, ...SPEC['./confinement'].values],
  types: [...SPEC['./confined-executor'].types, ...SPEC['./confinement'].types],
};

/** The package's entry points as its `exports` map declares them. */
function entryPoints() {
  return Object.entries(pkg.exports)
    .filter(([, target]) => typeof target === 'object' && target !== null)
    .map(([subpath, target]) => ({
      subpath,
      types: path.join(packageRoot, target.types),
      lib: path.join(packageRoot, target.default),
    }));
}

/** Exported names of each declaration file, split into values and types, via the checker. */
let declared = null;
function declaredExports(files) {
  declared ??= buildDeclaredExports(files);
  return declared;
}

function buildDeclaredExports(files) {
  const parsed = ts.getParsedCommandLineOfConfigFile(tsconfigPath, {}, {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: (d) => {
      throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n'));
    },
  });
  const program = ts.createProgram(files, { ...parsed.options, noEmit: true });
  const checker = program.getTypeChecker();
  const result = new Map();
  for (const file of files) {
    const source = program.getSourceFile(file);
    assert.ok(source, `${file} is part of the program`);
    const moduleSymbol = checker.getSymbolAtLocation(source);
    assert.ok(moduleSymbol, `${file} is a module`);
    const values = new Map();
    const types = new Set();
    for (const exported of checker.getExportsOfModule(moduleSymbol)) {
      const symbol =
        exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
      if (symbol.flags & ts.SymbolFlags.Value) values.set(exported.name, symbol);
      if (symbol.flags & ts.SymbolFlags.Type) types.add(exported.name);
    }
    result.set(file, { values, types });
  }
  return { checker, result, diagnostics: ts.getPreEmitDiagnostics(program) };
}

function difference(a, b) {
  const other = new Set(b);
  return [...new Set(a)].filter((name) => !other.has(name)).sort();
}

/** The string literals of a literal or union type, or null when it has other members. */
function stringLiterals(type) {
  const members = type.isUnion() ? type.types : [type];
  if (!members.every((member) => member.isStringLiteral())) return null;
  return members.map((member) => member.value);
}

test('the package exports map names a declaration file for every entry point', () => {
  const points = entryPoints();
  assert.deepEqual(points.map((p) => p.subpath).sort(), ['.', './confined-executor', './confinement']);
  for (const point of points) {
    assert.ok(existsSync(point.types), `${point.subpath}: ${point.types} exists`);
    assert.ok(existsSync(point.lib), `${point.subpath}: ${point.lib} exists`);
  }
  assert.equal(path.join(packageRoot, pkg.types), points.find((p) => p.subpath === '.').types);
});

test('the consumer type-checks with strict tsc under nodenext', { skip, timeout: 180_000 }, () => {
  const parsed = ts.getParsedCommandLineOfConfigFile(tsconfigPath, {}, {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: () => {},
  });
  assert.equal(parsed.options.strict, true, 'strict');
  assert.equal(parsed.options.noEmit, true, 'noEmit');
  assert.equal(parsed.options.skipLibCheck, false, 'the declarations themselves are checked');
  assert.equal(parsed.options.module, ts.ModuleKind.NodeNext, 'module nodenext');
  assert.equal(parsed.options.moduleResolution, ts.ModuleResolutionKind.NodeNext, 'nodenext resolution');
  assert.deepEqual(parsed.options.types, ['node']);

  const run = spawnSync(process.execPath, [realpathSync(tscBin), '-p', tsconfigPath, '--pretty', 'false'], {
    cwd: packageRoot,
    encoding: 'utf8',
    timeout: 170_000,
  });
  assert.equal(run.error, undefined, `tsc could not run: ${run.error}`);
  assert.equal(run.status, 0, `tsc failed (status ${run.status}, signal ${run.signal}):\n${run.stdout}${run.stderr}`);
  assert.equal(run.stdout.trim(), '', 'tsc printed nothing');

  // Each @ts-expect-error must fail for its own line: tsc reports an unused directive, so a
  // clean run proves each one still rejects something. Check that there are some.
  const consumer = readFileSync(path.join(packageRoot, 'test', 'types', 'consumer.ts'), 'utf8');
  const expectations = consumer.match(/\/\/ @ts-expect-error /g) ?? [];
  assert.ok(expectations.length >= 10, `consumer proves misuse is rejected (${expectations.length} cases)`);
  for (const specifier of ["'confined'", "'confined/confined-executor'", "'confined/confinement'"]) {
    assert.ok(consumer.includes(`from ${specifier}`), `consumer imports ${specifier}`);
  }
});

test('every name the specs give and every runtime export has a declaration', { skip, timeout: 120_000 }, async (t) => {
  const points = entryPoints();
  const { checker, result, diagnostics } = declaredExports(points.map((p) => p.types));
  assert.deepEqual(
    diagnostics.map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n')),
    [],
    'the declaration files compile',
  );

  for (const point of points) {
    const { values, types } = result.get(point.types);
    const declaredValues = [...values.keys()];
    const spec = SPEC[point.subpath];

    // Against the spec: every name it gives is declared, as a value or as a type.
    assert.deepEqual(difference(spec.values, declaredValues), [], `${point.subpath}: spec values without a declaration`);
    assert.deepEqual(difference(spec.types, types), [], `${point.subpath}: spec types without a declaration`);
    const extraTypes = difference(types, [...spec.types, ...spec.values]);
    const extraValues = difference(declaredValues, spec.values);
    t.diagnostic(`${point.subpath}: declared beyond the spec: values [${extraValues}] types [${extraTypes}]`);

    // Against lib/: the runtime exports and the declared values are the same set.
    const runtime = await import(pathToFileURL(point.lib).href);
    const runtimeNames = Object.keys(runtime);
    assert.deepEqual(difference(runtimeNames, declaredValues), [], `${point.subpath}: runtime exports without a declaration`);
    assert.deepEqual(difference(declaredValues, runtimeNames), [], `${point.subpath}: declared values lib does not export`);

    // And each declared value has the declared kind, with the declared literal value.
    for (const [name, symbol] of values) {
      const actual = runtime[name];
      if (symbol.flags & ts.SymbolFlags.Class) {
        assert.equal(typeof actual, 'function', `${name} is a class`);
        assert.match(Function.prototype.toString.call(actual), /^class\b/, `${name} is a class`);
      } else if (symbol.flags & ts.SymbolFlags.Function) {
        assert.equal(typeof actual, 'function', `${name} is a function`);
      } else {
        const type = checker.getTypeOfSymbol(symbol);
        if (type.flags & ts.TypeFlags.Number) {
          assert.ok(Number.isFinite(actual), `${name} is a number (${actual})`);
        } else if (checker.isTupleType(type)) {
          const elements = checker.getTypeArguments(type).map((element) => stringLiterals(element)?.[0]);
          assert.deepEqual(actual, elements, `${name} holds the declared tuple`);
          assert.ok(Object.isFrozen(actual), `${name} is frozen, as its readonly type says`);
        } else {
          const literals = stringLiterals(type);
          assert.ok(literals, `${name}: declared as ${checker.typeToString(type)}, which this test does not check`);
          assert.ok(literals.includes(actual), `${name} is ${JSON.stringify(actual)}, declared as ${checker.typeToString(type)}`);
        }
      }
    }
  }

  // The root re-exports both entry points and, beyond them, only the snapshot builders.
  const byPoint = Object.fromEntries(points.map((p) => [p.subpath, result.get(p.types)]));
  const union = (kind) => [
    ...byPoint['./confined-executor'][kind].keys(),
    ...byPoint['./confinement'][kind].keys(),
    ...ROOT_ONLY[kind],
  ];
  assert.deepEqual([...byPoint['.'].values.keys()].sort(), union('values').sort());
  assert.deepEqual([...byPoint['.'].types].sort(), union('types').sort());
});

test('the error classes have the declared name and keep their code', { skip }, async () => {
  const points = entryPoints();
  const { checker, result } = declaredExports(points.map((p) => p.types));
  for (const point of points.filter((p) => p.subpath !== '.')) {
    const runtime = await import(pathToFileURL(point.lib).href);
    for (const [name, symbol] of result.get(point.types).values) {
      if (!(symbol.flags & ts.SymbolFlags.Class)) continue;
      const instance = checker.getDeclaredTypeOfSymbol(symbol);
      const nameProperty = instance.getProperty('name');
      const codeProperty = instance.getProperty('code');
      if (!nameProperty || !codeProperty) continue;
      const [declaredName] = stringLiterals(checker.getTypeOfSymbol(nameProperty)) ?? [];
      assert.ok(declaredName, `${name}.name has a literal type`);
      const codeType = checker.getTypeOfSymbol(codeProperty);
      const codes = (codeType.isUnion() ? codeType.types : [codeType]).filter((m) => m.isStringLiteral());
      assert.ok(codes.length > 0, `${name}.code has literal members`);
      for (const { value: code } of codes) {
        const error = new runtime[name](code, 'probe', { cause: 'test' });
        assert.ok(error instanceof Error, `${name} extends Error`);
        assert.equal(error.name, declaredName);
        assert.equal(error.code, code);
        assert.equal(error.message, 'probe');
        assert.equal(error.cause, 'test');
      }
    }
  }
});

test('the proxy.job-allowlist.* codes declared are exactly those lib/egress/allowlist.js throws', { skip }, async () => {
  const points = entryPoints();
  const { checker, result } = declaredExports(points.map((p) => p.types));
  const { values } = result.get(points.find((p) => p.subpath === './confinement').types);
  const instance = checker.getDeclaredTypeOfSymbol(values.get('ConfinementError'));
  const declaredCodes = stringLiterals(checker.getTypeOfSymbol(instance.getProperty('code')))
    .filter((c) => c.startsWith('proxy.job-allowlist.'))
    .sort();
  // The reasons the grammar can give, read from its source: every fail('...') and every code it
  // spells out itself.
  const source = readFileSync(path.join(packageRoot, 'lib', 'egress', 'allowlist.js'), 'utf8');
  const inSource = new Set();
  for (const call of source.matchAll(/\bfail\(([^;]*)\)/g))
    for (const m of call[1].matchAll(/'([a-z0-9-]+)'/g)) inSource.add(`proxy.job-allowlist.${m[1]}`);
  for (const m of source.matchAll(/'(proxy\.job-allowlist\.[a-z0-9-]+)'/g)) inSource.add(m[1]);
  assert.deepEqual([...inSource].sort(), declaredCodes);
  // And each is really thrown by parseAllowlist for some input.
  const { parseAllowlist } = await import(pathToFileURL(path.join(packageRoot, 'lib', 'egress', 'allowlist.js')).href);
  const inputs = [
    42,
    Array.from({ length: 1025 }, (_, i) => `h${i}.test:1`),
    [''],
    [`${'a.'.repeat(200)}test:1`],
    ['a.test\0:1'],
    ['\u00e4.test:1'],
    ['https://a.test:1'],
    ['u@a.test:1'],
    ['*.a.test:1'],
    ['10.0.0.0/8:1'],
    ['a.test:1/x'],
    ['a.test'],
    ['[fe80::1%eth0]:1'],
    ['2001:db8::1:1'],
    ['-a.test:1'],
    ['a.test:0'],
  ];
  const thrown = new Set();
  for (const input of inputs) {
    try {
      parseAllowlist(input);
    } catch (err) {
      thrown.add(err.code);
    }
  }
  assert.deepEqual([...thrown].sort(), declaredCodes);
});
