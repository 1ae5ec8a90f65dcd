// Builds the native addon and helper executables against the headers of the node
// that runs this script. Nothing is downloaded: node-gyp is pointed at the local
// include directory (e.g. /usr/include/node), so the addon matches this node exactly
// and resolves OpenSSL's symbols from it at load time.
import { execFileSync } from 'node:child_process';
import { existsSync, realpathSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const prefix = path.dirname(path.dirname(realpathSync(process.execPath)));
const headers = path.join(prefix, 'include', 'node', 'node_api.h');
if (!existsSync(headers)) {
  console.error(
    `confined: Node headers not found at ${headers}.\n` +
      'Install the headers that match this node (Debian: they ship with the nodejs package; ' +
      'elsewhere use a node distribution that includes include/node).',
  );
  process.exit(1);
}

function nodeGyp() {
  const require = createRequire(import.meta.url);
  try {
    return require.resolve('node-gyp/bin/node-gyp.js');
  } catch {
    // Installed as a dependency without devDependencies: npm's own node-gyp.
    if (process.env.npm_config_node_gyp) return process.env.npm_config_node_gyp;
    console.error('confined: node-gyp not found (install devDependencies or use npm).');
    process.exit(1);
  }
}

const args = [nodeGyp(), 'rebuild', `--nodedir=${prefix}`, '--jobs=2'];
execFileSync(process.execPath, args, { cwd: root, stdio: 'inherit' });
