import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { Kysely, SqliteDialect } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import type { Database } from '../../src/db/schema.js';
import { ANSWERED_DEAD_READS } from '../../src/handlers/fetchResult.js';
import { REPLACE_WAITING_READ } from '../../src/handlers/processEvent.js';
import { dropAnsweredDeadLetters, findReusableJob, preparedJobWrites, reviveDeadJob } from '../../src/queue/JobQueue.js';
import { recordPrepared } from '../helpers/recordPrepared.js';
import { tempDir } from '../helpers/receiver.js';

let close = () => {};
afterEach(() => close());

/** A database at the latest migration, and every statement prepared on its connection. */
function migrated(): { sqlite: BetterSqlite3.Database; db: Kysely<Database>; prepared: string[] } {
  const t = tempDir('jobs-by-event-');
  const sqlite = new BetterSqlite3(join(t.dir, 'r.db'));
  migrate(sqlite);
  const prepared = recordPrepared(sqlite);
  const db = new Kysely<Database>({ dialect: new SqliteDialect({ database: sqlite }) });
  close = () => {
    sqlite.close();
    t.cleanup();
  };
  return { sqlite, db, prepared };
}

const planOf = (sqlite: BetterSqlite3.Database, source: string) => {
  const named = [...new Set([...source.matchAll(/@(\w+)/g)].map((m) => m[1]!))];
  const stmt = sqlite.prepare(`EXPLAIN QUERY PLAN ${source}`);
  const params = named.length > 0 ? [Object.fromEntries(named.map((n) => [n, null]))] : Array<null>((source.match(/\?/g) ?? []).length).fill(null);
  return (stmt.all(...params) as { detail: string }[]).map((r) => r.detail).join(' | ');
};

/** The statements that delete one event's dead or waiting jobs of a kind. */
const byEventWithState = (prepared: string[]) => prepared.filter((s) => /^delete from "?jobs"? where "?event_id"?/i.test(s.trim()));

describe('the job a new delivery cycle of an (event, sink) pair reuses', () => {
  const now = Date.parse('2026-11-21T10:00:00.000Z');
  const addJob = (sqlite: BetterSqlite3.Database, eventId: string, kind: string, state: string) =>
    Number(
      sqlite
        .prepare("INSERT INTO jobs (kind, payload, event_id, source, state, run_at, attempts, max_attempts, created_at, updated_at) VALUES (?, '{}', ?, ?, ?, ?, 0, 5, ?, ?)")
        .run(kind, eventId, kind, state, new Date(now).toISOString(), new Date(now).toISOString(), new Date(now).toISOString()).lastInsertRowid,
    );

  it('is looked up through jobs_event with no sort, on both paths (prepared for the replay CLI, kysely for processing)', async () => {
    const { sqlite, db, prepared } = migrated();
    preparedJobWrites(sqlite).findReusableJob('evt_1', 'sink:crm');
    await findReusableJob(db, 'evt_1', 'sink:crm');
    const lookups = prepared.filter((s) => /^select "?id"?, "?state"? from "?jobs"?/i.test(s.trim()));
    expect(lookups).toHaveLength(2);
    // A temp b-tree per lookup (ORDER BY ... LIMIT 1) cost 14-15 µs against about 4 µs without it.
    for (const source of lookups) expect({ source, plan: planOf(sqlite, source) }).toEqual({ source, plan: 'SEARCH jobs USING INDEX jobs_event (event_id=?)' });
  });

  it("is the pair's pending job, else its newest dead one; a running job, another sink's or another event's is never reused", async () => {
    const { sqlite, db } = migrated();
    const prepared = preparedJobWrites(sqlite);
    const both = async (eventId: string, kind: string) => {
      const viaPrepared = prepared.findReusableJob(eventId, kind);
      expect(await findReusableJob(db, eventId, kind)).toEqual(viaPrepared);
      return viaPrepared;
    };
    expect(await both('evt_1', 'sink:crm')).toBeUndefined();
    addJob(sqlite, 'evt_1', 'sink:crm', 'running');
    addJob(sqlite, 'evt_1', 'sink:other', 'pending');
    addJob(sqlite, 'evt_2', 'sink:crm', 'pending');
    expect(await both('evt_1', 'sink:crm')).toBeUndefined();
    const olderDead = addJob(sqlite, 'evt_1', 'sink:crm', 'dead');
    const newerDead = addJob(sqlite, 'evt_1', 'sink:crm', 'dead');
    addJob(sqlite, 'evt_1', 'sink:crm', 'done');
    expect(await both('evt_1', 'sink:crm')).toEqual({ id: newerDead, state: 'dead' });
    sqlite.prepare('DELETE FROM jobs WHERE id = ?').run(newerDead);
    expect(await both('evt_1', 'sink:crm')).toEqual({ id: olderDead, state: 'dead' });
    // A pending job wins over dead ones, whatever their ids.
    const pending = addJob(sqlite, 'evt_1', 'sink:crm', 'pending');
    addJob(sqlite, 'evt_1', 'sink:crm', 'dead');
    expect(await both('evt_1', 'sink:crm')).toEqual({ id: pending, state: 'pending' });
  });

  it("is the pair's newest pending job when it has two (a running one rescheduled after the pair got its own), as the ORDER BY ... id DESC chose", async () => {
    const { sqlite, db } = migrated();
    const prepared = preparedJobWrites(sqlite);
    // The older one was running when a new cycle gave the pair a job of its own, then failed and
    // went back to pending (JobQueue.reschedule): the pair has two pending jobs.
    addJob(sqlite, 'evt_1', 'sink:crm', 'pending');
    const newer = addJob(sqlite, 'evt_1', 'sink:crm', 'pending');
    addJob(sqlite, 'evt_1', 'sink:crm', 'dead');
    expect(prepared.findReusableJob('evt_1', 'sink:crm')).toEqual({ id: newer, state: 'pending' });
    expect(await findReusableJob(db, 'evt_1', 'sink:crm')).toEqual({ id: newer, state: 'pending' });
  });
});

