/** `npm run sandbox`: the hiring-service stand-in on SANDBOX_HOST:SANDBOX_PORT (default 127.0.0.1:4010). */
import { createSandbox } from './createSandbox.js';

function parsePort(raw: string | undefined): number {
  if (raw === undefined || raw === '') return 4010;
  const port = Number(raw);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new Error(`config error: SANDBOX_PORT: must be an integer 0-65535, got ${JSON.stringify(raw)}`);
  }
  return port;
}

async function main(env: NodeJS.ProcessEnv): Promise<void> {
  const port = parsePort(env['SANDBOX_PORT']);
  const host = env['SANDBOX_HOST'] || '127.0.0.1';
  const sandbox = createSandbox({
    logger: {
      info: (obj, msg) => console.log(JSON.stringify({ level: 'info', msg, ...obj })),
      warn: (obj, msg) => console.warn(JSON.stringify({ level: 'warn', msg, ...obj })),
    },
  });
  const { url } = await sandbox.start(port, host);
  const lines = [`Hiring service sandbox listening on ${url}`, `  API:     ${url}/api/v1, ${url}/api/v2`, `  Control: ${url}/_sandbox (see docs/sandbox.md)`];
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

main(process.env).catch((err: unknown) => {
  // A config error says so itself; anything else (a port in use) gets the CLI's "error:" prefix.
  const message = err instanceof Error ? err.message : String(err);
  console.error(message.startsWith('config error:') ? message : `error: ${message}`);
  process.exit(1);
});
