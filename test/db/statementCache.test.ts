import BetterSqlite3 from 'better-sqlite3';
import { Kysely, SqliteDialect, sql } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import { withStatementCache } from '../../src/db/statementCache.js';
import { recordPrepared } from '../helpers/recordPrepared.js';

interface Db {
  t: { id: number; v: string };
}

let raw: BetterSqlite3.Database;
let db: Kysely<Db>;
afterEach(async () => {
  await db.destroy();
});

function open(max?: number) {
  raw = new BetterSqlite3(':memory:');
  raw.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
  const prepared = recordPrepared(raw);
  db = new Kysely<Db>({ dialect: new SqliteDialect({ database: withStatementCache(raw, max) }) });
  return prepared;
}

describe('withStatementCache (the kysely connection)', () => {
  it('prepares each SQL text once and gives each run its own parameters and rows', async () => {
    const prepared = open();
    for (let i = 1; i <= 20; i++) await db.insertInto('t').values({ id: i, v: `v${i}` }).execute();
    const seen: string[] = [];
    for (let i = 1; i <= 20; i++) seen.push((await db.selectFrom('t').select('v').where('id', '=', i).executeTakeFirstOrThrow()).v);
    expect(seen).toEqual(Array.from({ length: 20 }, (_, i) => `v${i + 1}`));
    expect(prepared.filter((s) => s.startsWith('insert')).length).toBe(1);
    expect(prepared.filter((s) => s.startsWith('select')).length).toBe(1);
  });

  it('keeps transactions working (BEGIN/COMMIT/ROLLBACK reused) and a failed run does not poison the statement', async () => {
    open();
    await db.transaction().execute((trx) => trx.insertInto('t').values({ id: 1, v: 'a' }).execute());
    await expect(db.transaction().execute(async (trx) => {
      await trx.insertInto('t').values({ id: 2, v: 'b' }).execute();
      await trx.insertInto('t').values({ id: 1, v: 'dup' }).execute();
    })).rejects.toThrow(/UNIQUE/);
    await db.transaction().execute((trx) => trx.insertInto('t').values({ id: 3, v: 'c' }).execute());
    const rows = await db.selectFrom('t').select(['id', 'v']).orderBy('id').execute();
    expect(rows).toEqual([{ id: 1, v: 'a' }, { id: 3, v: 'c' }]);
  });

  it('evicts the least recently used statement past its bound', async () => {
    const prepared = open(2);
    const q = (n: number) => sql`SELECT ${sql.raw(String(n))} AS n`.execute(db);
    await q(1);
    await q(2);
    await q(1); // 1 is now the most recent
    await q(3); // evicts 2
    await q(1); // still cached
    await q(2); // prepared again
    expect(prepared).toEqual(['SELECT 1 AS n', 'SELECT 2 AS n', 'SELECT 3 AS n', 'SELECT 2 AS n']);
  });
});
