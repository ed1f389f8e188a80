import { sql, type Expression, type ExpressionBuilder, type Kysely, type SqlBool } from 'kysely';
import type { Database } from '../../../db/schema.js';
import type { OpenDatabase } from '../../../db/openDatabase.js';
import type { ReplayPosition } from '../../parseArgs.js';
import type { SinkConfig } from '../../sinkOps.js';

/** Which events a replay takes (combined with AND): `replay`'s selection options. */
export interface EventSelection {
  id?: string[];
  type?: string[];
  since?: string;
  until?: string;
  application?: string;
  source?: string;
  /** `--after`: only the events after this one in the replay's (received_at, id) order. */
  after?: ReplayPosition;
}

export interface SelectedEvent {
  /** events.rowid: the order events were stored in, which the processing cursor follows. */
  seq: number;
  id: string;
  /** The id as stored (see PageStart). */
  idBytes: Buffer;
  event_type: string;
  source: string;
  received_at: string;
  settled: boolean;
}

/**
 * Events queued per transaction: short write locks next to a running server. 500 events to a
 * sink with prepared statements held it about 20 ms on a 5,000-event database, 50-120 ms on a
 * 300,000-event one on a loaded 2-core host (random index pages read from the OS cache).
 */
export const BATCH = 500;

/** SQL for "the event's type matches one of these patterns" (exact names, `prefix.*`, `*`), as matchesEventType decides. */
function typeMatches(eb: ExpressionBuilder<any, any>, patterns: readonly string[]): Expression<SqlBool> {
  if (patterns.includes('*')) return sql<SqlBool>`1`;
  return eb.or(
    patterns.map((t) =>
      // `prefix.*`: compared as a prefix (not LIKE, where "_" is a wildcard: interview_v2.* must not match interviewXv2).
      t.endsWith('.*') ? eb(sql<string>`substr(events.event_type, 1, ${t.length - 1})`, '=', t.slice(0, -1)) : eb('events.event_type', '=', t),
    ),
  );
}

/**
 * Where a page of the selection starts: after this event, in (received_at, id) order. The id's
 * stored bytes, not the string read: an id stored from a lone UTF-16 surrogate (a JSON "\ud800"
 * escape) is not valid UTF-8, reads back as U+FFFD, and compared as that it skipped the ids between.
 */
interface PageStart {
  received_at: string;
  idBytes: Buffer;
}

/**
 * The selection, from the events stored when the replay began (rowid up to `maxSeq`: events stored
 * meanwhile are past the processing cursor, and a long replay must not chase new arrivals). Type
 * patterns: exact names or `prefix.*`. `missingFor`: only events that at least one of these sinks
 * would take now (its filters, the event settled) and has no `deliveries` row of (never queued for
 * it); in SQL, so `--limit` counts only those.
 */
export function selection(db: Kysely<Database>, o: EventSelection, missingFor: readonly SinkConfig[], maxSeq: number, sameTime = false) {
  // sameTime: the events listed in SAME_TIME, walked in its order (CROSS JOIN: SQLite keeps that
  // table the outer loop; joined plainly, it walked every event of that received_at instead).
  const from = sameTime ? (db.selectFrom(sql`temp.${sql.raw(SAME_TIME)}`.as('g')).crossJoin('events') as unknown as ReturnType<typeof db.selectFrom<'events'>>) : db.selectFrom('events');
  let q = from.leftJoin('event_processing', 'event_processing.event_id', 'events.id').where(sql<SqlBool>`events.rowid <= ${maxSeq}`);
  if (sameTime) q = q.where(sql<SqlBool>`events.rowid = g.event_rowid`);
  if (o.id?.length) q = q.where('events.id', 'in', o.id);
  // `*` means every type, as in the sinks' `events` filters.
  if (o.type?.length && !o.type.includes('*')) {
    const types = o.type;
    q = q.where((eb) => typeMatches(eb, types));
  }
  if (o.since) q = q.where('events.received_at', '>=', o.since);
  if (o.until) q = q.where('events.received_at', '<', o.until);
  if (o.source) q = q.where('events.source', '=', o.source);
  if (o.after) {
    // The received_at bound alone as well: the one an index (events_received_type) can range over.
    const { received_at, id } = o.after;
    q = q.where('events.received_at', '>=', received_at).where(sql<SqlBool>`(events.received_at, events.id) > (${received_at}, ${id})`);
  }
  if (missingFor.length > 0) {
    q = q.where('event_processing.state', '=', 'settled').where((eb) =>
      eb.or(
        missingFor.map((sink) =>
          eb.and([
            ...(sink.events ? [typeMatches(eb, sink.events)] : []),
            ...(sink.sources ? [eb('events.source', 'in', [...sink.sources])] : []),
            eb.not(eb.exists(eb.selectFrom('deliveries').select(sql`1`.as('one')).whereRef('deliveries.event_id', '=', 'events.id').where('deliveries.sink', '=', sink.name))),
          ]),
        ),
      ),
    );
  }
  if (o.application) {
    const app = o.application;
    // An application id, or your own correlation id (external_id), through application_events
    // (events.application_id has no index: migration 005). Events stored but not folded yet are
    // not linked; they are past the processing cursor and will be folded anyway.
    q = q.where('events.id', 'in', (eb) =>
      eb
        .selectFrom('application_events')
        .select('application_events.event_id')
        .where((e) =>
          e.or([
            e('application_events.application_id', '=', app),
            e('application_events.application_id', 'in', e.selectFrom('applications').select('applications.id').where('applications.external_id', '=', app)),
          ]),
        ),
    );
  }
  return q;
}

