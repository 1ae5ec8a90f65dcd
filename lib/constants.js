// Public constants of the executor. Values are ours to choose (design.md "API decisions");
// each is documented in README.md. Changing any policy constant changes confinedProfile().digest.

/** Largest maxRetained a ConfinedExecutor accepts (the default is 8). */
export const MAX_RETAINED = 64;
/** Default maxRetained. */
export const DEFAULT_RETAINED = 8;
/** Total bytes a snapshot (program or input) may hold: 512 MiB. */
export const MAX_SNAPSHOT_BYTES = 512 * 1024 * 1024;
/** Files a snapshot may hold. */
export const MAX_SNAPSHOT_FILES = 100_000;
/** Name of the confinement profile of this platform's backend. */
export const CONFINED_PROFILE =
  process.platform === 'darwin' ? 'confined-darwin-seatbelt/1' : 'confined-linux-bwrap/1';
/** First line of the snapshot digest protocol. */
export const SNAPSHOT_PROTOCOL = 'sf-confined-snapshot/1';
/** diagnostics_channel name of the executor's events. */
export const EXECUTOR_CHANNEL = 'confined:executor';
/** The only environment names the confined program receives (invariant 11). */
export const CONFINED_ENVIRONMENT_KEYS = Object.freeze([
  'LC_ALL',
  'TZ',
  'HOME',
  'TMPDIR',
  'OPENSSL_CONF',
]);
/** How long collection waits for the pipes to close after the process was reaped. */
export const CLOSE_GRACE_MS = 250;
/** How long collection waits for the process to be reaped after a stop (SIGKILL). */
export const KILL_CONFIRM_MS = 2000;
/** Request bounds. */
export const MAX_TIMEOUT_MS = 24 * 60 * 60 * 1000;
export const MAX_OUTPUT_BYTES = 256 * 1024 * 1024;
export const MAX_CPU_SECONDS = 24 * 60 * 60;
export const MIN_DESCRIPTORS = 32;
export const MAX_DESCRIPTORS = 65536;
export const MAX_ARGS = 256;

// Not exported from the package (spec: "Not exported").
export const CONTROL_MAX_BYTES = 1024;
export const PATH_MAX_CHARS = 256;
export const PATH_MAX_SEGMENTS = 16;
export const REFUSAL_EXIT_CODE = 125;
export const GO_BYTE = 0x67;
