import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../db/schema.js';
import type { HiringResource } from '../hiring/types.js';
import { RESOURCE_OF_EVENT, RESULT_TABLE } from '../processing/resources.js';
import { inChunks } from '../db/sqliteHelpers.js';
import type { MessageResult, SinkMessage } from './types.js';

import { eventSaysIneligible, legacyKnockoutReasons } from '../events/eligibility.js';
import { asObject as obj, type JsonRecord as Obj } from '../util/json.js';
import { deletionDigest, resultDigest } from '../util/resultDigest.js';

/**
 * ready: the message to send. missing: the event is not stored. incomplete:
 * the result row is being fetched again (a newer event of the application
 * re-polls it), so the message waits for its final state. stale: the result
 * changed since the event's revision was settled (see below).
 */
export type BuiltMessage =
  | { status: 'ready'; message: SinkMessage }
  | { status: 'missing' }
  | { status: 'incomplete'; resource: string }
  /**
   * The stored result is no longer the one the event's revision was settled with (a later event
   * changed it): sent under this revision's webhook-id, another body would go out under an id a
   * consumer already has. `was`: the revision's digest; `digest`: the result's now.
   */
  | { status: 'stale'; was: string; digest: string; event: { event_type: string; source: string } };

/**
 * Whether the event or its result says `is_eligible: false` (spec 6.4: surface it to a recruiter),
 * or a legacy interview's result says the candidate was knocked out (the same verdict in v1).
 */
export function needsReview(eventType: string, payload: unknown, resultData: unknown, resource?: HiringResource): boolean {
  if (eventSaysIneligible(eventType, payload) || obj(resultData)?.is_eligible === false) return true;
  return resource === 'legacy_interview' && legacyKnockoutReasons(resultData).length > 0;
}

/** The envelope fields of spec 6.1; the message carries them in its own fields. */
const ENVELOPE_FIELDS: ReadonlySet<string> = new Set(['id', 'created_at', 'webhook_id', 'event_type', 'payload']);

/**
 * The envelope's other top-level fields (the service adds some: the set of its fields can grow
 * like its event types), so the sinks get them as sent rather than a copy without them.
 */
function envelopeExtra(envelope: Obj): { envelope_extra?: Obj } {
  const extra = Object.entries(envelope).filter(([k]) => !ENVELOPE_FIELDS.has(k));
  return extra.length === 0 ? {} : { envelope_extra: Object.fromEntries(extra) };
}

/**
 * The message of one event, read from the events row and its result table.
 * Built when it is sent (not stored per sink): the result is the newest final
 * state of the application's scoring read at that moment.
 */
export async function buildMessage(db: Kysely<Database> | Transaction<Database>, eventId: string): Promise<BuiltMessage> {
  return (await buildMessages(db, [eventId])).get(eventId) ?? { status: 'missing' };
}

type ResultRow = { application_id: string; state: 'processing' | MessageResult['state']; reason: string | null; data: string | null; fetched_at: string | null };

/**
 * The messages of many events (a sink's batch), with one select of the events
 * and one per result table involved (`WHERE ... IN (...)`), instead of two
 * selects per message. Every id given is in the map.
 */
export async function buildMessages(db: Kysely<Database> | Transaction<Database>, eventIds: readonly string[]): Promise<Map<string, BuiltMessage>> {
  const ids = [...new Set(eventIds)];
  const events = [];
  for (const chunk of inChunks(ids)) {
    events.push(
      ...(await db
        .selectFrom('events')
        .leftJoin('event_processing', 'event_processing.event_id', 'events.id')
        .selectAll('events')
        .select(['event_processing.revision', 'event_processing.result_digest', 'event_processing.resource'])
        .where('events.id', 'in', chunk)
        .execute()),
    );
  }
  // The application ids whose result each resource needs.
  const wanted = new Map<HiringResource, Set<string>>();
  // An event settled with no resource has no result of its own: one whose application's results
  // another source reads (fetchResult's otherSourcesResult) must not carry that organization's.
  const resourceOf = (e: { event_type: string; resource: string | null; revision: number | null }) => (e.revision !== null && e.resource === null ? undefined : RESOURCE_OF_EVENT[e.event_type]);
  for (const e of events) {
    const resource = resourceOf(e);
    if (resource && e.application_id) wanted.set(resource, (wanted.get(resource) ?? new Set()).add(e.application_id));
  }
  const results = new Map<string, ResultRow>(); // `${resource}\0${application_id}`
  for (const [resource, apps] of wanted) {
    for (const chunk of inChunks([...apps])) {
      const rows = await db
        .selectFrom(RESULT_TABLE[resource])
        .select(['application_id', 'state', 'reason', 'data', 'fetched_at'])
        .where('application_id', 'in', chunk)
        .execute();
      for (const row of rows) results.set(`${resource}\0${row.application_id}`, row);
    }
  }
  const envelopes = new Map(events.map((e) => [e.id, obj(JSON.parse(e.envelope)) ?? {}]));
  const payloads = new Map(events.map((e) => [e.id, envelopes.get(e.id)!.payload ?? null]));
  // The deleted event's payload is the application snapshot itself (spec 6.4), which lists no
  // external_id: the correlation id then comes from the application as stored.
  const deletedApps = events.filter((e) => e.event_type === 'job_application.deleted' && e.application_id && !('external_id' in (obj(payloads.get(e.id)) ?? {})));
  const storedExternalIds = new Map<string, string | null>();
  for (const chunk of inChunks([...new Set(deletedApps.map((e) => e.application_id!))])) {
    const rows = await db.selectFrom('applications').select(['id', 'external_id']).where('id', 'in', chunk).execute();
    for (const row of rows) storedExternalIds.set(row.id, row.external_id);
  }
  const out = new Map<string, BuiltMessage>(ids.map((id) => [id, { status: 'missing' }]));
  for (const event of events) {
    const payload = payloads.get(event.id) ?? null;
    const deleted = event.event_type === 'job_application.deleted';
    const app = deleted ? obj(payload) : obj(obj(payload)?.application);
    const fromStored = deleted && event.application_id !== null && !('external_id' in (app ?? {}));
    const externalId =
      typeof app?.external_id === 'string' ? app.external_id : fromStored ? (storedExternalIds.get(event.application_id!) ?? null) : null;
    if (fromStored && event.result_digest !== null && deletionDigest(externalId) !== event.result_digest) {
      // The stored external_id changed since this revision was settled: the next revision carries it.
      out.set(event.id, { status: 'stale', was: event.result_digest, digest: deletionDigest(externalId), event: { event_type: event.event_type, source: event.source } });
      continue;
    }

    let result: MessageResult | null = null;
    const resource = resourceOf(event);
    const row = resource && event.application_id ? results.get(`${resource}\0${event.application_id}`) : undefined;
    if (resource && row) {
      if (row.state === 'processing') {
        out.set(event.id, { status: 'incomplete', resource });
        continue;
      }
      const digest = resultDigest(row);
      if (event.result_digest !== null && digest !== event.result_digest) {
        out.set(event.id, { status: 'stale', was: event.result_digest, digest, event: { event_type: event.event_type, source: event.source } });
        continue;
      }
      result = { resource, state: row.state, reason: row.reason, data: row.data === null ? null : (JSON.parse(row.data) as unknown), fetched_at: row.fetched_at };
    }
    out.set(event.id, {
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
        revision: event.revision ?? 1,
        payload,
        result,
        needs_review: needsReview(event.event_type, payload, result?.data ?? null, result?.resource),
        ...envelopeExtra(envelopes.get(event.id)!),
      },
    });
  }
  return out;
}
