// The executor API, as the spec's module `confined-executor` exports it.
export { ConfinedExecutor } from './executor.js';
export { describeRuntime } from './runtime.js';
export { confinedProfile } from './profile.js';
export { snapshotDigest } from './snapshot.js';
export { ConfinedExecutorError } from './errors.js';
export {
  MAX_RETAINED,
  MAX_SNAPSHOT_BYTES,
  CONFINED_PROFILE,
  SNAPSHOT_PROTOCOL,
  EXECUTOR_CHANNEL,
  CONFINED_ENVIRONMENT_KEYS,
  CLOSE_GRACE_MS,
  KILL_CONFIRM_MS,
} from './constants.js';
