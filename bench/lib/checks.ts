/**
 * The bench's data checks, apart from the orchestration in run.ts so they are tested
 * (test/bench/checks.test.ts): rows = 2xx, by count and (at fixed rates) by id, and the age of a
 * pre-signed pool against the receiver's signature tolerance.
 */
import type BetterSqlite3 from 'better-sqlite3';

export interface RowCounts {
  /** rows in `events` after the row */
  rows: number;
  /** 2xx answers the generator saw (warm-up and measured period) */
  acked: number;
  /** of them, those whose body said `accepted` */
  accepted: number;
  /** requests in flight at the generator's stop, or timed out at the client: written, maybe committed, never answered */
  unanswered: number;
  /** requests past the end of the generator's pre-signed pool (resent deliveries: the count no longer means anything) */
  exhausted?: number;
  /** with ids (the open loop's ack file): how many acknowledged ids were listed, and how many of them are not in `events` */
  byId?: { listed: number; missing: number };
}

/**
 * Every event id is sent once, so rows = 2xx, except requests still in flight when the generator
 * stopped: 2xx ≤ rows ≤ 2xx + unanswered, every 2xx an `accepted`, and with ids, every acknowledged
 * id stored (counts alone let one lost acknowledged event and one committed unanswered request
 * cancel out).
 */
export function rowsCheck(c: RowCounts): 'ok' | 'FAILED' {
  const counts = (c.exhausted ?? 0) === 0 && c.accepted === c.acked && c.rows >= c.acked && c.rows <= c.acked + c.unanswered;
  const ids = c.byId === undefined || (c.byId.listed === c.acked && c.byId.missing === 0);
  return counts && ids ? 'ok' : 'FAILED';
}

/** How many of `ids` have no row in `events` of the (read-only) database `db`. */
export function missingEventIds(db: BetterSqlite3.Database, ids: readonly string[]): number {
  const stored = db.prepare('SELECT 1 FROM events WHERE id = ?').pluck();
  return ids.filter((id) => stored.get(id) === undefined).length;
}

/** The event ids of an open loop's ack file (`<event id> <ack ms> <type>[ warmup]` a line). */
export function ackedIdsOf(ackFileText: string): string[] {
  return ackFileText.split('\n').filter(Boolean).map((l) => l.split(' ', 1)[0]!);
}

/**
 * Whether a period of `durationS` would send deliveries signed `ageS` ago past the receiver's
 * tolerance (with a second's margin for the last answers).
 */
export function pastTolerance(ageS: number, durationS: number, toleranceS: number): boolean {
  return ageS + durationS + 1 > toleranceS;
}
