import { join } from 'node:path';
import { sql } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import { directStatements } from '../../src/db/directStatements.js';
import { openDatabase, type OpenDatabase } from '../../src/db/openDatabase.js';
import { immediateTransaction } from '../../src/queue/JobQueue.js';
import { tempDir } from '../helpers/receiver.js';

let database: OpenDatabase | undefined;
let cleanup = () => {};
afterEach(async () => {
  await database?.close();
  database = undefined;
  cleanup();
});

function open(): OpenDatabase {
  const t = tempDir();
  cleanup = t.cleanup;
  database = openDatabase(join(t.dir, 'r.db'));
  return database;
}

describe('directStatements: processing statements on kysely connection', () => {
  it('run in the transaction kysely holds: committed with it, rolled back with it', async () => {
    const { db, sqlite } = open();
    const q = directStatements(sqlite);
    await immediateTransaction(db, async (trx) => {
      q.run("INSERT INTO source_pauses (source, paused_at, status, detail, probe_after) VALUES (?, 'a', 401, 'd', 'b')", 'kept');
      // A kysely query of the same transaction sees the row written beside it.
      expect((await sql<{ n: number }>`SELECT COUNT(*) AS n FROM source_pauses`.execute(trx)).rows[0]!.n).toBe(1);
    });
    await expect(
      immediateTransaction(db, async () => {
        q.run("INSERT INTO source_pauses (source, paused_at, status, detail, probe_after) VALUES (?, 'a', 401, 'd', 'b')", 'undone');
        throw new Error('the work failed');
      }),
    ).rejects.toThrow('the work failed');
    expect(sqlite.prepare('SELECT source FROM source_pauses').pluck().all()).toEqual(['kept']);
  });

  it('refuses to run outside a transaction, naming the statement', () => {
    const { sqlite } = open();
    const q = directStatements(sqlite);
    expect(() => q.get('SELECT source FROM source_pauses WHERE source = ?', 'x')).toThrow(/outside a transaction: SELECT source FROM source_pauses/);
    expect(() => q.run("DELETE FROM source_pauses WHERE source = 'x'")).toThrow(/outside a transaction/);
  });

  it('prepares each text once per connection', async () => {
    const { db, sqlite } = open();
    expect(directStatements(sqlite)).toBe(directStatements(sqlite));
    const text = 'SELECT source FROM source_pauses WHERE source = ?';
    let prepared = 0;
    const prepare = sqlite.prepare.bind(sqlite);
    sqlite.prepare = ((sql: string) => {
      if (sql === text) prepared++;
      return prepare(sql);
    }) as typeof sqlite.prepare;
    await immediateTransaction(db, async () => {
      for (let i = 0; i < 3; i++) directStatements(sqlite).all(text, `s${i}`);
    });
    expect(prepared).toBe(1);
  });
});
