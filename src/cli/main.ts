#!/usr/bin/env node
/** The `hiring-receiver` command (package bin, `npm run cli --`). */
import { processIo } from './io.js';
import { runCli } from './program.js';

const outcome = await runCli(process.argv.slice(2), processIo());
if (!outcome.running) {
  // Flush, then exit: an idle keep-alive socket must not keep a finished command alive.
  await new Promise<void>((resolve) => process.stdout.write('', () => resolve()));
  await new Promise<void>((resolve) => process.stderr.write('', () => resolve()));
  process.exit(outcome.code);
}
