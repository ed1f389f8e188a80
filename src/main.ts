import { runReceiver } from './runReceiver.js';

/** Entry point of the receiver (`npm start` runs it through `hiring-receiver serve`). */
runReceiver('serve').catch((err: unknown) => {
  process.stderr.write(`fatal: ${(err as Error).message}\n`);
  process.exit(1);
});
