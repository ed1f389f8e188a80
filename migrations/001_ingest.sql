-- Ingest: every verified event, the deliveries we could not parse, and the
-- processing queue that the ingest transaction feeds.

-- Public contract: downstream programs read this table (see README).
CREATE TABLE events (
  id             TEXT PRIMARY KEY,        -- envelope id: stable across the service's retries
  event_type     TEXT NOT NULL,           -- envelope event_type, stored even when unknown to us
  webhook_id     TEXT,                    -- envelope webhook_id: the service's endpoint id
  source         TEXT NOT NULL,           -- name of the configured source whose secret verified it
  created_at     TEXT,                    -- envelope created_at, as sent
  received_at    TEXT NOT NULL,           -- ISO 8601 UTC, when we stored it
  delivery_id    TEXT NOT NULL,           -- webhook-id header of the delivery that was stored
  application_id TEXT,                    -- payload application id, when the event names one
  envelope       TEXT NOT NULL            -- the JSON body exactly as received
);
CREATE INDEX events_type_received ON events (event_type, received_at);
CREATE INDEX events_received ON events (received_at);
CREATE INDEX events_application ON events (application_id);

-- Same event id, different body: the first one is kept in events, later ones here.
CREATE TABLE event_conflicts (
  id          INTEGER PRIMARY KEY,
  event_id    TEXT NOT NULL,
  source      TEXT NOT NULL,
  received_at TEXT NOT NULL,
  delivery_id TEXT NOT NULL,
  envelope    TEXT NOT NULL
);
CREATE INDEX event_conflicts_event ON event_conflicts (event_id);

-- Signed by the service but unusable (not JSON, no id): kept whole, never dropped.
CREATE TABLE quarantine (
  id          INTEGER PRIMARY KEY,
  received_at TEXT NOT NULL,
  source      TEXT NOT NULL,
  delivery_id TEXT NOT NULL,
  reason      TEXT NOT NULL,
  headers     TEXT NOT NULL,              -- JSON object of the request headers (no credentials)
  body        BLOB NOT NULL               -- raw bytes as received
);
CREATE INDEX quarantine_received ON quarantine (received_at);

-- Durable work queue. Times are ISO 8601 UTC text, comparable as strings.
CREATE TABLE jobs (
  id               INTEGER PRIMARY KEY,
  kind             TEXT NOT NULL,
  payload          TEXT NOT NULL,         -- JSON
  event_id         TEXT,
  source           TEXT,
  state            TEXT NOT NULL DEFAULT 'pending'
                   CHECK (state IN ('pending', 'running', 'done', 'dead')),
  run_at           TEXT NOT NULL,
  attempts         INTEGER NOT NULL DEFAULT 0,
  max_attempts     INTEGER NOT NULL,
  lease_owner      TEXT,
  lease_token      TEXT,
  lease_expires_at TEXT,
  last_error       TEXT,
  created_at       TEXT NOT NULL,
  updated_at       TEXT NOT NULL,
  finished_at      TEXT
);
CREATE INDEX jobs_ready ON jobs (state, run_at);
CREATE INDEX jobs_event ON jobs (event_id);
