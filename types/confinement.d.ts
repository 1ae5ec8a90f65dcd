// Declarations of the command runner (module `confined/confinement`), with the names and shapes
// of spec/confined-command-runner.md and the choices of design.md ("API decisions"). Where the
// spec leaves a shape open, the choice made here is the contract the implementation follows.

/// <reference types="node" />

import type { Readable } from 'node:stream';

// ---------------------------------------------------------------------------------------------
// Posture and errors

/** The kernel mechanism that confines, or `none`. */
export type ConfinementBackend = 'bwrap' | 'seatbelt' | 'none';

/** Confinement is enforced by a backend. */
export interface ConfinementPostureEnforced {
  readonly enforced: true;
  readonly backend: 'bwrap' | 'seatbelt';
  readonly reason: null;
}

/** Confinement is unavailable; `reason` says why (the same text a refusal carries). */
export interface ConfinementPostureUnenforced {
  readonly enforced: false;
  readonly backend: ConfinementBackend;
  readonly reason: string;
}

export type ConfinementPosture = ConfinementPostureEnforced | ConfinementPostureUnenforced;

/** Codes of a `runConfinedCommand` refusal. */
export type ConfinementErrorCode =
  | 'confinement.refused'
  | 'confinement.allowlist-requires-confinement'
  | 'confinement.mount-not-absolute'
  | 'confinement.cwd-not-mounted'
  | 'confinement.env-name-invalid'
  | 'confinement.limit-invalid'
  | 'confinement.aborted'
  | 'confinement.proxy-not-ready'
  /** Extension: an option has the wrong type or shape (not a refusal the spec names). */
  | 'confinement.option-invalid'
  /** Extension: a mount path does not exist (or is neither a directory nor a regular file). */
  | 'confinement.mount-missing'
  /** Extension: a mount path is not canonical (its realpath differs: a symlink, `..`, a trailing `/`). */
  | 'confinement.mount-not-canonical'
  /**
   * Extension (Linux, root callers): an rw mount whose directory is not owned by uid 0. A root
   * caller's command runs as uid 65534 through an idmapped mount that maps uid 0 only, so the
   * owner would be unmapped and nothing could be created there.
   */
  | 'confinement.mount-owner-unmapped'
  /**
   * Extension (Linux, root callers): a mount's filesystem does not support idmapped mounts
   * (proc, sysfs...), so it cannot be staged; nothing was started.
   */
  | 'confinement.mount-not-idmappable'
  /** Extension: `command` is not an executable file (absolute, or found on /usr/bin:/bin). */
  | 'confinement.command-not-found'
  /** Extension: `command` lies outside the system directories and the mounts. */
  | 'confinement.command-not-mounted'
  /** Extension: the forwarder bridge (`forwarderPath`, or the one this package ships) is missing. */
  | 'confinement.forwarder-not-found'
  /** Extension: the launcher could not be spawned (nothing was started). */
  | 'confinement.launch-failed'
  /** Extension, macOS only: an allowlist is refused (Seatbelt's one-port rule cannot reach the
   * egress proxy's Unix socket); nothing was started. */
  | 'confinement.allowlist-not-supported'
  /** An invalid `network.allowlist` (lib/egress/allowlist.js): the first rule broken. */
  | `proxy.job-allowlist.${AllowlistRefusalReason}`;

/**
 * Why an allowlist (or one of its entries) is not exact `host:port`: the suffix of its
 * `proxy.job-allowlist.*` code. The first rule an entry breaks is reported.
 */
