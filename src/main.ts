import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { runAsOrExit } from './cli/runAs.js';
import { runReceiver } from './runReceiver.js';

/** Entry point of the receiver (`npm start` runs it through `hiring-receiver serve`). */
// Arguments are checked only when this file is the process's entry: `hiring-receiver serve` imports it with its own.
const entry = process.argv[1] === undefined ? null : realpathOr(process.argv[1]);
const args = entry === realpathOr(fileURLToPath(import.meta.url)) ? process.argv.slice(2) : [];
if (args.length > 0) {
  // `node dist/main.js status` would otherwise start a whole receiver on the database.
  process.stderr.write(
    `error: dist/main.js runs the receiver and takes no arguments (got ${JSON.stringify(args.join(' '))}); for commands run hiring-receiver <command> (node dist/cli/main.js <command>, or npm run cli -- <command>), e.g. hiring-receiver --help\n`,
  );
  process.exit(2);
}
// Started directly (`node dist/main.js`) as root under RUN_AS: drop as the CLI entry does; after
// the CLI entry it is a no-op (no longer root).
runAsOrExit(process.env);
runReceiver('serve').catch((err: unknown) => {
  process.stderr.write(`fatal: ${(err as Error).message}\n`);
  process.exit(1);
});

function realpathOr(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
}
