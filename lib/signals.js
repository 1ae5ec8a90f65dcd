// Signal numbers to names, as child_process reports them.
import { constants } from 'node:os';

const names = new Map();
for (const [name, n] of Object.entries(constants.signals)) if (!names.has(n)) names.set(n, name);

export function signalName(n) {
  return names.get(n) ?? `SIG${n}`;
}
