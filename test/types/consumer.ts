// A consumer of the package, type-checked (never run) by test/types.test.js with
// `tsc -p test/types/tsconfig.json`. It imports through the package's `exports` (self-reference),
// uses every export, narrows the result unions, and proves with @ts-expect-error that misuse is
// rejected (an unused @ts-expect-error is itself an error, so each line must stay an error).

import { EventEmitter } from 'node:events';
import { subscribe } from 'node:diagnostics_channel';
import type { Readable } from 'node:stream';

import * as root from 'confined';
import {
  ConfinedExecutor,
  ConfinedExecutorError,
  describeRuntime,
  confinedProfile,
  snapshotDigest,
  MAX_RETAINED,
  MAX_SNAPSHOT_BYTES,
  CONFINED_PROFILE,
  SNAPSHOT_PROTOCOL,
  EXECUTOR_CHANNEL,
  CONFINED_ENVIRONMENT_KEYS,
  CLOSE_GRACE_MS,
  KILL_CONFIRM_MS,
} from 'confined/confined-executor';
import type {
  AdmissionState,
  ConfinedBounds,
  ConfinedEnvironmentKey,
  ConfinedExecutorOptions,
  ConfinedIdentities,
  ConfinedProfileName,
  ConfinedRunNotStarted,
  ConfinedRunObserved,
  ConfinedRunRequest,
  ConfinedRunResult,
  ConfinedRunStatus,
  ConfinedRunUnresolved,
  ExecutorAdmittedEvent,
  ExecutorCollectedEvent,
  ExecutorCountedEvent,
  ExecutorDiagnosticEvent,
  ExecutorErrorCode,
  ExecutorEventName,
  ExecutorLaunchedEvent,
  ExecutorMaterialisedEvent,
  LimitPair,
  MeasuredLimits,
  NamespaceDisposition,
  NamespaceQuarantined,
  NamespaceRemoved,
  NotStartedReason,
  ProcessExit,
  ProcessFacts,
  ProfileIdentity,
  ResourceUsage,
  RuntimeAlias,
  RuntimeFile,
  RuntimeFileRole,
  RuntimeIdentity,
  SnapshotFile,
  StopReason,
} from 'confined/confined-executor';
import { runConfinedCommand, ConfinementError } from 'confined/confinement';
import type {
  AdmissionVerdict,
  AllowlistRefusalReason,
  AppliedCommandLimits,
  ConfinedCommandHandle,
  ConfinedCommandLimits,
  ConfinedCommandOptions,
  ConfinedCommandResult,
  ConfinedMount,
  ConfinedNetwork,
  ConfinedNetworkAllowlist,
  ConfinementBackend,
  ConfinementErrorCode,
  ConfinementPosture,
  ConfinementPostureEnforced,
  ConfinementPostureUnenforced,
  EgressDenial,
  EgressDenialReason,
  MountMode,
  NetworkMode,
  SandboxAdmissionEvent,
  SandboxViolationEvent,
  SecurityEvent,
  SecurityEventEmitter,
  SurfaceAdmissionRecord,
} from 'confined/confinement';

/** Compile-time equality of two types. */
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
function assertType<T extends true>(_proof?: T): void {}

function never(value: never): never {
  throw new Error(`unexpected ${JSON.stringify(value)}`);
}

// --- The root module re-exports both entry points (values and types are the same symbols) ---
assertType<Equal<typeof root.ConfinedExecutor, typeof ConfinedExecutor>>();
assertType<Equal<typeof root.runConfinedCommand, typeof runConfinedCommand>>();
assertType<Equal<typeof root.ConfinementError, typeof ConfinementError>>();
assertType<Equal<root.ConfinedRunResult, ConfinedRunResult>>();
assertType<Equal<root.SurfaceAdmissionRecord, SurfaceAdmissionRecord>>();

