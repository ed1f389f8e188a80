import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { isMigrated, LAST_MIGRATION, migrate, NewerDatabaseError, readMigrations, type Migration } from '../../src/db/migrate.js';
import { tempDir } from '../helpers/receiver.js';

let close = () => {};
afterEach(() => close());

function fresh(): BetterSqlite3.Database {
  const t = tempDir('migrations-');
  const sqlite = new BetterSqlite3(join(t.dir, 'r.db'));
  close = () => {
    sqlite.close();
    t.cleanup();
  };
  return sqlite;
}

/**
 * A migration recorded as applied never runs again, so editing a released one leaves the
 * databases that applied it without the edit (migration 007 did, see repairMigration7). A change
 * to the schema is a new numbered file; this list grows by one line per release of one.
 */
const RELEASED: Record<string, string> = {
  '001_ingest': '2ecdd6592271aaf82689043b346acd1ec5044027292b286e0b746ef0323cb185',
  '002_processing': 'd6f23273fc126883c4183c103adeb1e3c393f64aef46453a3b968d8390a755f9',
  '003_sinks': '50861fb4327805f6ba786c22ad909b0d1d395b978eb3267c0d07cd3a920480be',
  '004_job_claim_indexes': '4c19872db720826221b7c386694c33cf2c407f01ec86c3db420bb9b8762451de',
  '005_ingest_appends_only': 'f29efac4291914a583a55d2c7a978138e6be72f95fc61fbc5c6e43b0c677b94f',
  '006_processing_cursor': 'a189a30c31ec2268c6de74889abe89e3ff7d4ed5d5b7333de71bd46b4b4f71fc',
  '007_message_revision': '928ffb02eaa412e1e9137b5b231a067afef5ea238042ca47ca9467f13f24c013',
  '008_undigested_index': '4521fb2c0d7fafda794f13546d1ce7c49467e60a219105b0ec6bf5d656fd4706',
  '009_result_state_indexes': '8ce78f07ca9778c77b8c47a4dc839042075bc9944c31e92886acba3c1bdb5372',
  '010_quarantine_delivery_index': '38807f35017093c60fdaadb4765cb56351a4e6dfc7751a7f019d555cd671f517',
  '011_review_and_awaiting_indexes': '19efa8926fabc38c72a1c9dd6f9395e7cb0c877f041b79eb02924c968971e2fa',
};

/** Migration 007 as commit 0a7ff40 released it, before result_digest was added to the file. */
const FIRST_007 = 'ALTER TABLE event_processing ADD COLUMN revision INTEGER NOT NULL DEFAULT 1;';

