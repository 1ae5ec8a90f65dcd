// A hello program for `npx confined run examples/hello`. It runs confined: it can read its own
// snapshot and its (read-only) working directory, and nothing else; it cannot write, connect
// or start processes. What it prints is reported back by the host.
import { readdirSync } from 'node:fs';

const who = process.argv[2] ?? 'world';
console.log(`hello, ${who}, from a confined node ${process.version}`);
console.log(`uid ${process.getuid()}, pid ${process.pid}, cwd ${process.cwd()}`);
console.log(`working directory holds: ${JSON.stringify(readdirSync('.'))}`);
console.log(`environment: ${Object.keys(process.env).sort().join(' ')}`);
