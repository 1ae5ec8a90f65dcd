// A host process for the host-death test (test/fault-injection.test.js): starts one piece of
// work that would run for a minute, prints "started" once it is under way, and stays alive
// until it is killed. The work carries <marker> in its argv, so /proc finds every process of it.
//   node host-child.mjs executor <marker> <dir>   a ConfinedExecutor run (root under <dir>)
//   node host-child.mjs command <marker> <dir>    runConfinedCommand of a shell tree
//   node host-child.mjs plain <marker> <dir>      the control: the same tree as a plain child
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { runConfinedCommand } from '../../lib/confinement.js';
import { ConfinedExecutor } from '../../lib/executor.js';
import { onEvent, request } from './executor-fixture.js';

const [mode, marker, dir] = process.argv.slice(2);
// The marker is a number of seconds ("60.<digits>"), so sleep takes it as its duration.
const tree = `sleep ${marker} & sleep ${marker}; wait`;
const started = () => process.stdout.write('started\n');

if (mode === 'executor') {
  const root = path.join(dir, 'root');
  fs.mkdirSync(root, { mode: 0o700 });
  const executor = new ConfinedExecutor({ root, maxRetained: 8 });
  onEvent(null, 'admitted', started);
  await executor.run(request('setTimeout(() => {}, 60_000);\n', { args: [marker] }));
} else if (mode === 'command') {
  const h = await runConfinedCommand({ command: '/bin/sh', args: ['-c', tree], cwd: dir, mounts: [{ path: dir, mode: 'ro' }] });
  started();
  await h.wait();
} else if (mode === 'plain') {
  spawn('/bin/sh', ['-c', tree], { stdio: 'ignore' });
  started();
  setTimeout(() => {}, 60_000);
} else {
  throw new Error(`unknown mode ${mode}`);
}
