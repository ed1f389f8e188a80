import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { directStatements } from '../../src/db/directStatements.js';
import { immediateTransaction } from '../../src/queue/JobQueue.js';
import { scratchDatabase } from '../helpers/database.js';

describe('directStatements: processing statements on kysely connection', () => {
  it('run in the transaction kysely holds: committed with it, rolled back with it', async () => {
    const { db, sqlite } = scratchDatabase();
    await immediateTransaction(db, async (trx) => {
      const q = directStatements(sqlite, trx);
      q.run("INSERT INTO source_pauses (source, paused_at, status, detail, probe_after) VALUES (?, 'a', 401, 'd', 'b')", 'kept');
      // A kysely query of the same transaction sees the row written beside it.
      expect((await sql<{ n: number }>`SELECT COUNT(*) AS n FROM source_pauses`.execute(trx)).rows[0]!.n).toBe(1);
    });
    await expect(
      immediateTransaction(db, async (trx) => {
        directStatements(sqlite, trx).run("INSERT INTO source_pauses (source, paused_at, status, detail, probe_after) VALUES (?, 'a', 401, 'd', 'b')", 'undone');
        throw new Error('the work failed');
      }),
    ).rejects.toThrow('the work failed');
    expect(sqlite.prepare('SELECT source FROM source_pauses').pluck().all()).toEqual(['kept']);
  });

  it('refuses to run outside a transaction, naming the statement', async () => {
    const { db, sqlite } = scratchDatabase();
    // Statements taken out of a transaction that has ended.
    const q = await immediateTransaction(db, async (trx) => directStatements(sqlite, trx));
    expect(() => q.get('SELECT source FROM source_pauses WHERE source = ?', 'x')).toThrow(/outside a transaction: SELECT source FROM source_pauses/);
    expect(() => q.run("DELETE FROM source_pauses WHERE source = 'x'")).toThrow(/outside a transaction/);
  });

  it('prepares each text once per connection', async () => {
    const { db, sqlite } = scratchDatabase();

    const text = 'SELECT source FROM source_pauses WHERE source = ?';
    let prepared = 0;
    const prepare = sqlite.prepare.bind(sqlite);
    sqlite.prepare = ((sql: string) => {
      if (sql === text) prepared++;
      return prepare(sql);
    }) as typeof sqlite.prepare;
    await immediateTransaction(db, async (trx) => {
      expect(directStatements(sqlite, trx)).toBe(directStatements(sqlite, trx));
      for (let i = 0; i < 3; i++) directStatements(sqlite, trx).all(text, `s${i}`);
    });
    await db.transaction().execute(async (trx) => {
      directStatements(sqlite, trx).all(text, 'through the dialect');
    });
    expect(prepared).toBe(1);
  });
});
