// The macOS (Seatbelt) backend's building blocks. Everything here is pure or takes its
// file-system access as a callback, so it loads and is unit-tested on Linux; only
// test/darwin-backend.test.js runs sandbox-exec, on macOS.
export { resolveClosure, fsHost, isSystemPath, machoCpu, SYSTEM_PREFIXES, DYLD_PATH } from './closure.js';
export { buildSeatbeltProfile, referenceExecutorProfile, executorProfileRequest } from './profile.js';
export { commandSeatbeltRequest, commandSeatbeltProfile } from './command.js';
export {
  TOOL_PATHS,
  LAUNCH_SCRIPT,
  COMMAND_LAUNCH_SCRIPT,
  checkTools,
  executorLaunchArgv,
  commandLaunchArgv,
} from './launch.js';
// The wiring into both public APIs (lib/runtime.js, lib/profile.js, lib/executor.js and
// lib/confinement.js dispatch here on darwin).
export { describeRuntimeDarwin, verifyRuntimeDarwin, darwinHostProblem, macosVersionId } from './runtime.js';
export {
  DARWIN_PROFILE_NAME,
  DARWIN_PRELOAD_TEMPLATE,
  darwinProfileParts,
  darwinProfileDigest,
  darwinProfile,
  instantiateDarwinPreload,
} from './profile-identity.js';
export { runDarwin, planDarwinLaunch, DarwinProcess } from './executor.js';
export { runCommandDarwin, darwinCommandPosture } from './confinement.js';
