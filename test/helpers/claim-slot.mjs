// Claims one slot of the root given in argv[2] (maxRetained argv[3]) once the go file
// argv[4] exists, and prints the result as JSON. Used by the namespace capacity race test.
import fs from 'node:fs';
import { claimSlot } from '../../lib/namespace.js';

const [root, max, go] = process.argv.slice(2);
while (!fs.existsSync(go)) await new Promise((resolve) => setTimeout(resolve, 1));
process.stdout.write(JSON.stringify(claimSlot(root, Number(max))));