// --- Constants ---
const limits: number[] = [MAX_RETAINED, MAX_SNAPSHOT_BYTES, CLOSE_GRACE_MS, KILL_CONFIRM_MS];
const profileName: ConfinedProfileName = CONFINED_PROFILE;
assertType<Equal<typeof SNAPSHOT_PROTOCOL, 'sf-confined-snapshot/1'>>();
assertType<Equal<typeof EXECUTOR_CHANNEL, 'confined:executor'>>();
assertType<Equal<ConfinedProfileName, 'confined-linux-bwrap/1' | 'confined-darwin-seatbelt/1'>>();
assertType<Equal<ConfinedEnvironmentKey, 'LC_ALL' | 'TZ' | 'HOME' | 'TMPDIR' | 'OPENSSL_CONF'>>();
const environmentKeyCount: 5 = CONFINED_ENVIRONMENT_KEYS.length;
const firstKey: 'LC_ALL' = CONFINED_ENVIRONMENT_KEYS[0];
// @ts-expect-error the keys are a readonly tuple
CONFINED_ENVIRONMENT_KEYS.push('PATH');
// @ts-expect-error string constants have their literal types
const wrongProtocol: 'confined:executor' = SNAPSHOT_PROTOCOL;
void wrongProtocol;
void [limits, profileName, environmentKeyCount, firstKey];

// --- Pins ---
const program: SnapshotFile[] = [
  { path: 'main.mjs', content: new TextEncoder().encode('console.log(1)\n') },
];
const input: readonly SnapshotFile[] = [];
// @ts-expect-error content is bytes, not a string
const badFile: SnapshotFile = { path: 'a.js', content: 'text' };
void badFile;

function describePins(): { runtime: RuntimeIdentity; profile: ProfileIdentity } {
  try {
    return { runtime: describeRuntime(), profile: confinedProfile() };
  } catch (error) {
    if (error instanceof ConfinedExecutorError) {
      const code: ExecutorErrorCode = error.code;
      const name: 'ConfinedExecutorError' = error.name;
      switch (code) {
        case 'unsupported-host':
        case 'runtime-unavailable':
          break;
        default:
          never(code);
      }
      void name;
    }
    throw error;
  }
}

function inspectRuntime(runtime: RuntimeIdentity): string[] {
  const lines: string[] = [runtime.digest, runtime.platform, runtime.arch, runtime.node.path, runtime.node.version];
  lines.push(runtime.os.kernelRelease, runtime.os.kernelVersion, runtime.os.id, runtime.os.versionId ?? 'none');
  for (const file of runtime.files) {
    const f: RuntimeFile = file;
    const role: RuntimeFileRole = f.role;
    lines.push(`${f.path} ${f.size} ${f.sha256} ${role}`);
  }
  for (const alias of runtime.aliases) {
    const a: RuntimeAlias = alias;
    lines.push(`${a.link} -> ${a.target}`);
  }
  // @ts-expect-error the runtime identity is frozen
  runtime.files[0] = { path: '/bin/sh', size: 0, sha256: '', role: 'launcher' };
  // @ts-expect-error roles are a closed set
  const badRole: RuntimeFileRole = 'binary';
  void badRole;
  return lines;
}

// --- Executor options and request ---
const options: ConfinedExecutorOptions = { root: '/var/tmp/confined', maxRetained: MAX_RETAINED };
const executor = new ConfinedExecutor(options);
// @ts-expect-error root is required
new ConfinedExecutor({ maxRetained: 2 });

function makeRequest(pins: { runtime: RuntimeIdentity; profile: ProfileIdentity }): ConfinedRunRequest {
  return {
    runtime: pins.runtime.digest,
    profile: pins.profile.digest,
    program: { files: program, digest: snapshotDigest(program), entry: 'main.mjs', args: ['--flag'] },
    input: { files: input, digest: snapshotDigest(input) },
    timeoutMs: 5_000,
    maxOutputBytes: 65_536,
    cpuSeconds: 5,
    maxDescriptors: 64,
  };
}
// @ts-expect-error runtime is the digest string, not the identity object
const badRequest: ConfinedRunRequest = { ...makeRequest(describePins()), runtime: describeRuntime() };
void badRequest;

// --- Results ---
function describeLimit(pair: LimitPair): string {
  const show = (value: number | 'unlimited'): string => (value === 'unlimited' ? 'unlimited' : value.toFixed(0));
  return `${show(pair.soft)}/${show(pair.hard)}`;
}

function describeMeasured(measured: MeasuredLimits | null): string {
  if (measured === null) return 'not measured';
  return [measured.cpuSeconds, measured.descriptors, measured.coreBlocks, measured.fileBlocks].map(describeLimit).join(' ');
}

