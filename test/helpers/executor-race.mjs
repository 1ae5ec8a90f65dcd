// The second controller of the cross-process capacity race (test/confined-executor.test.js):
// for each round i it waits for <sync>/start-<i>, runs HELLO against <root> with
// maxRetained 1, and at its `counted` event announces <sync>/counted-child-<i> and waits for
// <sync>/counted-parent-<i>, so that both controllers have counted the root before either
// claims a slot. Writes { status, reason } to <sync>/result-<i>.
// Usage: node executor-race.mjs <root> <sync> <rounds>
import fs from 'node:fs';
import path from 'node:path';
import { ConfinedExecutor } from '../../lib/executor.js';
import { awaitFile, onEvent, request } from './executor-fixture.js';

const [root, sync, rounds] = process.argv.slice(2);
const executor = new ConfinedExecutor({ root, maxRetained: 1 });

let round = 0;
onEvent(null, 'counted', () => {
  fs.writeFileSync(path.join(sync, `counted-child-${round}`), '');
  awaitFile(path.join(sync, `counted-parent-${round}`), 10_000);
});
for (; round < Number(rounds); round++) {
  awaitFile(path.join(sync, `start-${round}`), 60_000);
  const result = await executor.run(request('console.log("hello");\n'));
  const out = { status: result.status, reason: result.reason ?? null, message: result.message ?? null };
  fs.writeFileSync(path.join(sync, `result-${round}.tmp`), JSON.stringify(out));
  fs.renameSync(path.join(sync, `result-${round}.tmp`), path.join(sync, `result-${round}`));
}