export type AllowlistRefusalReason =
  /** The allowlist is not an array, or an entry is not a string. */
  | 'invalid-type'
  /** More than 1024 entries. */
  | 'too-many'
  /** An entry is the empty string. */
  | 'empty'
  /** An entry is longer than 300 characters. */
  | 'too-long'
  /** NUL, CR, LF, space, tab, DEL or another control character. */
  | 'control-character'
  /** Non-ASCII text (an IDNA name: resolvers map it differently). */
  | 'non-ascii'
  /** A scheme (`https://...`). */
  | 'scheme'
  /** Userinfo (`user@host`). */
  | 'userinfo'
  /** A `*` anywhere. */
  | 'wildcard'
  /** A `/prefix` range. */
  | 'cidr'
  /** A path, query, fragment or backslash. */
  | 'path'
  /** No port (a bare host). */
  | 'bare-host'
  /** An IPv6 zone id (`%eth0`), bracketed or not. */
  | 'zone-id'
  /** An IPv6 literal without brackets. */
  | 'ipv6-unbracketed'
  /** Not a DNS name, an IPv4 literal (inet_aton forms included) or a bracketed IPv6 literal. */
  | 'invalid-host'
  /** Not decimal 1..65535 without sign or leading zero. */
  | 'invalid-port';

/** The rejection of `runConfinedCommand`: nothing was started. */
export declare class ConfinementError extends Error {
  constructor(code: ConfinementErrorCode, message: string, options?: { cause?: unknown });
  readonly code: ConfinementErrorCode;
  readonly name: 'ConfinementError';
}

// ---------------------------------------------------------------------------------------------
// Options

export type MountMode = 'ro' | 'rw';

/** A host path (absolute, canonical) bound at the same path. */
export interface ConfinedMount {
  readonly path: string;
  readonly mode: MountMode;
}

/** Why the egress proxy (lib/egress/proxy.js) refused a request. */
export type EgressDenialReason =
  /** The normalised host and port are not exactly an entry of the allowlist. */
  | 'not-allowlisted'
  /**
   * A resolved address is loopback, private, shared, link-local (169.254.169.254 included),
   * multicast, unspecified, reserved, documentation or an embedded IPv4 form (mapped,
   * compatible, NAT64, 6to4, Teredo), and the entry does not name that address literally.
   */
  | 'address-refused'
  /** The name did not resolve (or the lookup timed out). */
  | 'resolution-failed'
  /** The request head or its target could not be parsed or normalised (NUL, bare CR/LF, zone id, bad port...). */
  | 'invalid-target'
  /**
   * Neither CONNECT nor an absolute-URI `http://` request with a supported method, a body
   * framed otherwise than by one Content-Length, a request head over 16 KiB, or a second
   * request on a forwarded plain connection (refused, never forwarded).
   */
  | 'unsupported-request'
  /**
   * A ClientHello sent in the clear through an allowed CONNECT tunnel (the first, or the second
   * one a HelloRetryRequest asks for) named another host, named none for a name entry, named
   * one for an IP literal entry, or hid its name (an encrypted client hello, GREASE included:
   * a client must not offer ECH). The tunnel is closed; the upstream never got that hello.
   */
  | 'tls-name-mismatch'
  /**
   * A tunnel that starts like TLS did not start with one well-formed ClientHello (an alert
   * first, a malformed or oversized hello), held more than 64 KiB before the server answered, or
   * sent a handshake record after a server answer that was not a ServerHello. Closed likewise.
   */
  | 'tls-malformed';

/** One request the egress proxy refused (frozen). */
export interface EgressDenial {
  /**
   * The host as requested, normalised like an entry (lower case, no trailing dot, an IPv4
   * literal as a dotted quad, an IPv6 literal canonical and without brackets); for a target
   * that does not parse, a printable best-effort form (`?` for other bytes); '' when none.
   */
  readonly host: string;
  /** null when the request named no valid port. */
  readonly port: number | null;
  readonly reason: EgressDenialReason;
  /** ISO 8601 time of the denial. */
  readonly at: string;
}

/** The `sandbox:violation` event payload (frozen): one egress denial, as a kernel violation event. */
export interface SandboxViolationEvent {
  readonly type: 'sandbox:violation';
  readonly kind: 'network';
  readonly host: string;
  readonly port: number | null;
  readonly reason: EgressDenialReason;
  /** The command of the run whose proxy refused the connection. */
  readonly command: string;
  readonly at: string;
}

