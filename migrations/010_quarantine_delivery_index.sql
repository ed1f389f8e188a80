-- compatible-from: 8
-- A quarantined delivery is stored once: the ingest writer looks for the same
-- source, webhook-id and bytes before it adds a row (a captured signed
-- delivery replayed within its 5 minutes, or the service retrying one it timed
-- out on, added a full copy each time). Without this index that look read the
-- whole quarantine table inside the ingest transaction, under the write lock,
-- for every quarantined delivery. An older build runs on as before (an index
-- only).
CREATE INDEX quarantine_delivery ON quarantine (delivery_id);
