import { runAsOrExit } from './cli/runAs.js';
import { exitIfUnsupportedRuntime } from './db/unsupportedRuntime.js';
import { SERVE_VIA_CLI } from './cli/serveViaCli.js';
import { runReceiver } from './runReceiver.js';

/** Entry point of the receiver (`npm start` runs it through `hiring-receiver serve`). */
// Arguments are refused unless `hiring-receiver serve` imported this file (with its own arguments,
// already parsed): it says so through SERVE_VIA_CLI. (Comparing argv[1] with this file missed
// `node dist/main status`, which Node resolves to dist/main.js.)
const viaCli = (globalThis as Record<symbol, unknown>)[SERVE_VIA_CLI] === true;
const args = viaCli ? [] : process.argv.slice(2);
if (args.length > 0) {
  // `node dist/main.js status` would otherwise start a whole receiver on the database.
  process.stderr.write(
    `error: dist/main.js runs the receiver and takes no arguments (got ${JSON.stringify(args.join(' '))}); for commands run hiring-receiver <command> (node dist/cli/main.js <command>, or npm run cli -- <command>), e.g. hiring-receiver --help\n`,
  );
  process.exit(2);
}
// A Node.js too old for the SQLite driver would crash when the database opens: said instead.
exitIfUnsupportedRuntime();
// Started directly (`node dist/main.js`) under RUN_AS: drop as the CLI entry does. Not again after
// the CLI entry, which did it (dropped, no longer root, a second call said its warnings twice).
if (!viaCli) runAsOrExit(process.env);
runReceiver('serve').catch((err: unknown) => {
  process.stderr.write(`fatal: ${(err as Error).message}\n`);
  process.exit(1);
});
