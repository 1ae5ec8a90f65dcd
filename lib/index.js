// Everything: the executor API and the command runner.
export * from './confined-executor.js';
export * from './confinement.js';
