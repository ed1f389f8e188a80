-- A settled event's message is sent once per sink, under a webhook-id that
-- stays the same across retries and replays, so consumers dedupe on it. When
-- the event's result changes after that (an operator's retry of a
-- dead-lettered fetch turns given_up into ready), the event is fanned out
-- again as a new revision, under a new webhook-id: a consumer that dedupes
-- would otherwise drop the corrected message. Revision 1 keeps the webhook-id
-- of earlier versions of the receiver.
ALTER TABLE event_processing ADD COLUMN revision INTEGER NOT NULL DEFAULT 1;
-- What the last revision said about the result: a digest of its state, reason
-- and data, taken when the event settled. A result read that ends with the
-- same digest sends nothing again, whatever states it went through meanwhile
-- (an interim "processing" answer); one that ends with another sends the next
-- revision, even if another event's read changed the stored result first.
-- Null for events without a result, and for events settled before this
-- migration (their first change is told by the read that makes it).
ALTER TABLE event_processing ADD COLUMN result_digest TEXT;
