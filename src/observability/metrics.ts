import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { HoldReason, SourceHold } from '../queue/SourceHolds.js';

/**
 * Label values the runbook's alerts match, present at 0 from the start: a counter series that
 * appears only at its first increment has no earlier sample, so `rate()` over it stays empty and
 * a single refused delivery or failed commit would never fire the alert.
 */
const REJECTION_REASONS = ['missing_header', 'malformed_header', 'timestamp_out_of_tolerance', 'no_valid_signature', 'body_too_large', 'receiver_busy', 'body_unreadable', 'bad_request'];
const STORAGE_ERROR_REASONS = ['lock_timeout', 'shutdown', 'database_replaced', 'SQLITE_FULL', 'SQLITE_IOERR', 'SQLITE_READONLY', 'error'];

/** The workers' holds of whole sources at a scrape (set by createApp once the workers exist). */
export interface HoldsAtScrape {
  now: number;
  holds: SourceHold[];
  /**
   * The series at 0 while not held: the sources and sinks (`sink:<name>`) of the workers that run
   * in this process, each with the reasons that can hold it; none in a `serve` with
   * WORKER_CONCURRENCY=0, which cannot know.
   */
  series: readonly { source: string; reason: HoldReason }[];
}

/** The series a `work` process updates (its WORK_METRICS_PORT serves these and Node's own). */
export const WORK_METRICS: ReadonlySet<string> = new Set(['receiver_job_runs_total', 'receiver_hiring_api_calls_total', 'receiver_hiring_api_call_duration_seconds', 'receiver_sink_deliveries_total', 'receiver_wal_checkpoint_errors_total', 'receiver_source_hold_remaining_seconds']);

/**
 * One registry per app instance, so tests running several apps in one process do not collide.
 * `sources`: the configured sources' names, whose quarantined-delivery series start at 0.
 */