function describeNamespace(namespace: NamespaceDisposition | null): string {
  if (namespace === null) return 'none';
  switch (namespace.state) {
    case 'removed': {
      const removed: NamespaceRemoved = namespace;
      return removed.durable ? 'removed (durable)' : 'removed';
    }
    case 'quarantined': {
      const quarantined: NamespaceQuarantined = namespace;
      return `quarantined at ${quarantined.path}: ${quarantined.reason}`;
    }
    default:
      return never(namespace);
  }
}

function describeProcess(facts: ProcessFacts): string {
  const admission: AdmissionState = facts.admission;
  const stopped: StopReason | null = facts.stopped;
  const exit: ProcessExit | null = facts.exit;
  const exitText = exit === null ? 'not reaped' : `code ${exit.code ?? '-'} signal ${exit.signal ?? '-'}`;
  const usage: ResourceUsage | null = facts.resources;
  const usageText = usage ? `${usage.userCpuMs}+${usage.systemCpuMs} ms, ${usage.maxRssKiB} KiB` : 'no usage';
  const out: Buffer = facts.stdout;
  const err: Buffer = facts.stderr;
  // The Buffers are the caller's: writing their bytes is allowed.
  out[0] = 0;
  // @ts-expect-error but the facts themselves are readonly
  facts.stdout = Buffer.alloc(0);
  // @ts-expect-error and so is a nested fact
  facts.exit!.code = 0;
  // @ts-expect-error a signal is a signal name
  const badExit: ProcessExit = { code: null, signal: 9 };
  void badExit;
  return [
    `pid ${facts.pid}`,
    admission,
    describeMeasured(facts.limits),
    exitText,
    facts.pipesClosed ? 'pipes closed' : 'pipes open',
    stopped ?? 'not stopped',
    facts.killSent ? 'kill sent' : 'no kill',
    `${out.length + err.length}/${facts.outputBytes} bytes`,
    `${facts.durationMs} ms`,
    usageText,
  ].join(', ');
}

function describeIdentities(identities: ConfinedIdentities): string {
  const bounds: ConfinedBounds = identities.bounds;
  const profile: ProfileIdentity = identities.profile;
  return [
    identities.program.digest,
    identities.program.entry,
    identities.program.args.join(' '),
    identities.input.digest,
    identities.runtime,
    identities.profile.name,
    profile.digest,
    identities.profile.instantiated,
    `${bounds.timeoutMs} ${bounds.maxOutputBytes} ${bounds.cpuSeconds} ${bounds.maxDescriptors}`,
  ].join('\n');
}

function mutate(result: ConfinedRunResult): void {
  // @ts-expect-error results are frozen
  result.status = 'observed';
}

function describeResult(result: ConfinedRunResult): string {
  const status: ConfinedRunStatus = result.status;
  void status;
  // @ts-expect-error process exists only once the union is narrowed to a started run
  void result.process;

  switch (result.status) {
    case 'not-started': {
      const notStarted: ConfinedRunNotStarted = result;
      const reason: NotStartedReason = notStarted.reason;
      switch (reason) {
        case 'aborted':
        case 'unsupported-host':
        case 'runtime-mismatch':
        case 'profile-mismatch':
        case 'snapshot-mismatch':
        case 'retained-limit':
        case 'setup-failed':
          break;
        default:
          never(reason);
      }
      // @ts-expect-error a run that did not start has no process facts
      void notStarted.process;
      return `${reason}: ${notStarted.message} (${describeNamespace(notStarted.namespace)})`;
    }
    case 'observed': {
      const observed: ConfinedRunObserved = result;
      // @ts-expect-error problems are frozen
      observed.problems.push('more');
      // @ts-expect-error an observed run may have removed its namespace: narrow on state first
      const quarantined: NamespaceQuarantined = observed.namespace;
      void quarantined;
      const verdict = observed.attributable ? 'attributable' : observed.problems.join('; ');
      return [
        verdict,
        describeIdentities(observed.identities),
        describeProcess(observed.process),
        describeNamespace(observed.namespace),
      ].join('\n');
    }
    case 'unresolved': {
      const unresolved: ConfinedRunUnresolved = result;
      // An unresolved run always quarantines its namespace.
      const path: string = unresolved.namespace.path;
      // @ts-expect-error unresolved has no attributable flag: it is unknown, not failed
      void unresolved.attributable;
      return [
        unresolved.problems.join('; '),
        describeIdentities(unresolved.identities),
        describeProcess(unresolved.process),
        path,
      ].join('\n');
    }
    default:
      return never(result);
  }
}

