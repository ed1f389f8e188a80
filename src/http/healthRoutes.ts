import type { Hono } from 'hono';
import type { OpenDatabase } from '../db/openDatabase.js';
import { isMigrated } from '../db/migrate.js';
import { isSqliteBusy, probeWrite } from '../db/sqliteHelpers.js';

export interface ReadinessExtras {
  /** Extra detail for /readyz (paused sources, disabled sinks): reported, never failing readiness. */
  (): Record<string, unknown>;
}

/** The last ingest transaction failed for want of storage (disk full, I/O error), and when (Unix ms); null once one commits. */
export type StorageFailure = () => { code: string; atMs: number } | null;

/**
 * How long a failed ingest commit keeps /readyz at 503. Not until the next commit: a probe that
 * writes nothing cannot tell a full disk, and an instance taken out of routing gets no delivery
 * that could commit. After this, it is ready again, and the next delivery says how things are.
 */
export const STORAGE_FAILURE_NOT_READY_MS = 30_000;

/** GET /healthz: the process is up. GET /readyz: database open, writable and migrated. */
export function registerHealthRoutes(app: Hono<any>, database: OpenDatabase, extras: ReadinessExtras = () => ({}), storageFailure: StorageFailure = () => null): void {
  app.get('/healthz', (c) => c.json({ status: 'ok' }));
  app.get('/readyz', (c) => {
    const checks: Record<string, string> = {};
    let ready = true;
    // The ingest connection is never left inside a transaction between ticks, unlike kysely's.
    const sqlite = database.ingestSqlite;
    if (!sqlite.open) {
      checks.database = 'closed';
      ready = false;
    } else {
      checks.database = 'open';
      checks.migrations = isMigrated(sqlite) ? 'applied' : 'pending';
      if (checks.migrations !== 'applied') ready = false;
      const failed = storageFailure();
      const ago = failed === null ? Infinity : Date.now() - failed.atMs;
      try {
        probeWrite(sqlite);
        checks.writable = 'yes';
      } catch (err) {
        if (isSqliteBusy(err)) checks.writable = 'yes (write lock busy)';
        else {
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
