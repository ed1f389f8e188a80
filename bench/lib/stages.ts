/**
 * Where a fan-out delivery's time went, from the receiver's own timestamps (its database, read
 * after the row): stored → settled (the fold, with the result read for the events that need one:
 * `event_processing.settled_at` − `events.received_at`) and settled → delivered (the sink lane:
 * `deliveries.delivered_at` − `settled_at`). Milliseconds, as the receiver writes them.
 */
import type BetterSqlite3 from 'better-sqlite3';
import { summarize } from './stats.js';

export interface StageTimes {
  /** Events of `ids` with both stamps (settled and delivered to `sink`). */
  count: number;
  settleMs: { p50: number; p99: number };
  deliverMs: { p50: number; p99: number };
}

export function stagesOf(db: BetterSqlite3.Database, sink: string, ids: readonly string[]): StageTimes {
  const row = db.prepare(
    `SELECT e.received_at AS received, p.settled_at AS settled, d.delivered_at AS delivered
       FROM events e JOIN event_processing p ON p.event_id = e.id JOIN deliveries d ON d.event_id = e.id AND d.sink = ?
      WHERE e.id = ?`,
  );
  const settle: number[] = [];
  const deliver: number[] = [];
  for (const id of ids) {
    const r = row.get(sink, id) as { received: string; settled: string | null; delivered: string | null } | undefined;
    if (!r || r.settled === null || r.delivered === null) continue;
    settle.push(Date.parse(r.settled) - Date.parse(r.received));
    deliver.push(Date.parse(r.delivered) - Date.parse(r.settled));
  }
  const pick = (s: ReturnType<typeof summarize>) => ({ p50: s.p50, p99: s.p99 });
  return { count: settle.length, settleMs: pick(summarize(settle)), deliverMs: pick(summarize(deliver)) };
}
