import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { Kysely, SqliteDialect } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import { migrate, readMigrations } from '../../src/db/migrate.js';
import type { Database } from '../../src/db/schema.js';
import { createIngestWriter } from '../../src/ingest/eventStore.js';
import { findOpenJob, preparedJobWrites } from '../../src/queue/JobQueue.js';
import { tempDir } from '../helpers/receiver.js';

let close = () => {};
afterEach(() => close());

function scratch(): BetterSqlite3.Database {
  const t = tempDir('ingest-indexes-');
  const sqlite = new BetterSqlite3(join(t.dir, 'r.db'));
  close = () => {
    sqlite.close();
    t.cleanup();
  };
  return sqlite;
}

const plan = (sqlite: BetterSqlite3.Database, query: string, ...params: unknown[]) =>
  (sqlite.prepare(`EXPLAIN QUERY PLAN ${query}`).all(...params) as { detail: string }[]).map((r) => r.detail).join(' | ');

/** What an earlier version's ingest wrote to events (before processing_cursor existed). */
const storeAsBefore = (sqlite: BetterSqlite3.Database, id: string, app: string | null) =>
  sqlite
    .prepare(
      `INSERT INTO events (id, event_type, source, received_at, delivery_id, application_id, envelope)
       VALUES (?, 'interview.completed', 'default', '2026-11-21T10:00:00.000Z', ?, ?, ?)`,
    )
    .run(id, `msg_${id}`, app, JSON.stringify({ id, event_type: 'interview.completed' }));

const event = (id: string, app: string | null) => ({
  type: 'event' as const,
  source: 'default',
  deliveryId: `msg_${id}`,
  receivedAt: '2026-11-21T10:00:00.000Z',
  text: JSON.stringify({ id, event_type: 'interview.completed' }),
  envelope: { id, eventType: 'interview.completed', webhookId: null, createdAt: null, applicationId: app },
});

