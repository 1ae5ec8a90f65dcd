// Declarations of the executor API (module `confined/confined-executor`), with the names and
// shapes of spec/confined-executor.md and the choices of design.md ("API decisions").
// Everything a result holds is readonly: results are deeply frozen at run time, except the
// stdout/stderr Buffers, whose bytes belong to the caller.

/// <reference types="node" />

// ---------------------------------------------------------------------------------------------
// Constants (lib/constants.js; only those lib/confined-executor.js exports)

/** Largest `maxRetained` a ConfinedExecutor accepts. */
export declare const MAX_RETAINED: number;
/** Total bytes a snapshot (program or input) may hold. */
export declare const MAX_SNAPSHOT_BYTES: number;
/** Name of the confinement profile of this platform's backend. */
export declare const CONFINED_PROFILE: 'confined-linux-bwrap/1' | 'confined-darwin-seatbelt/1';
/** First line of the snapshot digest protocol. */
export declare const SNAPSHOT_PROTOCOL: 'sf-confined-snapshot/1';
/** `diagnostics_channel` name of the executor's events ({@link ExecutorDiagnosticEvent}). */
export declare const EXECUTOR_CHANNEL: 'confined:executor';
/** The only environment names the confined program receives (frozen). */
export declare const CONFINED_ENVIRONMENT_KEYS: readonly ['LC_ALL', 'TZ', 'HOME', 'TMPDIR', 'OPENSSL_CONF'];
/** How long collection waits for the pipes to close after the process was reaped (ms). */
export declare const CLOSE_GRACE_MS: number;
/** How long collection waits for the process to be reaped after a stop (ms). */
export declare const KILL_CONFIRM_MS: number;

/** Name of the confinement profile (the type of {@link CONFINED_PROFILE}). */
export type ConfinedProfileName = typeof CONFINED_PROFILE;
/** One of {@link CONFINED_ENVIRONMENT_KEYS}. */
export type ConfinedEnvironmentKey = (typeof CONFINED_ENVIRONMENT_KEYS)[number];

// ---------------------------------------------------------------------------------------------
// Pins

/** One file of a program or input snapshot. `path` is relative (see the spec's path grammar). */
export interface SnapshotFile {
  readonly path: string;
  readonly content: Uint8Array;
}

/** Which part of the runtime a pinned file is. */
export type RuntimeFileRole = 'node' | 'interpreter' | 'library' | 'launcher';

/** One pinned file of the runtime: its real path, size in bytes and SHA-256 (lower-case hex). */
export interface RuntimeFile {
  readonly path: string;
  readonly size: number;
  readonly sha256: string;
  readonly role: RuntimeFileRole;
}

/** A symbolic link traversed while resolving the runtime: `link` resolves to `target`. */
export interface RuntimeAlias {
  readonly link: string;
  readonly target: string;
}

/** What `describeRuntime()` pins. `digest` covers every other field. */
export interface RuntimeIdentity {
  /** `sha256:` followed by 64 lower-case hex digits. */
  readonly digest: string;
  readonly platform: NodeJS.Platform;
  readonly arch: NodeJS.Architecture;
  readonly node: {
    /** Real path of the running node executable. */
    readonly path: string;
    /** `process.version`, e.g. `v20.20.2`. */
    readonly version: string;
  };
  readonly os: {
    /** uname release. */
    readonly kernelRelease: string;
    /** uname version. */
    readonly kernelVersion: string;
    /** os-release `ID` (Linux) or `macos`. */
    readonly id: string;
    /** os-release `VERSION_ID` (Linux) or the product version (macOS); null when the host has none. */
    readonly versionId: string | null;
  };
  readonly files: readonly RuntimeFile[];
  readonly aliases: readonly RuntimeAlias[];
}

/** What `confinedProfile()` returns. */
export interface ProfileIdentity {
  readonly name: ConfinedProfileName;
  /** `sha256:` followed by 64 lower-case hex digits. */
  readonly digest: string;
}

/**
 * Pins the runtime: node, its whole library closure, the launchers and the OS build.
 * @throws {ConfinedExecutorError} `unsupported-host` or `runtime-unavailable`.
 */
export declare function describeRuntime(): RuntimeIdentity;

/** The identity of this platform's confinement profile. */
export declare function confinedProfile(): ProfileIdentity;

