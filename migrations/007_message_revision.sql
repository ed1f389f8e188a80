-- A settled event's message is sent once per sink, under a webhook-id that
-- stays the same across retries and replays, so consumers dedupe on it. When
-- the event's result changes after that (an operator's retry of a
-- dead-lettered fetch turns given_up into ready), the event is fanned out
-- again as a new revision, under a new webhook-id: a consumer that dedupes
-- would otherwise drop the corrected message. Revision 1 keeps the webhook-id
-- of earlier versions of the receiver.
ALTER TABLE event_processing ADD COLUMN revision INTEGER NOT NULL DEFAULT 1;
