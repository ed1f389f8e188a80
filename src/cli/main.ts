#!/usr/bin/env node
/** The `hiring-receiver` command (package bin, `npm run cli --`). */
import { processIo } from './io.js';
import { runCli } from './program.js';
import { runAsFromEnv } from './runAs.js';

// First: the Docker image starts as root and drops to RUN_AS here (see runAs.ts).
try {
  runAsFromEnv(process.env);
} catch (err) {
  process.stderr.write(`fatal: ${(err as Error).message}\n`);
  process.exit(1);
}
const outcome = await runCli(process.argv.slice(2), processIo());
if (!outcome.running) {
  // Flush, then exit: an idle keep-alive socket must not keep a finished command alive.
  await new Promise<void>((resolve) => process.stdout.write('', () => resolve()));
  await new Promise<void>((resolve) => process.stderr.write('', () => resolve()));
  process.exit(outcome.code);
}
