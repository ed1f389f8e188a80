-- The ingest transaction writes the event row and nothing else. Each stored
-- event used to queue a process_event job in the same transaction: a jobs row
-- and three index entries per event, on the path that answers the service.
-- Processing now reads new events in the order they were stored (the events
-- table's rowid, which the ingest insert sets past both the newest event and
-- this cursor; commits are serialized, so a later commit always has larger
-- rowids) from the position recorded here, and moves it in the transaction
-- that folds them. A fold that fails becomes a process_event job and is
-- retried, backed off and dead-lettered like any job; `replay` still queues
-- process_event jobs. Measured with 2 KB events (bench/README.md, "Sixth
-- round"): WAL frames per stored event 3.5 -> 3.0 in batches of 30 and
-- 8.2 -> 5.6 in batches of 2; and a batch of folds is one transaction instead
-- of three (claim, fold, completion).
CREATE TABLE processing_cursor (
  id               INTEGER PRIMARY KEY CHECK (id = 1),
  last_event_rowid INTEGER NOT NULL,   -- events.rowid of the last event processing has taken
  updated_at       TEXT NOT NULL
);
-- Every event stored so far has its process_event job already.
INSERT INTO processing_cursor (id, last_event_rowid, updated_at)
  SELECT 1, COALESCE(MAX(rowid), 0), strftime('%Y-%m-%dT%H:%M:%fZ', 'now') FROM events;

-- (event_type, received_at) took one new entry at each event type's own place
-- in the index, so a batch of mixed types rewrote a page per type. One index
-- on (received_at, event_type) appends, and serves both "since T" and "of type
-- X since T" (the type is read from the index). WAL frames per event, batches
-- of 30: 3.5 -> 3.0; of 2: 8.2 -> 6.7.
DROP INDEX IF EXISTS events_type_received;
DROP INDEX IF EXISTS events_received;
CREATE INDEX events_received_type ON events (received_at, event_type);
