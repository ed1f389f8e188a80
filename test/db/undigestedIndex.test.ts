import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { Kysely, SqliteDialect } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import type { Database } from '../../src/db/schema.js';
import { backfillResultDigests, undigestedSettled } from '../../src/processing/backfillDigests.js';
import { tempDir } from '../helpers/receiver.js';

let close = () => {};
afterEach(() => close());

function migrated(): { sqlite: BetterSqlite3.Database; db: Kysely<Database> } {
  const t = tempDir('undigested-');
  const sqlite = new BetterSqlite3(join(t.dir, 'r.db'));
  migrate(sqlite);
  const db = new Kysely<Database>({ dialect: new SqliteDialect({ database: sqlite }) });
  close = () => {
    sqlite.close();
    t.cleanup();
  };
  return { sqlite, db };
}

describe('migration 008: the workers start finds the events still without a digest through a partial index', () => {
  it('the backfill query reads event_processing through event_processing_undigested, not the whole table', () => {
    const { sqlite, db } = migrated();
    const q = undigestedSettled('').compile(db);
    const plan = (sqlite.prepare(`EXPLAIN QUERY PLAN ${q.sql}`).all(...q.parameters) as { detail: string }[]).map((r) => r.detail).join(' | ');
    expect(plan).toMatch(/SEARCH ep USING INDEX event_processing_undigested/);
  });

  it('a settled event with a digest is not in the index; one without is, and the backfill fills it', async () => {
    const { sqlite, db } = migrated();
    const at = '2026-11-01T09:00:00.000Z';
    for (const id of ['evt_old', 'evt_new']) {
      sqlite
        .prepare("INSERT INTO events (id, event_type, source, received_at, delivery_id, application_id, envelope) VALUES (?, 'interview.completed', 'default', ?, ?, 'app-1', '{}')")
        .run(id, at, `msg_${id}`);
    }
    sqlite.prepare("INSERT INTO interview_results (application_id, source, state, data, first_requested_at, polls, updated_at) VALUES ('app-1', 'default', 'ready', '{}', ?, 1, ?)").run(at, at);
    const settle = sqlite.prepare("INSERT INTO event_processing (event_id, state, resource, settled_at, updated_at, result_digest) VALUES (?, 'settled', 'interview', ?, ?, ?)");
    settle.run('evt_old', at, at, null); // settled before migration 007
    settle.run('evt_new', at, at, 'digest');
    const indexed = () => sqlite.prepare('SELECT event_id FROM event_processing INDEXED BY event_processing_undigested WHERE result_digest IS NULL AND state = \'settled\' AND resource IS NOT NULL').pluck().all();
    expect(indexed()).toEqual(['evt_old']);
    expect(await backfillResultDigests(db)).toBe(1);
    expect(indexed()).toEqual([]);
  });
});