describe("a sink batch's answered dead letters", () => {
  it('are looked for per event only when the sink has a dead job at all, and that check is one seek on jobs_kind_ready', async () => {
    const { sqlite, db, prepared } = migrated();
    const addJob = (eventId: string, kind: string, state: string) =>
      sqlite
        .prepare("INSERT INTO jobs (kind, payload, event_id, source, state, run_at, attempts, max_attempts, created_at, updated_at) VALUES (?, '{}', ?, ?, ?, '', 1, 1, '', '')")
        .run(kind, eventId, kind, state);
    const jobsOf = () => sqlite.prepare('SELECT event_id, kind, state FROM jobs ORDER BY id').all();
    addJob('evt_1', 'sink:crm', 'done');
    addJob('evt_1', 'sink:other', 'dead');
    await dropAnsweredDeadLetters(db, 'sink:crm', ['evt_1']);
    expect(prepared.filter((s) => /^delete/i.test(s.trim()))).toEqual([]);
    const check = prepared.find((s) => /^select 1 as one from jobs/i.test(s.trim()))!;
    expect(planOf(sqlite, check)).toBe('SEARCH jobs USING COVERING INDEX jobs_kind_ready (state=? AND kind=?)');
    expect(jobsOf()).toHaveLength(2);
    // With a dead letter of the sink: the batch's events' dead jobs of that sink go, no others.
    addJob('evt_1', 'sink:crm', 'dead');
    addJob('evt_2', 'sink:crm', 'dead');
    await dropAnsweredDeadLetters(db, 'sink:crm', ['evt_1']);
    expect(jobsOf()).toEqual([
      { event_id: 'evt_1', kind: 'sink:crm', state: 'done' },
      { event_id: 'evt_1', kind: 'sink:other', state: 'dead' },
      { event_id: 'evt_2', kind: 'sink:crm', state: 'dead' },
    ]);
  });
});

describe("one event's dead or waiting jobs are found through jobs_event, not by walking every job of their state and kind", () => {
  it('the deletes of answered dead letters, superseded dead jobs and replaced waiting reads', async () => {
    const { sqlite, db, prepared } = migrated();
    // The ones each path prepares: a revived dead job (prepared and kysely), a sink batch's answered
    // dead letters, and the handlers' own statements.
    preparedJobWrites(sqlite).reviveDeadJob(1, 'evt_1', 'sink:crm', 25, Date.parse('2026-11-21T10:00:00.000Z'));
    await reviveDeadJob(db, 1, 'evt_1', 'sink:crm', 25, Date.parse('2026-11-21T10:00:00.000Z'));
    // The delete runs only when the kind has a dead job at all (one seek first): here it has.
    sqlite.exec("INSERT INTO jobs (kind, payload, event_id, source, state, run_at, attempts, max_attempts, created_at, updated_at) VALUES ('sink:crm', '{}', 'evt_3', 'sink:crm', 'dead', '', 1, 1, '', '')");
    await dropAnsweredDeadLetters(db, 'sink:crm', ['evt_1', 'evt_2']);
    const statements = [...byEventWithState(prepared), ANSWERED_DEAD_READS, REPLACE_WAITING_READ];
    expect(statements).toHaveLength(5);
    for (const source of statements) {
      const plan = planOf(sqlite, source);
      expect({ source, plan }).toEqual({ source, plan: expect.stringMatching(/^SEARCH jobs USING INDEX jobs_event \(event_id=\?\)$/) });
    }
  });
});
