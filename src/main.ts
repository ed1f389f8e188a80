import { runAsOrExit } from './cli/runAs.js';
import { runReceiver } from './runReceiver.js';

/** Entry point of the receiver (`npm start` runs it through `hiring-receiver serve`). */
// Started directly (`node dist/main.js`) as root under RUN_AS: drop as the CLI entry does; after
// the CLI entry it is a no-op (no longer root).
runAsOrExit(process.env);
runReceiver('serve').catch((err: unknown) => {
  process.stderr.write(`fatal: ${(err as Error).message}\n`);
  process.exit(1);
});
