/** Set on globalThis by `hiring-receiver serve` before it imports the receiver's entry (src/main.ts). */
export const SERVE_VIA_CLI = Symbol.for('hiring-receiver.serve-via-cli');
