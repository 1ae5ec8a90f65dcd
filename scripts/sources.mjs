// Lists the C sources of one binding.gyp target, so adding a file to native/ needs no
// edit of binding.gyp. Naming rules (see native/README.md):
//   native/*.c           the addon; *_linux.c only on Linux, *_darwin.c only on macOS
//   native/exe/<name>.c  the main of helper executable confined-<name> (Linux backend)
// Paths are printed relative to the package root, one per line, as gyp expects.
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const [target, platform = process.platform] = process.argv.slice(2);
const other = platform === 'darwin' || platform === 'mac' ? '_linux.c' : '_darwin.c';
const list = (dir) => readdirSync(path.join(root, dir)).filter((f) => f.endsWith('.c')).sort();

let out;
if (target === 'addon') {
  out = list('native').filter((f) => !f.endsWith(other)).map((f) => `native/${f}`);
} else {
  out = [`native/exe/${target}.c`];
}
process.stdout.write(out.join('\n') + '\n');
