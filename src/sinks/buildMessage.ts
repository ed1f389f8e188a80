import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../db/schema.js';
import { RESOURCE_OF_EVENT, RESULT_TABLE } from '../processing/resources.js';
import type { MessageResult, SinkMessage } from './types.js';

import { eventSaysIneligible } from '../events/eligibility.js';
import { asObject as obj, type JsonRecord as Obj } from '../util/json.js';

/**
 * ready: the message to send. missing: the event is not stored. incomplete:
 * the result row is being fetched again (a newer event of the application
 * re-polls it), so the message waits for its final state.
 */
export type BuiltMessage =
  | { status: 'ready'; message: SinkMessage }
  | { status: 'missing' }
  | { status: 'incomplete'; resource: string };

/** Whether the event or its result says `is_eligible: false` (spec 6.4: surface it to a recruiter). */
export function needsReview(eventType: string, payload: unknown, resultData: unknown): boolean {
  return eventSaysIneligible(eventType, payload) || obj(resultData)?.is_eligible === false;
}

/**
 * The message of one event, read from the events row and its result table.
 * Built when it is sent (not stored per sink): the result is the newest final
 * state of the application's scoring read at that moment.
 */
export async function buildMessage(db: Kysely<Database> | Transaction<Database>, eventId: string): Promise<BuiltMessage> {
  const event = await db.selectFrom('events').selectAll().where('id', '=', eventId).executeTakeFirst();
  if (!event) return { status: 'missing' };
  const payload = (JSON.parse(event.envelope) as Obj).payload ?? null;
  // The deleted event's payload is the application snapshot itself (spec 6.4).
  const app = event.event_type === 'job_application.deleted' ? obj(payload) : obj(obj(payload)?.application);
  const externalId = typeof app?.external_id === 'string' ? app.external_id : null;

  let result: MessageResult | null = null;
  const resource = RESOURCE_OF_EVENT[event.event_type];
  if (resource && event.application_id) {
    const row = await db
      .selectFrom(RESULT_TABLE[resource])
      .select(['state', 'reason', 'data', 'fetched_at'])
      .where('application_id', '=', event.application_id)
      .executeTakeFirst();
    if (row) {
      if (row.state === 'processing') return { status: 'incomplete', resource };
      result = { resource, state: row.state, reason: row.reason, data: row.data === null ? null : (JSON.parse(row.data) as unknown), fetched_at: row.fetched_at };
    }
  }
  return {
    status: 'ready',
    message: {
      id: event.id,
      event_type: event.event_type,
      created_at: event.created_at,
      received_at: event.received_at,
      source: event.source,
      webhook_id: event.webhook_id,
      application_id: event.application_id,
      external_id: externalId,
      payload,
      result,
      needs_review: needsReview(event.event_type, payload, result?.data ?? null),
    },
  };
}
