import type BetterSqlite3 from 'better-sqlite3';
import { asObject, parseForComparison, sameJson } from '../util/json.js';
import type { Envelope } from './parseEnvelope.js';

export type IngestItem =
  | { type: 'event'; source: string; deliveryId: string; receivedAt: string; envelope: Envelope; text: string }
  | { type: 'quarantine'; source: string; deliveryId: string; receivedAt: string; reason: string; headers: string; body: Buffer };

/** accepted: new row; duplicate: same id and body already stored; conflict: same id, different body. */
export type IngestOutcome = 'accepted' | 'duplicate' | 'conflict' | 'quarantined';

/**
 * The ingest write path: plain prepared statements on the ingest connection,
 * all items of a batch in one IMMEDIATE transaction. Kysely is used
 * everywhere else; here the per-statement query compilation would be paid
 * on every delivery, on the hottest path we have.
 *
 * A new event is one row and nothing else: processing finds it past its
 * cursor in the events table (migration 006), so no job is queued here.
 */
export function createIngestWriter(sqlite: BetterSqlite3.Database): (items: IngestItem[]) => IngestOutcome[] {
  // The rowid is given, not left to SQLite: past both the newest event and the processing cursor.
  // SQLite's own choice (the largest rowid + 1) would reuse rowids at or below the cursor if the
  // newest events were deleted, and processing would never take those events.
  const insertEvent = sqlite.prepare(
    `INSERT INTO events (rowid, id, event_type, webhook_id, source, created_at, received_at, delivery_id, application_id, envelope)
     VALUES (max(coalesce((SELECT max(rowid) FROM events), 0), (SELECT last_event_rowid FROM processing_cursor)) + 1, ?, ?, ?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT (id) DO NOTHING`,
  );
  const storedEnvelope = sqlite.prepare('SELECT envelope FROM events WHERE id = ?').pluck();
  const insertConflict = sqlite.prepare(
    'INSERT INTO event_conflicts (event_id, source, received_at, delivery_id, envelope) VALUES (?, ?, ?, ?, ?)',
  );
  const insertQuarantine = sqlite.prepare(
    'INSERT INTO quarantine (received_at, source, delivery_id, reason, headers, body) VALUES (?, ?, ?, ?, ?, ?)',
  );
  // The same signed delivery again (its webhook-id, its bytes): a replay of a captured one within
  // the timestamp's 5 minutes, or the service retrying one it timed out on. Stored once: before,
  // every replay of a 1 MiB body added 1 MiB to the database. The look is one seek on
  // quarantine_delivery (migration 010), under the write lock, and reads no body but of the same id.
  const quarantinedAlready = sqlite.prepare('SELECT 1 FROM quarantine WHERE delivery_id = ? AND source = ? AND body = ?').pluck();
  // The same for a conflict: each repeat of one conflicting delivery added its whole body again
  // (6 repeats of a 32 KiB body, 6 rows). One seek on event_conflicts_event: the event's few rows.
  const conflictKeptAlready = sqlite.prepare('SELECT 1 FROM event_conflicts WHERE event_id = ? AND delivery_id = ? AND source = ? AND envelope = ?').pluck();

  const writeOne = (item: IngestItem): IngestOutcome => {
    if (item.type === 'quarantine') {
      if (quarantinedAlready.get(item.deliveryId, item.source, item.body) === undefined) {
        insertQuarantine.run(item.receivedAt, item.source, item.deliveryId, item.reason, item.headers, item.body);
      }
      return 'quarantined';
    }
    const e = item.envelope;
    const { changes } = insertEvent.run(
      e.id, e.eventType, e.webhookId, item.source, e.createdAt, item.receivedAt, item.deliveryId, e.applicationId, item.text,
    );
    if (changes === 1) return 'accepted';
    if (repeatOutcome(storedEnvelope.get(e.id) as string, item.text) === 'duplicate') return 'duplicate';
    if (conflictKeptAlready.get(e.id, item.deliveryId, item.source, item.text) === undefined) {
      insertConflict.run(e.id, item.source, item.receivedAt, item.deliveryId, item.text);
    }
    return 'conflict';
  };

  const batch = sqlite.transaction((items: IngestItem[]) => items.map(writeOne));
  return (items) => batch.immediate(items);
}

/**
 * A delivery whose event id is stored already: the same envelope serialized otherwise (key order,
 * spacing, escapes) is the same event, a duplicate; other content is a conflict. `webhook_id` is
 * not content: it names the endpoint the copy was sent to (spec 6.1), and the service sends an
 * event to each of the organization's endpoints that takes it (spec 6), so two endpoints that
 * reach this receiver give one event two envelopes differing only there. A comparison that
 * fails in any way keeps the body as a conflict: in the ingest batch's transaction, an error would
 * fail every delivery of the batch with 503. (`quarantine replay --dry-run` decides with it too.)
 */
export function repeatOutcome(stored: string, text: string): 'duplicate' | 'conflict' {
  if (stored === text) return 'duplicate';
  try {
    return sameJson(withoutEndpoint(parseForComparison(stored)), withoutEndpoint(parseForComparison(text))) ? 'duplicate' : 'conflict';
  } catch {
    return 'conflict';
  }
}

/** The envelope as parseForComparison reads it (each key marked `s`), without its `webhook_id`. */
function withoutEndpoint(envelope: unknown): unknown {
  const fields = asObject(envelope);
  if (fields === null) return envelope;
  const { swebhook_id: _endpoint, ...rest } = fields;
  return rest;
}
