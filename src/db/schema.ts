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

export type ResultState = 'processing' | 'ready' | 'unavailable' | 'given_up';

export interface ApplicationsTable {
  id: string;
  source: string;
  external_id: string | null;
  status: string | null;
  status_changed_at: string | null;
  job_id: string | null;
  job_title: string | null;
  candidate_first_name: string | null;
  candidate_last_name: string | null;
  candidate_email: string | null;
  candidate_phone: string | null;
  needs_review: number;
  review_reasons: string | null;
  created_at: string | null;
  first_seen_at: string;
  updated_at: string;
  deleted_at: string | null;
}

export interface StatusHistoryTable {
  event_id: string;
  application_id: string;
  from_status: string | null;
  to_status: string | null;
  changed_at: string | null;
  recorded_at: string;
}

interface ResultColumns {
  application_id: string;
  source: string;
  state: ResultState;
  reason: string | null;
  overall_score: number | null;
  data: string | null;
  fetched_at: string | null;
  first_requested_at: string;
  last_polled_at: string | null;
  polls: number;
  updated_at: string;
}
export interface InterviewResultsTable extends ResultColumns {
  outcome: string | null;
  is_eligible: number | null;
  ineligibility_reasons: string | null;
}
export type CvEvaluationResultsTable = ResultColumns;
export interface InsightsResultsTable extends ResultColumns {
  hiring_recommendation: string | null;
  is_eligible: number | null;
  ineligibility_reasons: string | null;
}
export interface LegacyInterviewResultsTable extends ResultColumns {
  outcome: string | null;
}

/** Which events belong to an application (migration 005): written by processing when it folds an event. */
export interface ApplicationEventsTable {
  application_id: string;
  event_id: string;
}

export interface EventProcessingTable {
  event_id: string;
  state: 'awaiting_result' | 'settled';
  resource: string | null;
  settled_at: string | null;
  updated_at: string;
  /** 1, then +1 each time the event settles again with a changed result (a new webhook-id per sink). */
  revision: Generated<number>;
  /** resultDigest of the result as the last revision was settled with; null without a result. */
  result_digest: string | null;
}

export interface SourcePausesTable {
  source: string;
  paused_at: string;
  status: number;
  detail: string;
  probe_after: string;
}

export type DeliveryState = 'pending' | 'retrying' | 'delivered' | 'dead';

export interface DeliveriesTable {
  event_id: string;
  sink: string;
  message_id: string;
  state: DeliveryState;
  attempts: number;
  last_status_code: number | null;
  last_error: string | null;
  last_attempt_at: string | null;
  queued_at: string;
  created_at: string;
  updated_at: string;
  delivered_at: string | null;
}

export interface SinkStateTable {
  sink: string;
  disabled_at: string | null;
  disabled_reason: string | null;
  disabled_status: number | null;
  disabled_target: string | null;
  updated_at: string;
}

/** Where processing stands in the events table (one row). */
export interface ProcessingCursorTable {
  id: number;
  last_event_rowid: number;
  updated_at: string;
}

export interface Database {
  applications: ApplicationsTable;
  application_status_history: StatusHistoryTable;
  interview_results: InterviewResultsTable;
  cv_evaluation_results: CvEvaluationResultsTable;
  insights_results: InsightsResultsTable;
  legacy_interview_results: LegacyInterviewResultsTable;
  event_processing: EventProcessingTable;
  application_events: ApplicationEventsTable;
  source_pauses: SourcePausesTable;
  deliveries: DeliveriesTable;
  sink_state: SinkStateTable;
  events: EventsTable;
  event_conflicts: EventConflictsTable;
  quarantine: QuarantineTable;
  jobs: JobsTable;
  processing_cursor: ProcessingCursorTable;
  schema_migrations: SchemaMigrationsTable;
}