/**
 * `sha256:` + hex over `sf-confined-snapshot/1\n` and one `path\tsize\tsha256hex\n` line per
 * file in path order. An empty list is allowed.
 * @throws {TypeError} for files a snapshot cannot hold.
 */
export declare function snapshotDigest(files: readonly SnapshotFile[]): string;

// ---------------------------------------------------------------------------------------------
// Errors

/** Codes of {@link ConfinedExecutorError}. */
export type ExecutorErrorCode = 'unsupported-host' | 'runtime-unavailable';

/** Thrown by `describeRuntime()` only; `run()` reports the same problems as `not-started`. */
export declare class ConfinedExecutorError extends Error {
  constructor(code: ExecutorErrorCode, message: string, options?: { cause?: unknown });
  readonly code: ExecutorErrorCode;
  readonly name: 'ConfinedExecutorError';
}

// ---------------------------------------------------------------------------------------------
// Run

/** Options of `new ConfinedExecutor(options)`: a plain object with no other keys. */
export interface ConfinedExecutorOptions {
  /** Absolute, normalised, no trailing `/`, matching `/^\/[A-Za-z0-9._@+/-]*$/`. */
  readonly root: string;
  /** Integer from 1 to {@link MAX_RETAINED}; default 8. */
  readonly maxRetained?: number;
}

/** What `run()` executes. Every key is required and no other key is accepted. */
export interface ConfinedRunRequest {
  /** `describeRuntime().digest`. */
  readonly runtime: string;
  /** `confinedProfile().digest`. */
  readonly profile: string;
  readonly program: {
    readonly files: readonly SnapshotFile[];
    /** `snapshotDigest(files)`. */
    readonly digest: string;
    /** A program file of the snapshot ending .mjs, .cjs, .js, .mts, .cts or .ts. */
    readonly entry: string;
    readonly args: readonly string[];
  };
  /** Becomes the read-only working directory. */
  readonly input: {
    readonly files: readonly SnapshotFile[];
    readonly digest: string;
  };
  readonly timeoutMs: number;
  readonly maxOutputBytes: number;
  readonly cpuSeconds: number;
  readonly maxDescriptors: number;
}

/** Why a run did not start a process. */
export type NotStartedReason =
  | 'aborted'
  | 'unsupported-host'
  | 'runtime-mismatch'
  | 'profile-mismatch'
  | 'snapshot-mismatch'
  | 'retained-limit'
  | 'setup-failed';

/** The namespace was removed; `durable` means the root was fsynced afterwards. */
export interface NamespaceRemoved {
  readonly state: 'removed';
  readonly durable: boolean;
}

/** The namespace is preserved at `path`, its slot still claimed. */
export interface NamespaceQuarantined {
  readonly state: 'quarantined';
  readonly path: string;
  readonly reason: string;
}

export type NamespaceDisposition = NamespaceRemoved | NamespaceQuarantined;

/** A resource limit in dash units (seconds, descriptors, 512-byte blocks). */
export interface LimitPair {
  readonly soft: number | 'unlimited';
  readonly hard: number | 'unlimited';
}

/** The limits the launch step measured and reported before the go byte. */
export interface MeasuredLimits {
  readonly cpuSeconds: LimitPair;
  readonly descriptors: LimitPair;
  readonly coreBlocks: LimitPair;
  readonly fileBlocks: LimitPair;
}

/** What the admission gate's record said (Linux: the launch stage; macOS: the preload). */
export type AdmissionState = 'admitted' | 'refused' | 'absent' | 'malformed';

/** The first stop the host requested, if any. */
export type StopReason = 'timeout' | 'cancelled' | 'output-limit' | 'limits-mismatch' | 'control-malformed';

/** How a reaped process ended, as in `child_process`. */
export interface ProcessExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

/** Resource usage of the reaped process (our extension): CPU time in ms, peak RSS in KiB. */
export interface ResourceUsage {
  readonly userCpuMs: number;
  readonly systemCpuMs: number;
  readonly maxRssKiB: number;
}