describe('migrations 005 and 006: the ingest insert appends, except to the events primary key', () => {
  it('moves the application link of existing events into application_events', () => {
    const sqlite = scratch();
    const migrations = readMigrations();
    migrate(sqlite, migrations.filter((m) => m.version <= 4));
    for (const [id, app] of [['evt_1', 'app_a'], ['evt_2', 'app_a'], ['evt_3', 'app_b'], ['evt_4', null]] as const) storeAsBefore(sqlite, id, app);

    expect(migrate(sqlite, migrations)).toContain(5);
    const links = sqlite.prepare('SELECT application_id, event_id FROM application_events ORDER BY event_id').all();
    expect(links).toEqual([
      { application_id: 'app_a', event_id: 'evt_1' },
      { application_id: 'app_a', event_id: 'evt_2' },
      { application_id: 'app_b', event_id: 'evt_3' },
    ]);
  });

  it('leaves events without random-key indexes but the primary key, and lookups by event still indexed', async () => {
    const sqlite = scratch();
    migrate(sqlite);
    const indexed = (table: string) =>
      (sqlite.prepare(`SELECT name FROM pragma_index_list(?)`).all(table) as { name: string }[]).flatMap(({ name }) =>
        (sqlite.prepare('SELECT name FROM pragma_index_info(?)').all(name) as { name: string | null }[]).map((c) => `${name}:${c.name}`),
      );
    // The primary key (the dedupe) and one index that appends: received_at first.
    expect(indexed('events').sort()).toEqual(['events_received_type:event_type', 'events_received_type:received_at', 'sqlite_autoindex_events_1:id']);
    expect(sqlite.prepare("SELECT sql FROM sqlite_master WHERE name = 'jobs_event'").pluck().get()).toMatch(/WHERE kind <> 'process_event'/);

    // Ingested events are found by their application only once processing links them, and queue no job.
    createIngestWriter(sqlite)([event('evt_9', 'app_z')]);
    expect(sqlite.prepare('SELECT COUNT(*) FROM application_events').pluck().get()).toBe(0);
    expect(sqlite.prepare('SELECT COUNT(*) FROM jobs').pluck().get()).toBe(0);

    // A query by type over a time range reads the type from the index, without the table.
    expect(plan(sqlite, "SELECT COUNT(*) FROM events WHERE received_at >= ? AND event_type = 'interview.completed'", '2026-11-20')).toMatch(
      /USING COVERING INDEX events_received_type/,
    );

    // What the queue asks by event: covered by jobs_event for sink kinds, by (state, kind) for process_event.
    const sinkLookup = plan(sqlite, `SELECT id FROM jobs WHERE event_id = ? AND kind = ? AND kind <> 'process_event' AND state IN ('pending', 'running')`, 'e', 'sink:a');
    expect(sinkLookup).toMatch(/USING INDEX jobs_event/);
    const writes = preparedJobWrites(sqlite);
    expect(writes.findOpenJob('evt_9', 'process_event')).toBeUndefined();
    const replayed = writes.enqueue({ kind: 'process_event', payload: { event_id: 'evt_9' }, eventId: 'evt_9' }, Date.parse('2026-11-21T10:00:00Z'));
    expect(writes.findOpenJob('evt_9', 'process_event')).toEqual({ id: replayed });
    expect(writes.openProcessEventIds()).toEqual(new Set(['evt_9']));
    const id = writes.enqueue({ kind: 'sink:archive', payload: {}, eventId: 'evt_9' }, Date.parse('2026-11-21T10:00:00Z'));
    expect(writes.findOpenJob('evt_9', 'sink:archive')).toEqual({ id });

    // The kysely lookup compiles the same literal term, so SQLite can use the partial index.
    const ran: { sql: string; parameters: readonly unknown[] }[] = [];
    const db = new Kysely<Database>({ dialect: new SqliteDialect({ database: sqlite }), log: (e) => void ran.push(e.query) });
    expect(await findOpenJob(db, 'evt_9', 'sink:archive')).toEqual({ id });
    expect(plan(sqlite, ran[0]!.sql, ...ran[0]!.parameters)).toMatch(/USING INDEX jobs_event/);
    expect(await findOpenJob(db, 'evt_9', 'process_event')).toEqual({ id: replayed });
  });
});

describe('migration 006: processing takes new events from a cursor', () => {
  it('starts the cursor after the events stored before it, which have their process_event jobs', () => {
    const sqlite = scratch();
    const migrations = readMigrations();
    migrate(sqlite, migrations.filter((m) => m.version <= 5));
    const enqueue = sqlite.prepare(
      `INSERT INTO jobs (kind, payload, event_id, source, state, run_at, attempts, max_attempts, created_at, updated_at)
       VALUES ('process_event', '{}', ?, 'default', 'pending', 't', 0, 25, 't', 't')`,
    );
    // What the ingest of version 005 wrote: an event and its job.
    for (const id of ['evt_1', 'evt_2']) {
      storeAsBefore(sqlite, id, null);
      enqueue.run(id);
    }
    expect(migrate(sqlite, migrations.filter((m) => m.version <= 6))).toEqual([6]);
    expect(sqlite.prepare('SELECT last_event_rowid FROM processing_cursor').pluck().get()).toBe(
      sqlite.prepare("SELECT rowid FROM events WHERE id = 'evt_2'").pluck().get(),
    );
    createIngestWriter(sqlite)([event('evt_3', null)]);
    expect(sqlite.prepare('SELECT id FROM events WHERE rowid > (SELECT last_event_rowid FROM processing_cursor)').pluck().all()).toEqual(['evt_3']);
  });

  it('starts at 0 on a new database', () => {
    const sqlite = scratch();
    migrate(sqlite);
    expect(sqlite.prepare('SELECT id, last_event_rowid FROM processing_cursor').all()).toEqual([{ id: 1, last_event_rowid: 0 }]);
  });
});
