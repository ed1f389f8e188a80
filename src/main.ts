import { createApp } from './app.js';
import { ConfigError, loadConfig } from './config/loadConfig.js';

/** Entry point of `npm start`: read the environment, build, start, wire signals. */
async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig(process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      for (const p of err.problems) process.stderr.write(`config error: ${p}\n`);
      process.exit(1);
    }
    throw err;
  }
  const receiver = createApp({ config });
  await receiver.start();
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    receiver.logger.info({ signal }, 'shutting down');
    receiver.stop().then(
      () => process.exit(0),
      (err) => {
        receiver.logger.error({ err: (err as Error).message }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

main().catch((err: unknown) => {
  process.stderr.write(`fatal: ${(err as Error).message}\n`);
  process.exit(1);
});
