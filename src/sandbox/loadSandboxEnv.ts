/** What `npm run sandbox` (src/sandbox/main.ts) reads from the environment, checked once. */
export interface SandboxEnv {
  port: number;
  host: string;
  /** SANDBOX_TIME_FACTOR: the `timeFactor` option (retry backoff, delays divided by it). */
  timeFactor: number;
  /** SANDBOX_MANUAL_CLOCK=1: a manual clock, moved by `POST /_sandbox/clock/advance`. */
  manualClock: boolean;
}

const configError = (name: string, what: string, raw: string): Error => new Error(`config error: ${name}: ${what}, got ${JSON.stringify(raw)}`);

/** A bad value stops start-up with a message naming the variable; unset or empty means the default. */
export function loadSandboxEnv(env: NodeJS.ProcessEnv): Readonly<SandboxEnv> {
  const value = (name: string): string | undefined => (env[name] === '' ? undefined : env[name]);
  const rawPort = value('SANDBOX_PORT');
  const port = rawPort === undefined ? 4010 : Number(rawPort);
  if (rawPort !== undefined && (!Number.isInteger(port) || port < 0 || port > 65535)) throw configError('SANDBOX_PORT', 'must be an integer 0-65535', rawPort);
  const rawFactor = value('SANDBOX_TIME_FACTOR');
  // ' ' reads as 0 and is refused; '1e3' is allowed.
  const timeFactor = rawFactor === undefined ? 1 : Number(rawFactor);
  if (!Number.isFinite(timeFactor) || timeFactor <= 0) throw configError('SANDBOX_TIME_FACTOR', 'must be a positive number (60 plays an hour of retries in a minute)', String(rawFactor));
  const rawManual = value('SANDBOX_MANUAL_CLOCK');
  if (rawManual !== undefined && rawManual !== '0' && rawManual !== '1') throw configError('SANDBOX_MANUAL_CLOCK', 'must be 1 (manual clock) or 0', rawManual);
  return Object.freeze({ port, host: value('SANDBOX_HOST') ?? '127.0.0.1', timeFactor, manualClock: rawManual === '1' });
}
