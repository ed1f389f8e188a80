#!/usr/bin/env node
/** The `hiring-receiver` command (package bin, `npm run cli --`). */
import { exitIfUnsupportedRuntime } from '../db/unsupportedRuntime.js';
import { outputFailed, processIo } from './io.js';
import { runCli } from './program.js';
import { runAsOrExit } from './runAs.js';

function databaseArg(argv: readonly string[]): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--database') return argv[i + 1];
    if (argv[i]!.startsWith('--database=')) return argv[i]!.slice('--database='.length);
  }
  return undefined;
}

/** The commands that create the database when it is missing: only they are given its folder. */
const CREATES_DATABASE = new Set(['serve', 'work', 'migrate']);

// Before anything opens a database: on a Node.js too old for the SQLite driver, that would crash.
exitIfUnsupportedRuntime();
// Then: the Docker image starts as root and drops to RUN_AS here (see runAs.ts), for the
// database the command will open (--database, or DATABASE_PATH).
const command = process.argv.slice(2).find((a) => !a.startsWith('-'));
runAsOrExit(process.env, databaseArg(process.argv.slice(2)) ?? process.env.DATABASE_PATH, command !== undefined && CREATES_DATABASE.has(command));
const outcome = await runCli(process.argv.slice(2), processIo());
if (!outcome.running) {
  // Flush, then exit: an idle keep-alive socket must not keep a finished command alive.
  await new Promise<void>((resolve) => process.stdout.write('', () => resolve()));
  await new Promise<void>((resolve) => process.stderr.write('', () => resolve()));
  process.exit(outcome.code === 0 && outputFailed() ? 1 : outcome.code);
}
