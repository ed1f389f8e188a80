-- Processing: the picture of each application, built from its events and the
-- results fetched from the scoring GETs. Public contract: see README.

CREATE TABLE applications (
  id                   TEXT PRIMARY KEY,   -- the service's application id
  source               TEXT NOT NULL,
  external_id          TEXT,               -- caller's correlation id (spec 6.4)
  status               TEXT,               -- pipeline status from the newest event by created_at
  status_changed_at    TEXT,               -- created_at of that event
  job_id               TEXT,
  job_title            TEXT,
  candidate_first_name TEXT,
  candidate_last_name  TEXT,
  candidate_email      TEXT,
  candidate_phone      TEXT,
  needs_review         INTEGER NOT NULL DEFAULT 0,  -- 1 when an event or result says is_eligible: false
  review_reasons       TEXT,               -- JSON array of ineligibility reasons
  created_at           TEXT,               -- application.created_at as given by the service
  first_seen_at        TEXT NOT NULL,
  updated_at           TEXT NOT NULL,
  deleted_at           TEXT                -- created_at of the job_application.deleted event
);
CREATE INDEX applications_external ON applications (external_id);
CREATE INDEX applications_status ON applications (status);

-- One row per application.status_changed event.
CREATE TABLE application_status_history (
  event_id        TEXT PRIMARY KEY,
  application_id  TEXT NOT NULL,
  from_status     TEXT,
  to_status       TEXT,
  changed_at      TEXT,                    -- the event's created_at
  recorded_at     TEXT NOT NULL
);
CREATE INDEX status_history_application ON application_status_history (application_id, changed_at);

-- Results of the scoring reads, one table per kind, one row per application.
-- state: processing (still polling) | ready | unavailable (terminal, see reason) | given_up (polling bound passed)
CREATE TABLE interview_results (
  application_id        TEXT PRIMARY KEY,
  source                TEXT NOT NULL,
  state                 TEXT NOT NULL CHECK (state IN ('processing', 'ready', 'unavailable', 'given_up')),
  reason                TEXT,
  outcome               TEXT,              -- the interview's own status: completed, unreachable, failed, opted_out
  overall_score         REAL,
  is_eligible           INTEGER,
  ineligibility_reasons TEXT,              -- JSON array
  data                  TEXT,              -- the full JSON as received
  fetched_at            TEXT,
  first_requested_at    TEXT NOT NULL,
  last_polled_at        TEXT,
  polls                 INTEGER NOT NULL DEFAULT 0,
  updated_at            TEXT NOT NULL
);
CREATE TABLE cv_evaluation_results (
  application_id        TEXT PRIMARY KEY,
  source                TEXT NOT NULL,
  state                 TEXT NOT NULL CHECK (state IN ('processing', 'ready', 'unavailable', 'given_up')),
  reason                TEXT,
  overall_score         REAL,
  data                  TEXT,
  fetched_at            TEXT,
  first_requested_at    TEXT NOT NULL,
  last_polled_at        TEXT,
  polls                 INTEGER NOT NULL DEFAULT 0,
  updated_at            TEXT NOT NULL
);
CREATE TABLE insights_results (
  application_id        TEXT PRIMARY KEY,
  source                TEXT NOT NULL,
  state                 TEXT NOT NULL CHECK (state IN ('processing', 'ready', 'unavailable', 'given_up')),
  reason                TEXT,
  overall_score         REAL,
  hiring_recommendation TEXT,
  is_eligible           INTEGER,
  ineligibility_reasons TEXT,
  data                  TEXT,
  fetched_at            TEXT,
  first_requested_at    TEXT NOT NULL,
  last_polled_at        TEXT,
  polls                 INTEGER NOT NULL DEFAULT 0,
  updated_at            TEXT NOT NULL
);
CREATE TABLE legacy_interview_results (
  application_id        TEXT PRIMARY KEY,
  source                TEXT NOT NULL,
  state                 TEXT NOT NULL CHECK (state IN ('processing', 'ready', 'unavailable', 'given_up')),
  reason                TEXT,
  outcome               TEXT,              -- v1 InterviewCallStatus
  overall_score         REAL,              -- output.overall_score (a decimal string in v1), as a number
  data                  TEXT,
  fetched_at            TEXT,
  first_requested_at    TEXT NOT NULL,
  last_polled_at        TEXT,
  polls                 INTEGER NOT NULL DEFAULT 0,
  updated_at            TEXT NOT NULL
);

-- Where each event stands in processing. settled: its message is complete (result final or none needed).
CREATE TABLE event_processing (
  event_id    TEXT PRIMARY KEY,
  state       TEXT NOT NULL CHECK (state IN ('awaiting_result', 'settled')),
  resource    TEXT,                        -- interview | cv_evaluation | insights | legacy_interview | NULL
  settled_at  TEXT,
  updated_at  TEXT NOT NULL
);

-- Sources whose API key was refused (401/403): fetching is paused, nothing is dropped.
CREATE TABLE source_pauses (
  source       TEXT PRIMARY KEY,
  paused_at    TEXT NOT NULL,
  status       INTEGER NOT NULL,           -- 401 or 403
  detail       TEXT NOT NULL,
  probe_after  TEXT NOT NULL               -- one job is let through after this time to test the key
);