/** What the host observed of the process. */
export interface ProcessFacts {
  /** Diagnostic only: never a signal target after run returns. */
  readonly pid: number;
  readonly admission: AdmissionState;
  readonly limits: MeasuredLimits | null;
  /** Set only when the process was reaped. */
  readonly exit: ProcessExit | null;
  readonly pipesClosed: boolean;
  readonly stopped: StopReason | null;
  readonly killSent: boolean;
  /** Kept output (not frozen; its bytes belong to the caller). */
  readonly stdout: Buffer;
  readonly stderr: Buffer;
  /** Everything received before collection settled, kept or not. */
  readonly outputBytes: number;
  readonly durationMs: number;
  /** null when it could not be measured (for example the process was not reaped). */
  readonly resources: ResourceUsage | null;
}

/** The four request bounds, under their request names. */
export interface ConfinedBounds {
  readonly timeoutMs: number;
  readonly maxOutputBytes: number;
  readonly cpuSeconds: number;
  readonly maxDescriptors: number;
}

/** What the run was pinned to. */
export interface ConfinedIdentities {
  readonly program: {
    readonly digest: string;
    readonly entry: string;
    readonly args: readonly string[];
  };
  readonly input: {
    readonly digest: string;
  };
  /** The runtime digest. */
  readonly runtime: string;
  readonly profile: {
    readonly name: ConfinedProfileName;
    readonly digest: string;
    /** sha256 of the profile text (and parameters) actually passed to the sandbox. */
    readonly instantiated: string;
  };
  readonly bounds: ConfinedBounds;
}

/** No process exists. */
export interface ConfinedRunNotStarted {
  readonly status: 'not-started';
  readonly reason: NotStartedReason;
  readonly message: string;
  readonly namespace: NamespaceDisposition | null;
}

/** The process was reaped and its pipes closed. `attributable` iff `problems.length === 0`. */
export interface ConfinedRunObserved {
  readonly status: 'observed';
  readonly attributable: boolean;
  readonly problems: readonly string[];
  readonly identities: ConfinedIdentities;
  readonly process: ProcessFacts;
  readonly namespace: NamespaceDisposition;
}

/** Unknown, not failed: the process was not confirmed gone, or its pipes stayed open. */
export interface ConfinedRunUnresolved {
  readonly status: 'unresolved';
  readonly problems: readonly string[];
  readonly identities: ConfinedIdentities;
  readonly process: ProcessFacts;
  readonly namespace: NamespaceQuarantined;
}

export type ConfinedRunResult = ConfinedRunNotStarted | ConfinedRunObserved | ConfinedRunUnresolved;

export type ConfinedRunStatus = ConfinedRunResult['status'];

/** Runs one bounded Node.js program against read-only snapshots inside the kernel sandbox. */
export declare class ConfinedExecutor {
  /** @throws {TypeError} for invalid options. Touches nothing. */
  constructor(options: ConfinedExecutorOptions);
  /**
   * @throws {TypeError} synchronously, before anything is touched, for an invalid request
   *   (`invalid confined run request: ...`) or signal (`signal must be an AbortSignal`).
   */
  run(request: ConfinedRunRequest, signal?: AbortSignal): Promise<ConfinedRunResult>;
}

// ---------------------------------------------------------------------------------------------
// Diagnostics (messages published on EXECUTOR_CHANNEL; each is frozen)

/** The root was counted: `retained` is the number of its entries. */
export interface ExecutorCountedEvent {
  readonly event: 'counted';
  readonly root: string;
  readonly retained: number;
}

/** The namespace was written and verified. */
export interface ExecutorMaterialisedEvent {
  readonly event: 'materialised';
  readonly namespace: string;
}

/** The process was spawned; `profile` is the instantiated profile text. */
export interface ExecutorLaunchedEvent {
  readonly event: 'launched';
  readonly namespace: string;
  readonly pid: number;
  readonly profile: string;
}

/** The admission record arrived (written by the gate before the program's entry loads). */
export interface ExecutorAdmittedEvent {
  readonly event: 'admitted';
  readonly namespace: string;
  readonly pid: number;
}

/** Collection settled. */
export interface ExecutorCollectedEvent {
  readonly event: 'collected';
  readonly namespace: string;
}

export type ExecutorDiagnosticEvent =
  | ExecutorCountedEvent
  | ExecutorMaterialisedEvent
  | ExecutorLaunchedEvent
  | ExecutorAdmittedEvent
  | ExecutorCollectedEvent;

export type ExecutorEventName = ExecutorDiagnosticEvent['event'];
