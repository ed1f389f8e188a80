-- At every start of the workers, backfillResultDigests looks for events
-- settled before migration 007 (no result_digest, with a result). Those it
-- cannot fill (a result still being read with no data yet) stay, and nothing
-- settled since 007 ever matches, yet the search walked all of
-- event_processing each time: 82 ms at a million events, on the event loop,
-- at every start. This partial index holds only the rows still to fill
-- (usually none), so the search reads only those (0.4 ms at a million); the
-- backfill's query states the same condition, as SQLite needs to use a
-- partial index. A settle writes to it only in that rare case.
CREATE INDEX event_processing_undigested ON event_processing (event_id)
  WHERE result_digest IS NULL AND state = 'settled' AND resource IS NOT NULL;
