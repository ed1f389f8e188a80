import { isSqliteBusy } from '../db/sqliteHelpers.js';
import type { Logger } from '../observability/logger.js';

/** A stop came while the workers' start waited for the write lock (whileLockHeld): the start ends, unfailed. */
export class StopDuringStart extends Error {}

/** How long the workers' start waits for a write lock another process holds (whileLockHeld). */
const STARTUP_LOCK_WAIT_MS = 30_000;

/**
 * A write of the workers' start, tried again while another process holds the write lock (a CLI
 * command, a `serve` or `work` migrating): each try waits as long as any statement here, 200 ms,
 * and a start exited 1 "database is locked" at the first. Up to STARTUP_LOCK_WAIT_MS, said once.
 */
export async function whileLockHeld<T>(step: () => Promise<T>, startStop: AbortSignal, logger: Logger): Promise<T> {
  const deadline = performance.now() + STARTUP_LOCK_WAIT_MS;
  let said = false;
  for (;;) {
    try {
      return await step();
    } catch (err) {
      if (!isSqliteBusy(err)) throw err;
      // A stop while waiting ends the start as a stop during its housekeeping does, not as a failure.
      if (startStop.aborted) throw new StopDuringStart();
      if (performance.now() >= deadline) {
        throw new Error(`the workers' start waited ${STARTUP_LOCK_WAIT_MS / 1000} s for the database's write lock, held by another process all along: ${(err as Error).message}`, { cause: err });
      }
      if (!said) logger.warn({ waitMs: STARTUP_LOCK_WAIT_MS }, "the database's write lock is held by another process: the workers' start waits for it");
      said = true;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}