describe('migrations', () => {
  it('released migrations are never edited (a schema change is a new file)', () => {
    const now = Object.fromEntries(readMigrations().map((m) => [`${String(m.version).padStart(3, '0')}_${m.name}`, createHash('sha256').update(m.sql).digest('hex')]));
    for (const [name, hash] of Object.entries(RELEASED)) expect({ name, hash: now[name] }).toEqual({ name, hash });
  });

  it('a database that applied the first form of migration 007 gets its missing column, and then migration 008 (it failed at every start before)', () => {
    const sqlite = fresh();
    const all = readMigrations();
    migrate(sqlite, [...all.filter((m) => m.version < 7), { ...all.find((m) => m.version === 7)!, sql: FIRST_007 }]);
    sqlite.prepare("INSERT INTO events (id, event_type, source, received_at, delivery_id, envelope) VALUES ('evt_1', 'interview.completed', 'default', '2026-01-01T00:00:00.000Z', 'msg_1', '{}')").run();
    sqlite.prepare("INSERT INTO event_processing (event_id, state, updated_at) VALUES ('evt_1', 'settled', '2026-01-01T00:00:00.000Z')").run();
    const columns = () => sqlite.prepare("SELECT name FROM pragma_table_info('event_processing')").pluck().all();
    expect(columns()).not.toContain('result_digest');

    expect(migrate(sqlite)).toEqual([8, 9, 10, 11]);
    expect(columns()).toContain('result_digest');
    expect(sqlite.prepare('SELECT event_id, revision, result_digest FROM event_processing').all()).toEqual([{ event_id: 'evt_1', revision: 1, result_digest: null }]);
    // A database with the whole of 007 is left as it is.
    expect(migrate(sqlite)).toEqual([]);
  });

  it('a migration that fails is named, and leaves nothing of itself behind', () => {
    const sqlite = fresh();
    const all = readMigrations();
    const broken = [...all, { version: all.at(-1)!.version + 1, name: 'broken', sql: 'CREATE TABLE half (x); SELECT nope FROM nowhere;', compatibleFrom: all.at(-1)!.version + 1 }];
    expect(() => migrate(sqlite, broken)).toThrow(new RegExp(`^migration ${String(all.at(-1)!.version + 1).padStart(3, '0')}_broken failed \\(nothing of it was applied\\): no such table: nowhere$`));
    expect(sqlite.prepare("SELECT count(*) FROM sqlite_master WHERE name = 'half'").pluck().get()).toBe(0);
    expect(sqlite.prepare('SELECT max(version) FROM schema_migrations').pluck().get()).toBe(all.at(-1)!.version);
  });

  it('a rollback runs on a database whose newer migrations declare this build compatible, and is refused, naming them, when one does not', () => {
    const sqlite = fresh();
    const all = readMigrations();
    const known = all.at(-1)!.version;
    // What a later version ships: an index older builds never mind, declared so in its file.
    const additive: Migration = { version: known + 1, name: 'an_index', sql: `-- compatible-from: ${known}\nCREATE INDEX later_idx ON events (delivery_id);`, compatibleFrom: known };
    expect(migrate(sqlite, [...all, additive])).toEqual([...all.map((m) => m.version), known + 1]);
    expect(sqlite.prepare('SELECT version, compatible_from FROM schema_migrations WHERE version >= ? ORDER BY version').all(known)).toEqual([
      { version: known, compatible_from: all.at(-1)!.compatibleFrom },
      { version: known + 1, compatible_from: known },
    ]);
    // This build, rolled back to: runs.
    expect(migrate(sqlite)).toEqual([]);
    expect(isMigrated(sqlite)).toBe(true);
    // A later migration that changes what this build relies on: refused, named.
    const breaking: Migration = { version: known + 2, name: 'a_change', sql: 'ALTER TABLE jobs ADD COLUMN later TEXT NOT NULL DEFAULT \'x\';', compatibleFrom: known + 2 };
    migrate(sqlite, [...all, additive, breaking]);
    expect(() => migrate(sqlite)).toThrow(NewerDatabaseError);
    expect(() => migrate(sqlite)).toThrow(`migration ${known + 2} changed what this build relies on`);
    expect(isMigrated(sqlite)).toBe(false);
  });

  it('LAST_MIGRATION is the last file in migrations/ (a new migration raises it: the start refuses an install missing its last ones by it)', () => {
    expect(readMigrations().at(-1)!.version).toBe(LAST_MIGRATION);
  });

  it('reads a compatible-from declaration from a migration file, and refuses one past its own version', () => {
    const t = tempDir('migration-files-');
    try {
      writeFileSync(join(t.dir, '001_first.sql'), 'CREATE TABLE a (x);');
      writeFileSync(join(t.dir, '002_second.sql'), '-- An index only.\n-- compatible-from: 1\nCREATE INDEX a_x ON a (x);');
      expect(readMigrations(t.dir).map((m) => [m.version, m.compatibleFrom])).toEqual([[1, 1], [2, 1]]);
      writeFileSync(join(t.dir, '003_third.sql'), '-- compatible-from: 4\nSELECT 1;');
      expect(() => readMigrations(t.dir)).toThrow('migration 003_third.sql: compatible-from 4 is past its own version');
    } finally {
      t.cleanup();
    }
  });
});