/** `network` option other than `'off'`: exact `host:port` entries reached through the proxy. */
export interface ConfinedNetworkAllowlist {
  /**
   * Exact `host:port` entries (no bare host, wildcard, CIDR, scheme, path or userinfo; IPv6
   * bracketed), at most 1024; an invalid one rejects with `proxy.job-allowlist.*`. An empty
   * list is valid: every request is denied.
   */
  readonly allowlist: readonly string[];
  /**
   * The forwarder bridge executable (absolute); defaults to the `confined-forwarder` this
   * package builds. It is run as `forwarder <port> <socket> --exec -- command args...`.
   */
  readonly forwarderPath?: string;
  /** Receives each denial. */
  readonly onDenied?: (denial: EgressDenial) => void;
  /** Receives each denial mapped to a `sandbox:violation` event. */
  readonly violations?: (event: SandboxViolationEvent) => void;
}

export type ConfinedNetwork = 'off' | ConfinedNetworkAllowlist;

/** Each limit is a positive integer. */
export interface ConfinedCommandLimits {
  /** Default: none. */
  readonly wallTimeoutMs?: number;
  /** Default: 1 MiB. */
  readonly maxStdoutBytes?: number;
  /** Default: 1 MiB. */
  readonly maxStderrBytes?: number;
  /** Extension: RLIMIT_CPU, soft = hard (seconds). */
  readonly cpuSeconds?: number;
  /** Extension: RLIMIT_NOFILE, soft = hard. */
  readonly maxDescriptors?: number;
  /** Extension: RLIMIT_FSIZE, soft = hard (bytes). */
  readonly fileSizeBytes?: number;
  /** Extension: RLIMIT_NPROC, soft = hard. */
  readonly maxProcesses?: number;
}

/** Receives `sandbox:admission` and `sandbox:violation` events; an EventEmitter fits. */
export interface SecurityEventEmitter {
  emit(event: string, payload: unknown): unknown;
}

export interface ConfinedCommandOptions {
  /** An absolute path, or a program found on the default PATH. */
  readonly command: string;
  /** Default: []. */
  readonly args?: readonly string[];
  /** Default: process.cwd(). When confined it must lie inside one of the mounts. */
  readonly cwd?: string;
  /** Default: []. */
  readonly mounts?: readonly ConfinedMount[];
  /** The only environment the command sees, plus PATH=/usr/bin:/bin unless set. Default: {}. */
  readonly env?: Readonly<Record<string, string>>;
  /** Default: 'off' (loopback only). */
  readonly network?: ConfinedNetwork;
  readonly limits?: ConfinedCommandLimits;
  /** Ends the whole process tree. */
  readonly signal?: AbortSignal;
  /** Observation only. */
  readonly securityEventEmitter?: SecurityEventEmitter;
  /** Observation only. */
  readonly recordAdmission?: (record: SurfaceAdmissionRecord) => void;
}

// ---------------------------------------------------------------------------------------------
// Admission

export type AdmissionVerdict = 'admitted' | 'refused';

/** The `sandbox:admission` event payload. */
export interface SandboxAdmissionEvent {
  readonly type: 'sandbox:admission';
  readonly verdict: AdmissionVerdict;
  /** Typed reasons, one stable code each (a ConfinementErrorCode for a refusal); [] when admitted. */
  readonly reasons: readonly string[];
  readonly posture: ConfinementPosture;
  readonly command: string;
  /** ISO 8601 time of the decision. */
  readonly at: string;
}

/** Events a {@link SecurityEventEmitter} receives, under the name in `type`. */
export type SecurityEvent = SandboxAdmissionEvent | SandboxViolationEvent;

export type NetworkMode = 'off' | 'allowlist';

/** The limits a launch applied: defaults filled in, null where none applies. */
export interface AppliedCommandLimits {
  readonly wallTimeoutMs: number | null;
  readonly maxStdoutBytes: number;
  readonly maxStderrBytes: number;
  readonly cpuSeconds: number | null;
  readonly maxDescriptors: number | null;
  readonly fileSizeBytes: number | null;
  readonly maxProcesses: number | null;
}

