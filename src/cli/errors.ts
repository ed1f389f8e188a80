import { constants } from 'node:os';
import { printJson, type CliIo } from './io.js';
import type { Progress } from './progress.js';
import { PartlyWritten } from '../db/writeInBatches.js';

/** Exit codes of every command: 0 success, 1 failure, 2 bad usage. */
export const EXIT = { ok: 0, failure: 1, usage: 2 } as const;

/** The exit status of a command a signal stopped, as the shell's for one it ended: 130 for SIGINT, 143 for SIGTERM. */
export const exitBySignal = (signal: NodeJS.Signals): number => 128 + constants.signals[signal];

/** A failure reported as one line on stderr, with its exit code. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number = EXIT.failure,
  ) {
    super(message);
    this.name = 'CliError';
  }
}

/** Bad usage found after parsing (conflicting or missing choices): exit code 2. */
export class UsageError extends CliError {
  constructor(message: string) {
    super(message, EXIT.usage);
    this.name = 'UsageError';
  }
}

/**
 * Runs a bulk change made in several transactions (writeInBatches). When one fails after others
 * committed, a line on stderr says how far it got (`said(written)`: what stays changed, what to
 * do), then the failure is reported as before (its own `error:` line, exit 1): the error alone
 * read as if nothing had changed. `committedBefore`: the command changed something before `run`
 * (a retry's second step), so the line is said whatever failed, and however little `run` wrote.
 */
export async function sayHowFar<T>(io: CliIo, progress: Progress, run: () => Promise<T>, said: (written: number) => string, committedBefore = false): Promise<T> {
  try {
    return await run();
  } catch (err) {
    const written = err instanceof PartlyWritten ? err.written : 0;
    if (written > 0 || committedBefore) {
      // The progress line cleared first: this one is not written over it.
      progress.end();
      io.err(said(written));
    }
    throw err instanceof PartlyWritten ? err.cause : err;
  }
}

/**
 * The line a bulk change stopped by a signal between two batches (stopOnInterrupt) says on stderr,
 * in sayHowFar's words: `done` is what the `n` committed rows are ("500 finished jobs deleted"),
 * `stays` what becomes of them ("they stay deleted").
 */
export function stoppedBySignal(command: string, by: NodeJS.Signals, n: number, done: string, stays: string): string {
  return n === 0
    ? `${command}: stopped by ${by} before its first batch (${done}); run it again`
    : `${command}: stopped part-way by ${by}: ${done} before it (${stays}); run it again for the rest`;
}

/**
 * Says that a signal stopped a bulk change: `line` on stderr (stoppedBySignal's, or the command's
 * own), and with --json (`result`) the result so far on stdout, marked `interrupted`. Returns the
 * exit status (exitBySignal).
 */
export function saidStopped(io: CliIo, by: NodeJS.Signals, line: string, result?: Record<string, unknown>): number {
  io.err(line);
  if (result) printJson(io, { ...result, interrupted: true });
  return exitBySignal(by);
}
