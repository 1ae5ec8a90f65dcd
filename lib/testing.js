// Test seams. NOT exported by the package (package.json "exports" does not list it), so code
// that imports `confined` cannot reach it; the suites import it by relative path.
//
// withPatchedProfile(patch, fn): runs fn with the executor's active profile patched, restores
// it afterwards. A patch may hold:
//   parts:  overrides of profile parts (e.g. { tools: { bwrap: '/missing', stage } }); the
//           patched profile has its own digest (confinedProfile() returns it while patched)
//   argv(argv) -> argv:        rewrite the bwrap argv (e.g. add '--bind', '/', '/')
//   filter(buffer) -> buffer:  replace the seccomp program (e.g. allow-all)
//   mounts(mounts) -> mounts:  change the staged mounts (e.g. noexec: false)
import { setActiveProfileForTesting } from './profile.js';

export async function withPatchedProfile(patch, fn) {
  setActiveProfileForTesting(patch);
  try {
    return await fn();
  } finally {
    setActiveProfileForTesting(null);
  }
}

/** A seccomp program that allows everything: one BPF_RET|BPF_K SECCOMP_RET_ALLOW. */
export function allowAllFilter() {
  const b = Buffer.alloc(8);
  b.writeUInt16LE(0x06, 0); // BPF_RET | BPF_K
  b.writeUInt32LE(0x7fff0000, 4); // SECCOMP_RET_ALLOW
  return b;
}

export { observers as collectObservers } from './collect.js';