async function runOnce(signal: AbortSignal): Promise<string> {
  const pins = describePins();
  inspectRuntime(pins.runtime);
  const request = makeRequest(pins);
  const pending: Promise<ConfinedRunResult> = executor.run(request, signal);
  // @ts-expect-error the signal is an AbortSignal
  void executor.run(request, { aborted: false });
  // @ts-expect-error a wrong status narrowing: there is no 'exited' status
  if ((await pending).status === 'exited') return 'never';
  return describeResult(await pending);
}

// --- Diagnostics ---
function onExecutorEvent(message: unknown): void {
  const event = message as ExecutorDiagnosticEvent;
  const name: ExecutorEventName = event.event;
  switch (event.event) {
    case 'counted': {
      const counted: ExecutorCountedEvent = event;
      console.log(name, counted.root, counted.retained);
      break;
    }
    case 'materialised': {
      const materialised: ExecutorMaterialisedEvent = event;
      console.log(name, materialised.namespace);
      break;
    }
    case 'launched': {
      const launched: ExecutorLaunchedEvent = event;
      console.log(name, launched.namespace, launched.pid, launched.profile.length);
      break;
    }
    case 'admitted': {
      const admitted: ExecutorAdmittedEvent = event;
      console.log(name, admitted.namespace, admitted.pid);
      break;
    }
    case 'collected': {
      const collected: ExecutorCollectedEvent = event;
      console.log(name, collected.namespace);
      break;
    }
    default:
      never(event);
  }
}
subscribe(EXECUTOR_CHANNEL, onExecutorEvent);

// --- Command runner ---
const securityEvents = new EventEmitter();
const emitter: SecurityEventEmitter = securityEvents;
securityEvents.on('sandbox:admission', (payload: SandboxAdmissionEvent) => {
  const verdict: AdmissionVerdict = payload.verdict;
  const posture: ConfinementPosture = payload.posture;
  console.log(payload.type, verdict, payload.reasons.join(','), posture.enforced, payload.command, payload.at);
});
securityEvents.on('sandbox:violation', (payload: SandboxViolationEvent) => {
  const reason: EgressDenialReason = payload.reason;
  console.log(payload.type, payload.kind, payload.host, payload.port, reason, payload.command, payload.at);
});

function onSecurityEvent(event: SecurityEvent): string {
  switch (event.type) {
    case 'sandbox:admission':
      return event.verdict;
    case 'sandbox:violation':
      return `${event.host}:${event.port ?? '?'}`;
    default:
      return never(event);
  }
}

function describePosture(posture: ConfinementPosture): string {
  const backend: ConfinementBackend = posture.backend;
  if (posture.enforced) {
    const enforced: ConfinementPostureEnforced = posture;
    const reason: null = enforced.reason;
    // @ts-expect-error an enforced posture has a backend, never 'none'
    const none: 'none' = enforced.backend;
    void [reason, none];
    return `enforced by ${enforced.backend}`;
  }
  const unenforced: ConfinementPostureUnenforced = posture;
  return `not enforced (${backend}): ${unenforced.reason}`;
}

const mounts: ConfinedMount[] = [
  { path: '/src', mode: 'ro' },
  { path: '/work', mode: 'rw' },
];
// @ts-expect-error a mount mode is 'ro' or 'rw'
const badMount: ConfinedMount = { path: '/tmp', mode: 'rx' };
const modes: MountMode[] = mounts.map((mount) => mount.mode);
void [badMount, modes];

const denials: EgressDenial[] = [];
const allowlist: ConfinedNetworkAllowlist = {
  allowlist: ['registry.example.test:443'],
  forwarderPath: '/opt/confined/forwarder',
  onDenied: (denial) => {
    denials.push(denial);
    console.log(denial.host, denial.port, denial.reason, denial.at);
  },
  violations: (event) => console.log(onSecurityEvent(event)),
};
const network: ConfinedNetwork = Math.random() < 0.5 ? 'off' : allowlist;
// @ts-expect-error network is 'off' or an allowlist object
const badNetwork: ConfinedNetwork = 'on';
void badNetwork;

const commandLimits: ConfinedCommandLimits = {
  wallTimeoutMs: 60_000,
  maxStdoutBytes: 262_144,
  maxStderrBytes: 65_536,
  cpuSeconds: 30,
  maxDescriptors: 256,
  fileSizeBytes: 1 << 20,
  maxProcesses: 64,
};

