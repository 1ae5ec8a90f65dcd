// Loads the native addon and locates the helper executables built beside it.
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const packageRoot = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const buildDir = path.join(packageRoot, 'build', 'Release');
const require = createRequire(import.meta.url);

export const native = require(path.join(buildDir, 'confined.node'));

/** Absolute path of a helper executable built by binding.gyp (e.g. 'stage'). */
export function helperPath(name) {
  return path.join(buildDir, `confined-${name}`);
}

export function helperExists(name) {
  return existsSync(helperPath(name));
}

export { packageRoot, buildDir };
