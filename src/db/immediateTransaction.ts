import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database } from './schema.js';
import { isSqliteBusy } from './sqliteHelpers.js';

/**
 * Runs `work` in a BEGIN IMMEDIATE transaction on kysely's connection (which
 * it holds until the end, so nothing else of this process interleaves).
 * kysely's `db.transaction()` issues a deferred BEGIN: in WAL mode a read
 * transaction that must become a write transaction after another connection
 * committed fails at once with SQLITE_BUSY, whatever the busy timeout. Taking
 * the write lock up front waits for it instead (on timers, off the event loop:
 * see BusyRetrySqliteDialect); if BEGIN still finds the lock busy after that
 * wait (a long write of the CLI or the ingest committer), it is tried again a
 * few times: about 3 s in all (8 pauses of 10-320 ms, each try waiting up to
 * the connection's 200 ms). A connection whose SQLite waits by itself for long
 * (the CLI's 5 s busy timeout, `busyWait: 'sqlite'`) has already waited its whole
 * bound when BEGIN fails: it is not tried again (9 tries of 5 s kept `prune`,
 * `dead-letters retry` and `sinks send-now` waiting 46 s, then saying 5 s).
 */
export async function immediateTransaction<T>(db: Kysely<Database>, work: (trx: Transaction<Database>) => Promise<T>, retries = 8): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    let begun = false;
    try {
      return await db.connection().execute(async (conn) => {
        await sql`BEGIN IMMEDIATE`.execute(conn);
        begun = true;
        try {
          // The connection is inside a transaction; helpers take a Transaction only to say so.
          const result = await work(conn as unknown as Transaction<Database>);
          await sql`COMMIT`.execute(conn);
          return result;
        } catch (err) {
          await sql`ROLLBACK`.execute(conn).catch(() => {});
          throw err;
        }
      });
    } catch (err) {
      // Only a busy BEGIN is tried again: nothing ran yet.
      if (begun || !isSqliteBusy(err) || attempt >= retries || (await waitsLongInSqlite(db))) throw err;
      await new Promise((r) => setTimeout(r, 10 * 2 ** Math.min(attempt, 5)));
    }
  }
}

/** A busy timeout this long is a wait's whole bound, not one short try of several. */
const LONG_SQLITE_WAIT_MS = 1000;

/**
 * Whether SQLite itself waits for the lock for long on this connection (the CLI's busy_timeout of
 * 5000; the server's is 0: it waits on timers, 200 ms a try). Asked only after a busy BEGIN; a
 * SELECT, so the server's connection does not first let ingest go (busyRetryDialect.ts).
 */
async function waitsLongInSqlite(db: Kysely<Database>): Promise<boolean> {
  const { rows } = await sql<{ timeout: number }>`SELECT timeout FROM pragma_busy_timeout()`.execute(db);
  return (rows[0]?.timeout ?? 0) >= LONG_SQLITE_WAIT_MS;
}
