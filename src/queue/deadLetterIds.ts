import type { ExpressionBuilder, Kysely, Transaction } from 'kysely';
import type { Database } from '../db/schema.js';
import { jobsByEventTerm } from './eventJobs.js';
import { JobKind } from './jobKinds.js';

export interface DeadLetterFilter {
  ids?: number[];
  kind?: string;
  /** A source of events (see sourceTerm), or a sink's job source `sink:<name>`. */
  source?: string;
  eventId?: string;
  all?: boolean;
}

/**
 * The ids of the dead letters a filter selects: the one selection of `dead-letters retry`,
 * `discard`, their dry runs and the CLI's check of the ids it was given. By event, one arm per
 * index that covers it (see OPEN_JOB), not a walk of every dead job.
 */
export function deadLetterIds(db: Kysely<Database> | Transaction<Database>, filter: DeadLetterFilter) {
  let q = db.selectFrom('jobs').select('jobs.id').where('jobs.state', '=', 'dead');
  if (filter.ids?.length) q = q.where('jobs.id', 'in', filter.ids);
  if (filter.kind) q = q.where('jobs.kind', '=', filter.kind);
  if (filter.source) q = q.where(sourceTerm(filter.source));
  if (!filter.eventId) return q;
  const byEvent = q.where('jobs.event_id', '=', filter.eventId);
  return byEvent.where(jobsByEventTerm).unionAll(byEvent.where('jobs.kind', '=', JobKind.processEvent));
}

/**
 * `--source S` of the dead-letter commands, as `replay --source` means it: the jobs of events
 * that source sent. A sink job's own `source` is `sink:<name>` (its worker's pause domain), so
 * it is matched through its event; `sink:<name>` itself still matches that sink's jobs.
 */
export function sourceTerm(source: string) {
  return (eb: ExpressionBuilder<Database, 'jobs'>) =>
    eb.or([
      eb('jobs.source', '=', source),
      // Correlated on the events primary key: `event_id IN (events of the source)` scanned every
      // event (events.source has no index): 2.7 s at a million, under retry's write lock.
      eb.and([eb('jobs.kind', 'like', 'sink:%'), eb.exists(eb.selectFrom('events').select('events.id').whereRef('events.id', '=', 'jobs.event_id').where('events.source', '=', source))]),
    ]);
}
