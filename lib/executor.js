// ConfinedExecutor (owner: launch). Placeholder.
export class ConfinedExecutor {}
