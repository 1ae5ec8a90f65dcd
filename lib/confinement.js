// runConfinedCommand (owner: command runner). Placeholder.
import { ConfinementError } from './errors.js';

export { ConfinementError };
export async function runConfinedCommand() {
  throw new ConfinementError('confinement.refused', 'not implemented');
}
