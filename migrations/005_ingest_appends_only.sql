-- The ingest transaction runs before every 2xx, on the event loop, with an fsync.
-- Each index it updates at a random key costs a page read, a page rewrite in
-- the WAL and its share of the fsync. Measured with 2 KB events in batches of
-- 30 on a 100,000-event database (bench/README.md, "Third round"): 110 µs of
-- writer time per event with three random-key indexes (events' primary key,
-- events_application, jobs_event), 77 µs with only the primary key, which the
-- dedupe needs. After this migration the ingest insert touches that primary
-- key and indexes it appends to (received_at, state/run_at, rowids).

-- Which events belong to an application: filled by processing when it folds
-- an event (and here for every event stored so far), read by the fold.
-- Public contract (see README): join it to events to list an application's events.
CREATE TABLE application_events (
  application_id TEXT NOT NULL,
  event_id       TEXT NOT NULL,             -- events.id
  PRIMARY KEY (application_id, event_id)
) WITHOUT ROWID;
INSERT OR IGNORE INTO application_events (application_id, event_id)
  SELECT application_id, id FROM events WHERE application_id IS NOT NULL;
DROP INDEX IF EXISTS events_application;

-- Jobs by event for every kind but the process_event job each delivery
-- queues. Lookups by event for other kinds must repeat the index's condition
-- literally (`kind <> 'process_event'`) for SQLite to use it; the few open
-- process_event jobs are found through jobs_kind_ready (state, kind).
DROP INDEX IF EXISTS jobs_event;
CREATE INDEX jobs_event ON jobs (event_id) WHERE kind <> 'process_event';