function onAdmissionRecord(record: SurfaceAdmissionRecord): void {
  const mode: NetworkMode = record.network;
  const applied: AppliedCommandLimits = record.limits;
  console.log(
    record.verdict,
    record.reasons,
    describePosture(record.posture),
    record.command,
    record.args,
    record.cwd,
    record.mounts.map((m) => `${m.path}:${m.mode}`),
    record.envNames,
    mode,
    record.allowlist,
    applied.wallTimeoutMs,
    applied.maxStdoutBytes,
    applied.maxStderrBytes,
    applied.cpuSeconds,
    applied.maxDescriptors,
    applied.fileSizeBytes,
    applied.maxProcesses,
    record.at,
  );
  // @ts-expect-error admission records are readonly
  record.mounts.push({ path: '/', mode: 'rw' });
}

async function runCommand(signal: AbortSignal): Promise<ConfinedCommandResult> {
  const commandOptions: ConfinedCommandOptions = {
    command: '/bin/sh',
    args: ['-c', 'make test'],
    cwd: '/work',
    mounts,
    env: { CI: '1' },
    network,
    limits: commandLimits,
    signal,
    securityEventEmitter: emitter,
    recordAdmission: onAdmissionRecord,
  };
  let handle: ConfinedCommandHandle;
  try {
    handle = await runConfinedCommand(commandOptions);
  } catch (error) {
    if (error instanceof ConfinementError) {
      const code: ConfinementErrorCode = error.code;
      const name: 'ConfinementError' = error.name;
      if (code.startsWith('proxy.job-allowlist.')) {
        const reason = code.slice('proxy.job-allowlist.'.length) as AllowlistRefusalReason;
        console.log('bad allowlist entry', name, reason);
      }
    }
    throw error;
  }
  const pid: number = handle.pid;
  const out: Readable = handle.stdout;
  const err: Readable = handle.stderr;
  out.on('data', (chunk: Buffer) => process.stdout.write(chunk));
  err.resume();
  console.log(pid, handle.confined, describePosture(handle.posture));
  const result = await handle.wait();
  const again: ConfinedCommandResult = await handle.stop();
  // @ts-expect-error command results are readonly
  again.timedOut = false;
  console.log(
    result.code,
    result.signal,
    result.timedOut,
    result.truncated,
    result.aborted,
    result.confined,
    describePosture(result.posture),
    result.stderrTail,
  );
  return result;
}

const codes: ConfinementErrorCode[] = [
  'confinement.refused',
  'confinement.allowlist-requires-confinement',
  'confinement.mount-not-absolute',
  'confinement.cwd-not-mounted',
  'confinement.env-name-invalid',
  'confinement.limit-invalid',
  'confinement.aborted',
  'confinement.proxy-not-ready',
  'proxy.job-allowlist.wildcard',
];
// @ts-expect-error codes are a closed set (plus the proxy.job-allowlist.* family)
const badCode: ConfinementErrorCode = 'confinement.unknown';
// @ts-expect-error the proxy.job-allowlist.* family is closed too
const badAllowlistCode: ConfinementErrorCode = 'proxy.job-allowlist.too-broad';
const allowlistCode: ConfinementErrorCode = `proxy.job-allowlist.${'bare-host' satisfies AllowlistRefusalReason}`;
new ConfinementError('confinement.refused', 'no bwrap');
void [codes, badCode, badAllowlistCode, allowlistCode];

// @ts-expect-error command is required
void runConfinedCommand({ args: [] });
// @ts-expect-error env values are strings
void runConfinedCommand({ command: 'true', env: { N: 1 } });
// @ts-expect-error an emitter needs an emit method
void runConfinedCommand({ command: 'true', securityEventEmitter: {} });

// Snapshot builders: root only.
const fromDirectory: SnapshotFile[] = root.snapshotFromDirectory('/tmp/program', { ignore: ['.git', 'node_modules'] });
const fromTree: readonly SnapshotFile[] = root.snapshotFromGitTree('/tmp/repo', 'HEAD');
const directoryOptions: root.SnapshotDirectoryOptions = {};
void [fromDirectory, fromTree, directoryOptions, root.snapshotDigest(fromTree)];
// @ts-expect-error ignore holds names
void root.snapshotFromDirectory('/tmp/program', { ignore: '.git' });
// @ts-expect-error rev is required
void root.snapshotFromGitTree('/tmp/repo');

export { runOnce, runCommand, mutate };
