import type { Hono } from 'hono';
import type { OpenDatabase } from '../db/openDatabase.js';
import { isMigrated } from '../db/migrate.js';
import { isSqliteBusy, probeWrite } from '../db/sqliteHelpers.js';
import type { WriteLockHold } from '../ingest/WriteLockHold.js';
import { systemClock, type Clock } from '../util/clock.js';

export interface ReadinessExtras {
  /** Extra detail for /readyz (paused sources, disabled sinks, held sources): reported, never failing readiness. */
  (): Record<string, unknown>;
}

/** The last ingest transaction failed for want of storage (disk full, I/O error), and when (Unix ms, by the receiver's clock); null once one commits. */
export type StorageFailure = () => { code: string; atMs: number } | null;

/**
 * How long a failed ingest commit keeps /readyz at 503. Not until the next commit: a probe that
 * writes nothing cannot tell a full disk, and an instance taken out of routing gets no delivery
 * that could commit. After this, it is ready again, and the next delivery says how things are.
 */
export const STORAGE_FAILURE_NOT_READY_MS = 30_000;

/**
 * How long /readyz keeps trying for a write lock another connection holds (on 1-4 ms timers, as
 * the ingest committer does) before it counts as held: a `work` process's transactions last
 * milliseconds, so one probe landing in one of them says nothing of how long the lock is held.
 */
export const READY_LOCK_TRY_MS = 100;

/** The write lock as deliveries wait for it: who saw it held since when, and how long they wait. */
export interface WriteLockReadiness {
  hold: WriteLockHold;
  /** WRITE_TIMEOUT_MS: a delivery that waits this long is answered 503. */
  boundMs: number;
  clock: Clock;
}

/** probeWrite, tried again on 1-4 ms timers for `tryMs` while another connection holds the lock. */
async function probeWriteWithin(sqlite: OpenDatabase['ingestSqlite'], tryMs: number): Promise<void> {
  const until = performance.now() + tryMs;
  for (let turn = 0; ; turn++) {
    try {
      return probeWrite(sqlite);
    } catch (err) {
      if (!isSqliteBusy(err) || performance.now() >= until || !sqlite.open) throw err;
    }
    await new Promise((r) => setTimeout(r, Math.min(2 ** turn, 4)));
    // Closed meanwhile (a stop): said as a closed database, not as a held lock.
    if (!sqlite.open) throw Object.assign(new Error('database closed'), { code: 'closed' });
  }
}

/**
 * GET /healthz: the process is up. GET /readyz: database open, writable and migrated, and its
 * write lock not held elsewhere so long that deliveries are refused (WRITE_TIMEOUT_MS).
 */
export function registerHealthRoutes(
  app: Hono<any>,
  database: OpenDatabase,
  extras: ReadinessExtras = () => ({}),
  storageFailure: StorageFailure = () => null,
  writeLock?: WriteLockReadiness,
  /** What is wrong with the database file (DatabaseFileWatch): deleted or replaced while open. */
  fileProblem: () => string | null = () => null,
): void {
  app.get('/healthz', (c) => c.json({ status: 'ok' }));
  app.get('/readyz', async (c) => {
    const checks: Record<string, string> = {};
    let ready = true;
    // The ingest connection is never left inside a transaction between ticks, unlike kysely's.
    const sqlite = database.ingestSqlite;
    if (!sqlite.open) {
      checks.database = 'closed';
      ready = false;
    } else if (fileProblem() !== null) {
      // Not the path: /readyz is unauthenticated. The log line names it.
      checks.database = 'replaced (the file at DATABASE_PATH was deleted or replaced while the receiver had it open: nothing more is stored; restart the receiver)';
      ready = false;
    } else {
      checks.database = 'open';
      checks.migrations = isMigrated(sqlite) ? 'applied' : 'pending';
      if (checks.migrations !== 'applied') ready = false;
      const failed = storageFailure();
      // By the receiver's clock, which stamped the failure (injectable, as the write lock's hold is).
      const ago = failed === null ? Infinity : (writeLock?.clock ?? systemClock).now() - failed.atMs;
      try {
        await probeWriteWithin(sqlite, READY_LOCK_TRY_MS);
        writeLock?.hold.obtained();
        checks.writable = 'yes';
      } catch (err) {
        if (isSqliteBusy(err)) {
          checks.writable = 'yes (write lock busy)';
          if (writeLock) {
            // Not ready once deliveries are refused, or would be: the lock was found held at every
            // attempt (the committer's, these probes') for as long as a delivery waits for it.
            // Ready again as soon as a probe or a commit takes it.
            // data_version moves when another connection commits: a hold seen after one is a new
            // hold, not the one an earlier probe saw (two short holds are not one long one).
            const now = writeLock.clock.now();
            writeLock.hold.held(now, sqlite.pragma('data_version', { simple: true }) as number);
            const heldMs = writeLock.hold.heldForMs(now);
            if (heldMs >= writeLock.boundMs) {
              checks.writable = `no (the write lock has been held by another connection for ${(heldMs / 1000).toFixed(1)} s; deliveries wait ${writeLock.boundMs} ms for it, then are answered 503)`;
              ready = false;
            }
          }
        } else {
          checks.writable = `no (${(err as { code?: string }).code ?? 'error'})`;
          ready = false;
        }
      }
      // The probe takes the lock and writes nothing, so a full disk passes it: the last ingest
      // commit that failed for want of storage says so for a while (it answered 503 itself).
      if (ready && ago < STORAGE_FAILURE_NOT_READY_MS) {
        checks.writable = `no (the last delivery's commit failed: ${failed!.code}, ${Math.round(ago / 1000)} s ago)`;
        ready = false;
      }
    }
    return c.json({ status: ready ? 'ready' : 'not_ready', checks, ...extras() }, ready ? 200 : 503);
  });
}
