/** `npm run sandbox`: the hiring-service stand-in on SANDBOX_HOST:SANDBOX_PORT (default 127.0.0.1:4010); see loadSandboxEnv for the rest. */
import { createManualClock } from './clock.js';
import { createSandbox } from './createSandbox.js';
import { loadSandboxEnv } from './loadSandboxEnv.js';

async function main(env: NodeJS.ProcessEnv): Promise<void> {
  const { port, host, timeFactor, manualClock } = loadSandboxEnv(env);
  const sandbox = createSandbox({
    timeFactor,
    ...(manualClock ? { clock: createManualClock() } : {}),
    logger: {
      info: (obj, msg) => console.log(JSON.stringify({ level: 'info', msg, ...obj })),
      warn: (obj, msg) => console.warn(JSON.stringify({ level: 'warn', msg, ...obj })),
    },
  });
  const { url } = await sandbox.start(port, host).catch((err: unknown) => {
    throw listenError(err, host, port);
  });
  const clock = `${manualClock ? 'manual: moves only by POST /_sandbox/clock/advance (or /_sandbox/deliveries/wait)' : 'real'}${timeFactor === 1 ? '' : `; delays divided by ${timeFactor}`}`;
  const lines = [
    `Hiring service sandbox listening on ${url}`,
    // The receiver takes the base and adds the paths itself: the API line's URLs, pasted into
    // HIRING_API_URL, were refused.
    `  Receiver: HIRING_API_URL=${url} with one of the API keys below as HIRING_API_KEY`,
    `  API:     ${url}/api/v1, ${url}/api/v2`,
    `  Control: ${url}/_sandbox (see docs/sandbox.md)`,
    `  Clock:   ${clock}`,
  ];
  for (const org of sandbox.control.organizations()) {
    lines.push(`  Organization "${org.name}" (${org.id})`);
    for (const key of org.api_keys) lines.push(`    API key: ${key.key}`);
  }
  console.log(lines.join('\n'));
  const shutdown = (why: string): void => {
    console.log(`${why}, stopping sandbox`);
    sandbox.stop().then(
      () => process.exit(0),
      (err: unknown) => {
        console.error(err);
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', () => shutdown('SIGTERM received'));
  process.once('SIGINT', () => shutdown('SIGINT received'));
  // `kill <npm's pid>` under `npm run sandbox` ends npm and its shell, not this process, which
  // would keep the port: under an npm script (npm_lifecycle_event set), a new parent means npm is
  // gone. (The receiver does the same in src/util/npmParent.ts; the sandbox shares no code with it.)
  if (env['npm_lifecycle_event']) {
    const parent = process.ppid;
    const watch = setInterval(() => {
      if (process.ppid === parent) return;
      clearInterval(watch);
      shutdown('npm, which started it, exited');
    }, 1000);
    watch.unref();
  }
}

/**
 * A listen failure naming the setting to change: Node's own (`listen EADDRINUSE: address already
 * in use 127.0.0.1:4010`) names neither SANDBOX_PORT nor the likely cause, a sandbox (or another
 * server) already running on the port; nor SANDBOX_HOST for an address not of this machine.
 */
function listenError(err: unknown, host: string, port: number): unknown {
  const code = (err as NodeJS.ErrnoException | null)?.code;
  if (code === 'EADDRINUSE') {
    return new Error(`SANDBOX_PORT: ${host}:${port} is already in use (another sandbox still running?); stop it or choose another port: SANDBOX_PORT, or --port with hiring-receiver sandbox (0 picks a free one)`);
  }
  if (code === 'EACCES') return new Error(`SANDBOX_PORT: not allowed to listen on ${host}:${port} (ports below 1024 need privileges); choose another port: SANDBOX_PORT, or --port with hiring-receiver sandbox`);
  // A SANDBOX_HOST that is no address of this machine: Node's `listen EADDRNOTAVAIL: address not
  // available 192.0.2.1` names no setting either (the receiver says HOST: ... likewise).
  if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND' || code === 'EAI_AGAIN') {
    return new Error(`SANDBOX_HOST: cannot listen on ${JSON.stringify(host)} (${code}): not an address of this machine; leave it unset for 127.0.0.1`);
  }
  return err;
}

main(process.env).catch((err: unknown) => {
  // A config error says so itself; anything else (a port in use) gets the CLI's "error:" prefix.
  const message = err instanceof Error ? err.message : String(err);
  console.error(message.startsWith('config error:') ? message : `error: ${message}`);
  process.exit(1);
});
