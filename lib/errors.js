// Error classes of the public API.

/** Thrown by describeRuntime() only: 'unsupported-host' or 'runtime-unavailable'. */
export class ConfinedExecutorError extends Error {
  constructor(code, message, options) {
    super(message, options);
    this.code = code;
  }
  get name() {
    return 'ConfinedExecutorError';
  }
}

/** Rejection of runConfinedCommand: `code` is a stable string such as 'confinement.refused'. */
export class ConfinementError extends Error {
  constructor(code, message, options) {
    super(message, options);
    this.code = code;
  }
  get name() {
    return 'ConfinementError';
  }
}
