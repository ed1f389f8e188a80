-- Fan-out: one delivery per (event, sink), and the persistent state of each sink.
-- Public contract: downstream readers and the CLI query these tables (see README).

-- state:
--   pending    queued, not yet attempted in this cycle (or waiting while its sink is disabled)
--   retrying   the last attempt failed; the job retries with backoff
--   delivered  the sink accepted the message (HTTP 2xx, line fsynced, line written)
--   dead       gave up (attempts exhausted or a permanent error); an operator retries or replays it
-- A replay resets the row to pending with attempts 0; created_at keeps the first enqueue.
CREATE TABLE deliveries (
  event_id          TEXT NOT NULL,         -- events.id
  sink              TEXT NOT NULL,         -- the sink's configured name
  message_id        TEXT NOT NULL,         -- webhook-id sent for this pair: stable across retries and replays
  state             TEXT NOT NULL CHECK (state IN ('pending', 'retrying', 'delivered', 'dead')),
  attempts          INTEGER NOT NULL DEFAULT 0,  -- attempts made in the current cycle
  last_status_code  INTEGER,               -- HTTP status of the last attempt (http sinks); NULL otherwise
  last_error        TEXT,                  -- why the last attempt failed; NULL after a success
  last_attempt_at   TEXT,
  queued_at         TEXT NOT NULL,         -- when the current cycle was enqueued (settle or replay)
  created_at        TEXT NOT NULL,
  updated_at        TEXT NOT NULL,
  delivered_at      TEXT,                  -- when the sink accepted it (current cycle)
  PRIMARY KEY (event_id, sink)
);
CREATE INDEX deliveries_sink_state ON deliveries (sink, state, queued_at);

-- A sink that answered 410 Gone is disabled until an operator re-enables it or
-- its target (URL, path) changes in the configuration. Its jobs stay pending.
CREATE TABLE sink_state (
  sink             TEXT PRIMARY KEY,
  disabled_at      TEXT,                   -- NULL: enabled
  disabled_reason  TEXT,
  disabled_status  INTEGER,                -- HTTP status that disabled it (410)
  disabled_target  TEXT,                   -- the URL/path that was gone; a different one re-enables at start
  updated_at       TEXT NOT NULL
);
