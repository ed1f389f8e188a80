import type { Generated } from 'kysely';

/** Row types of every table, for kysely. Column meanings are documented in README.md. */
export interface EventsTable {
  id: string;
  event_type: string;
  webhook_id: string | null;
  source: string;
  created_at: string | null;
  received_at: string;
  delivery_id: string;
  application_id: string | null;
  envelope: string;
}

export interface EventConflictsTable {
  id: Generated<number>;
  event_id: string;
  source: string;
  received_at: string;
  delivery_id: string;
  envelope: string;
}

export interface QuarantineTable {
  id: Generated<number>;
  received_at: string;
  source: string;
  delivery_id: string;
  reason: string;
  headers: string;
  body: Buffer;
}

export type JobState = 'pending' | 'running' | 'done' | 'dead';

export interface JobsTable {
  id: Generated<number>;
  kind: string;
  payload: string;
  event_id: string | null;
  source: string | null;
  state: JobState;
  run_at: string;
  attempts: number;
  max_attempts: number;
  lease_owner: string | null;
  lease_token: string | null;
  lease_expires_at: string | null;
  last_error: string | null;
  created_at: string;
  updated_at: string;
  finished_at: string | null;
}

export interface SchemaMigrationsTable {
  version: number;
  name: string;
  applied_at: string;
}

export interface Database {
  events: EventsTable;
  event_conflicts: EventConflictsTable;
  quarantine: QuarantineTable;
  jobs: JobsTable;
  schema_migrations: SchemaMigrationsTable;
}