const pageColumns = [
  'events.id',
  'events.event_type',
  'events.source',
  'events.received_at',
  'event_processing.state',
  sql<number>`events.rowid`.as('seq'),
  sql<Buffer>`CAST(events.id AS BLOB)`.as('id_bytes'),
] as const;

const toSelected = (r: { seq: number; id: string; id_bytes: Buffer; event_type: string; source: string; received_at: string; state: string | null }): SelectedEvent => ({
  seq: r.seq,
  id: r.id,
  idBytes: r.id_bytes,
  event_type: r.event_type,
  source: r.source,
  received_at: r.received_at,
  settled: r.state === 'settled',
});

/**
 * One page of the selection, oldest first: at most `limit` events after `after`. Read page by
 * page, a replay holds one page in memory, not every selected event (a million of them took
 * 640 MB and 31 s before the first line of a dry run).
 */
async function selectEventsPage(
  db: Kysely<Database>,
  o: EventSelection,
  missingFor: readonly SinkConfig[],
  maxSeq: number,
  after: PageStart | null,
  limit: number,
): Promise<SelectedEvent[]> {
  let q = selection(db, o, missingFor, maxSeq).select(pageColumns);
  // A bound on received_at from the first page on (every text is >= ''): without one, SQLite walked
  // the rowids below the selection's bound and sorted them all, 4.3 s for `--limit 10` at a million.
  q = q.where(after ? sql<SqlBool>`(events.received_at, events.id) > (${after.received_at}, CAST(${after.idBytes} AS TEXT))` : sql<SqlBool>`events.received_at >= ''`);
  return (await q.orderBy('events.received_at').orderBy('events.id').limit(limit).execute()).map(toSelected);
}

/** The temp table of the events of one received_at still to page through, numbered in id order. */
const SAME_TIME = 'replay_same_time';

/**
 * The selection page by page, in (received_at, id) order. No index has that order (events_received_type
 * is (received_at, event_type)), so a page sorts the events of its received_at: each page of a
 * received_at shared by many events (a backfill, an import, a burst in one millisecond) read and
 * sorted all the rest of them again: quadratic, 14 s for a dry run of 50,000 events with one
 * received_at and 43 s for 100,000 (0.5 s and 0.9 s when their times differ). So when a whole page
 * has one received_at, the rest of that time's events (their rowids) are numbered in id order once,
 * in a temp table, and the next pages walk it; the selection's filters are applied at each page, as
 * before. The order is unchanged; the temp table lives in the connection's temp file, not the
 * database (a dry run's read-only connection has one too).
 */
export function eventPages(database: OpenDatabase, o: EventSelection, missingFor: readonly SinkConfig[], maxSeq: number) {
  const { db, sqlite } = database;
  let after: PageStart | null = null;
  /** Walking SAME_TIME: the last number read, and the last event of that received_at. */
  let sameTime: { read: number; end: PageStart } | null = null;
  const listSameTime = (from: PageStart): void => {
    sqlite.exec(`CREATE TEMP TABLE IF NOT EXISTS ${SAME_TIME} (n INTEGER PRIMARY KEY, event_rowid INTEGER NOT NULL)`);
    sqlite.exec(`DELETE FROM temp.${SAME_TIME}`);
    sqlite
      .prepare(
        `INSERT INTO temp.${SAME_TIME} (n, event_rowid)
         SELECT row_number() OVER (ORDER BY id), rowid FROM events WHERE received_at = ? AND rowid <= ? AND id > CAST(? AS TEXT)`,
      )
      .run(from.received_at, maxSeq, from.idBytes);
    const last = sqlite
      .prepare<[], Buffer>(`SELECT CAST(events.id AS BLOB) FROM temp.${SAME_TIME} g CROSS JOIN events WHERE events.rowid = g.event_rowid ORDER BY g.n DESC LIMIT 1`)
      .pluck()
      .get();
    sameTime = last === undefined ? null : { read: 0, end: { received_at: from.received_at, idBytes: last } };
  };
  return {
    /** The next `limit` events (fewer only at the selection's end). */
    async next(limit: number): Promise<SelectedEvent[]> {
      const page: SelectedEvent[] = [];
      if (sameTime) {
        const walked = selection(db, o, missingFor, maxSeq, true)
          .select([...pageColumns, sql<number>`g.n`.as('n')])
          .where(sql<SqlBool>`g.n > ${sameTime.read}`)
          .orderBy(sql`g.n`)
          .limit(limit);
        const rows = await walked.execute();
        page.push(...rows.map(toSelected));
        if (rows.length === limit) {
          sameTime.read = rows.at(-1)!.n;
          after = page.at(-1)!;
          return page;
        }
        after = sameTime.end;
        sameTime = null;
      }
      const rest = await selectEventsPage(db, o, missingFor, maxSeq, after, limit - page.length);
      page.push(...rest);
      if (rest.length > 0) after = rest.at(-1)!;
      if (rest.length === BATCH && rest[0]!.received_at === after!.received_at) listSameTime(after!);
      return page;
    },
  };
}
