import type BetterSqlite3 from 'better-sqlite3';

/** A row of `jobs` as a test seeds it; what it leaves out takes the defaults below. */
export interface SeededJob {
  kind: string;
  event_id: string;
  state: 'pending' | 'running' | 'done' | 'dead';
  run_at: string;
  /** '{}' unless given */
  payload?: string;
  /** the sink's own source for a `sink:` job, else 'default' */
  source?: string;
  attempts?: number;
  max_attempts?: number;
  last_error?: string | null;
  /** run_at unless given */
  created_at?: string;
  /** created_at unless given */
  updated_at?: string;
  finished_at?: string | null;
  lease_owner?: string | null;
  lease_token?: string | null;
  lease_expires_at?: string | null;
}

/**
 * One prepared `INSERT INTO jobs` for a test's seeding (each call one row; wrap calls in a
 * transaction for many): returns the function that inserts a job and gives its id.
 */
export function jobSeeder(db: BetterSqlite3.Database): (job: SeededJob) => number {
  const insert = db.prepare(
    `INSERT INTO jobs (kind, payload, event_id, source, state, run_at, attempts, max_attempts, last_error, created_at, updated_at, finished_at, lease_owner, lease_token, lease_expires_at)
     VALUES (@kind, @payload, @event_id, @source, @state, @run_at, @attempts, @max_attempts, @last_error, @created_at, @updated_at, @finished_at, @lease_owner, @lease_token, @lease_expires_at)`,
  );
  return (job) => {
    const created_at = job.created_at ?? job.run_at;
    return Number(
      insert.run({
        kind: job.kind,
        payload: job.payload ?? '{}',
        event_id: job.event_id,
        source: job.source ?? (job.kind.startsWith('sink:') ? job.kind : 'default'),
        state: job.state,
        run_at: job.run_at,
        attempts: job.attempts ?? 0,
        max_attempts: job.max_attempts ?? 25,
        last_error: job.last_error ?? null,
        created_at,
        updated_at: job.updated_at ?? created_at,
        finished_at: job.finished_at ?? null,
        lease_owner: job.lease_owner ?? null,
        lease_token: job.lease_token ?? null,
        lease_expires_at: job.lease_expires_at ?? null,
      }).lastInsertRowid,
    );
  };
}