/** The launch's admission record, for `recordAdmission`. */
export interface SurfaceAdmissionRecord {
  readonly verdict: AdmissionVerdict;
  readonly reasons: readonly string[];
  readonly posture: ConfinementPosture;
  readonly command: string;
  readonly args: readonly string[];
  readonly cwd: string;
  readonly mounts: readonly ConfinedMount[];
  /** Names only: values are never recorded. */
  readonly envNames: readonly string[];
  readonly network: NetworkMode;
  /** The normalised allowlist entries (`host:port`, `[v6]:port`, duplicates removed); [] when network is 'off'. */
  readonly allowlist: readonly string[];
  readonly limits: AppliedCommandLimits;
  readonly at: string;
}

// ---------------------------------------------------------------------------------------------
// Handle and result

export interface ConfinedCommandResult {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  /** The wall timeout fired. */
  readonly timedOut: boolean;
  /** A stream exceeded its cap. */
  readonly truncated: boolean;
  /** The signal or stop() ended it. */
  readonly aborted: boolean;
  readonly confined: boolean;
  readonly posture: ConfinementPosture;
  /** The end of stderr as text. */
  readonly stderrTail: string;
}

export interface ConfinedCommandHandle {
  /** The launcher's (bwrap monitor's) host pid; 0 when stop() ran before anything was spawned. */
  readonly pid: number;
  /** Delivers at most maxStdoutBytes; beyond that bytes are discarded while the pipe drains. */
  readonly stdout: Readable;
  readonly stderr: Readable;
  readonly confined: boolean;
  readonly posture: ConfinementPosture;
  /** Resolves once the command exited and its output was delivered; never rejects. */
  wait(): Promise<ConfinedCommandResult>;
  /** Ends the whole tree at any stage; bounded and idempotent (every call, the same result). */
  stop(): Promise<ConfinedCommandResult>;
}

// ---------------------------------------------------------------------------------------------
// Constants and diagnostics

/** diagnostics_channel name of the command runner's start-up stages. */
export declare const COMMAND_CHANNEL: 'confined:command';

/**
 * Start-up stages, in order: `admitted` (validated, admission recorded, nothing spawned yet),
 * `spawned` (bwrap exec'd, `pid` known), `running` (the stage's limit report checked; the command
 * is exec'd), `exited` (the launcher was reaped), `settled` (the result is final).
 */
export type CommandStage = 'admitted' | 'spawned' | 'running' | 'exited' | 'settled';

export declare const COMMAND_STAGES: readonly ['admitted', 'spawned', 'running', 'exited', 'settled'];

/** One message on COMMAND_CHANNEL (frozen). `stop` is the handle's stop(), usable at any stage. */
export interface CommandDiagnosticsMessage {
  readonly event: CommandStage;
  readonly command: string;
  /** 0 before `spawned`. */
  readonly pid: number;
  stop(): Promise<ConfinedCommandResult>;
}

/** Default maxStdoutBytes and maxStderrBytes: 1 MiB. */
export declare const DEFAULT_MAX_OUTPUT_BYTES: number;
/** Most bytes of the delivered stderr kept in `stderrTail` (never more than maxStderrBytes). */
export declare const STDERR_TAIL_BYTES: number;
/**
 * The port the forwarder bridge listens on inside the sandbox (its own network namespace, loopback
 * only); the proxy variables are `http://127.0.0.1:<FORWARDER_PORT>`.
 */
export declare const FORWARDER_PORT: number;
/** Most mounts one command may have (more is confinement.option-invalid). */
export declare const MAX_MOUNTS: number;
/** The PATH a command gets unless `env` sets one. */
export declare const DEFAULT_COMMAND_PATH: '/usr/bin:/bin';

/**
 * Runs one command inside the engine's confinement.
 * Rejects with {@link ConfinementError} before anything starts.
 */
export declare function runConfinedCommand(options: ConfinedCommandOptions): Promise<ConfinedCommandHandle>;
