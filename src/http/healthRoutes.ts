import type { Hono } from 'hono';
import type { OpenDatabase } from '../db/openDatabase.js';
import { isMigrated } from '../db/migrate.js';
import { isSqliteBusy, probeWrite } from '../db/sqliteHelpers.js';

export interface ReadinessExtras {
  /** Extra detail for /readyz (paused sources, disabled sinks): reported, never failing readiness. */
  (): Record<string, unknown>;
}

/** GET /healthz: the process is up. GET /readyz: database open, writable and migrated. */
export function registerHealthRoutes(app: Hono<any>, database: OpenDatabase, extras: ReadinessExtras = () => ({})): void {
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
    }
    return c.json({ status: ready ? 'ready' : 'not_ready', checks, ...extras() }, ready ? 200 : 503);
  });
}