export function createMetrics(sources: readonly string[] = []) {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const walBlockedSince: { at: number | null } = { at: null };
  const sourceHolds: { read: () => HoldsAtScrape } = { read: () => ({ now: 0, holds: [], series: [] }) };
  const bodiesHeld: { bytes: () => number } = { bytes: () => 0 };
  const metrics = {
    registry,
    deliveriesReceived: new Counter({
      name: 'receiver_deliveries_received_total',
      help: 'Webhook deliveries answered, by outcome (accepted, duplicate, conflict, quarantined, rejected:<reason>, unavailable) and source',
      labelNames: ['outcome', 'source'] as const,
      registers: [registry],
    }),
    ingestDuration: new Histogram({
      name: 'receiver_ingest_duration_seconds',
      help: 'Time from request start to answer on POST /webhooks, for deliveries whose signature verified (refused ones are not timed)',
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
    bodyBytesInFlight: new Gauge({
      name: 'receiver_ingest_body_bytes_in_flight',
      help: 'Bytes of request bodies on POST /webhooks held at the scrape (read so far, or read and not answered yet); at MAX_BODY_BYTES_IN_FLIGHT, more are refused with 503 (rejected:receiver_busy)',
      registers: [registry],
      collect() {
        this.set(bodiesHeld.bytes());
      },
    }),
    /** Where the gauge above reads the bytes held (set by createHttpApp). */
    bodiesHeld,
    batchSize: new Histogram({
      name: 'receiver_group_commit_batch_size',
      help: 'Deliveries committed per ingest transaction',
      buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024],
      registers: [registry],
    }),
    commitDuration: new Histogram({
      name: 'receiver_group_commit_duration_seconds',
      help: 'Time one ingest transaction took, from BEGIN IMMEDIATE to the end of COMMIT (its fsync included); the event loop serves nothing meanwhile',
      buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
      registers: [registry],
    }),
    ingestLockWait: new Histogram({
      name: 'receiver_ingest_lock_wait_seconds',
      help: 'Ingest transactions that found the write lock held by another connection (a `work` process, the CLI): time from the first refusal to the commit',
      buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5],
      registers: [registry],
    }),
    eventConflicts: new Counter({
      name: 'receiver_event_conflicts_total',
      help: 'Deliveries reusing a stored event id with a different body (the first body is kept)',
      registers: [registry],
    }),
    storageErrors: new Counter({
      name: 'receiver_storage_errors_total',
      help: 'Ingest transactions that failed (lock timeout, disk full, I/O), answered 503',
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
    checkpointErrors: new Counter({
      name: 'receiver_wal_checkpoint_errors_total',
      help: 'WAL checkpoints that failed, by SQLite code (SQLITE_FULL: the disk is full); the WAL keeps every commit and grows until one succeeds',
      labelNames: ['code'] as const,
      registers: [registry],
    }),
    quarantined: new Gauge({
      name: 'receiver_quarantined',
      help: 'Rows in the quarantine table (signed deliveries we could not parse)',
      registers: [registry],
    }),
    pausedSources: new Gauge({
      name: 'receiver_source_paused',
      help: '1 while a source\'s reads are paused: its API key refused (401/403), its reads redirected (3xx), or the source no longer configured while reads wait (0)',
      labelNames: ['source'] as const,
      registers: [registry],
    }),
    sourceHoldLeft: new Gauge({
      name: 'receiver_source_hold_remaining_seconds',
      help: "Seconds before the workers claim a held source's jobs again, by source (a sink's: sink:<name>) and reason (retry_after: the remote's Retry-After; outage: the outage breaker after 8 failed reads of the hiring API in a row, never a sink); 0 while not held. Kept in the memory of the process running the workers",
      labelNames: ['source', 'reason'] as const,
      registers: [registry],
      collect() {
        this.reset();
        const { now, holds, series } = sourceHolds.read();
        for (const { source, reason } of series) this.set({ source, reason }, 0);
        // Each worker holds its own sources (the fetcher the API's, a sink's lane its sink): one hold per series.
        for (const h of holds) this.set({ source: h.source, reason: h.reason }, Math.max(0, (h.untilMs - now) / 1000));
      },
    }),
    /** Where the gauge above reads the workers' holds (createApp sets it). */
    sourceHolds,
    jobsSettled: new Counter({
      name: 'receiver_job_runs_total',
      help: 'Job attempts by kind and how they ended (done, rescheduled, retry, dead, paused, lost); process_event also counts the folds of new events',
      labelNames: ['kind', 'outcome'] as const,
      registers: [registry],
    }),
    apiCalls: new Counter({
      name: 'receiver_hiring_api_calls_total',
      help: 'Reads of the hiring API by source (the configured source whose key made it), resource and outcome (ready, processing, unavailable, not_found, unauthorized, rate_limited, server_error, network, ...)',
      labelNames: ['source', 'resource', 'outcome'] as const,
      registers: [registry],
    }),
    apiCallDuration: new Histogram({
      name: 'receiver_hiring_api_call_duration_seconds',
      help: 'Time each read of the hiring API took, by resource, until its answer or its failure (a timeout is 10 s): a slow service shows here before the backlog grows',
      labelNames: ['resource'] as const,
      buckets: [0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 7.5, 10, 30],
      registers: [registry],
    }),
    sinkDeliveries: new Counter({
      name: 'receiver_sink_deliveries_total',
      help: 'Sink delivery attempts by sink and outcome (done, retry, dead, rescheduled = waited without an attempt or held by a 410 that disabled the sink, lost)',
      labelNames: ['sink', 'outcome'] as const,
      registers: [registry],
    }),
    sinkLag: new Gauge({
      name: 'receiver_sink_lag_seconds',
      help: 'Age of the oldest message not yet delivered to the sink (0 when none)',
      labelNames: ['sink'] as const,
      registers: [registry],
    }),
    sinkDisabled: new Gauge({
      name: 'receiver_sink_disabled',
      help: '1 while a sink is disabled (it answered 410 Gone)',
      labelNames: ['sink'] as const,
      registers: [registry],
    }),
    walBlocked: new Gauge({
      name: 'receiver_sqlite_wal_blocked_seconds',
      help: 'How long the WAL has been over its bound (128 MiB) with the checkpoints unable to start it over (0 otherwise): a reader holds an old snapshot (a long read transaction), and the WAL grows with every commit until it ends',
      registers: [registry],
      collect() {
        const since = walBlockedSince.at;
        this.set(since === null ? 0 : Math.max(0, (Date.now() - since) / 1000));
      },
    }),
    /** Since when the WAL cannot be reset (logWalBlocked keeps it), for the gauge above. */
    walBlockedSince,
    walBytes: new Gauge({
      name: 'receiver_sqlite_wal_bytes',
      help: 'Size of the SQLite write-ahead log file (its high-water mark); about 128 MiB at most, so steady growth means a reader holds an old snapshot or checkpoints cannot keep up',
      registers: [registry],
    }),
    filesystemAvail: new Gauge({
      name: 'receiver_database_filesystem_avail_bytes',
      help: 'Bytes this process may still write on the filesystem that holds the database (statfs of its folder, as df shows them): when none are left, ingest commits fail with SQLITE_FULL and deliveries are answered 503',
      registers: [registry],
    }),
    filesystemSize: new Gauge({
      name: 'receiver_database_filesystem_size_bytes',
      help: 'Size of the filesystem that holds the database (statfs of its folder)',
      registers: [registry],
    }),
    unprocessedEvents: new Gauge({
      name: 'receiver_events_unprocessed',
      help: 'Stored events that processing has not taken yet (past the processing cursor)',
      registers: [registry],
    }),
    unprocessedAge: new Gauge({
      name: 'receiver_events_unprocessed_oldest_seconds',
      help: 'Age of the oldest stored event processing has not taken yet (0 when none): processing stalled or behind',
      registers: [registry],
    }),
    oldestDue: new Gauge({
      name: 'receiver_jobs_oldest_due_seconds',
      help: 'By kind: how long the oldest pending job has been due (0 when none is): no worker taking them, or a source paused or sink disabled holding them',
      labelNames: ['kind'] as const,
      registers: [registry],
    }),
    leasesExpired: new Gauge({
      name: 'receiver_jobs_lease_expired',
      help: 'Running jobs whose lease has expired: the process running them died or hangs (a live one takes them back at its next claim, a start does at once)',
      registers: [registry],
    }),
    queueDepth: new Gauge({
      name: 'receiver_jobs',
      help: 'Jobs in the durable queue by state (pending, running, dead) and kind; finished ones are counted by receiver_job_runs_total',
      labelNames: ['state', 'kind'] as const,
      registers: [registry],
    }),
  };
  // Refused deliveries carry no source (they were not verified as one): 'unknown'.
  for (const reason of REJECTION_REASONS) metrics.deliveriesReceived.inc({ outcome: `rejected:${reason}`, source: 'unknown' }, 0);
  for (const reason of STORAGE_ERROR_REASONS) metrics.storageErrors.inc({ reason }, 0);
  // A checkpointer thread that ended (checkpointer.ts): `error` with no SQLite code of its own,
  // SQLITE_CANTOPEN when the next could not open the file (no file descriptor left, the file
  // deleted); at 0, so the runbook's alert fires on the first (a series born at 1 shows no rate).
  for (const code of ['SQLITE_FULL', 'SQLITE_IOERR', 'SQLITE_CANTOPEN', 'error']) metrics.checkpointErrors.inc({ code }, 0);
  // The runbook's quarantine alert counts these (receiver_quarantined is a row count: a replay
  // lowers it, which increase() would read as a reset).
  for (const source of sources) metrics.deliveriesReceived.inc({ outcome: 'quarantined', source }, 0);
  return metrics;
}

export type Metrics = ReturnType<typeof createMetrics>;
