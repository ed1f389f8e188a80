import type { Transaction } from 'kysely';
import type { Database } from '../db/schema.js';
import { enqueue, findOpenJob } from '../queue/JobQueue.js';
import { resetDelivery } from './deliveryRecords.js';
import { matchesSink } from './matchesSink.js';
import { messageIdFor } from './messageId.js';
import type { SinkConfig } from './sinkConfig.js';

/** Job kind of a sink's deliveries: each sink's worker claims only its own. */
export const sinkJobKind = (sink: string) => `sink:${sink}`;

export interface DeliveryPayload {
  event_id: string;
  sink: string;
}

/**
 * Queues one delivery job per configured sink that wants the event, in the
 * caller's transaction, and starts a new cycle on its deliveries row. Only a
 * settled event is fanned out (an unsettled one will be when it settles). A
 * pair that already has a pending or running job gets no second one.
 * Disabled sinks are included: their jobs wait behind the gate and are sent
 * once the sink is enabled again, so nothing settled while it was off is lost.
 * `only` restricts to some sink names (replay). Returns the sinks queued.
 */
export async function enqueueDeliveries(
  trx: Transaction<Database>,
  eventId: string,
  sinks: readonly SinkConfig[],
  now: number,
  opts: { only?: readonly string[] } = {},
): Promise<string[]> {
  if (opts.only) {
    const unknown = opts.only.filter((n) => !sinks.some((s) => s.name === n));
    if (unknown.length > 0) throw new Error(`no sink named ${unknown.map((n) => JSON.stringify(n)).join(', ')} is configured`);
  }
  const event = await trx
    .selectFrom('events')
    .innerJoin('event_processing', 'event_processing.event_id', 'events.id')
    .select(['events.event_type', 'events.source', 'event_processing.state'])
    .where('events.id', '=', eventId)
    .executeTakeFirst();
  if (!event || event.state !== 'settled') return [];

  const queued: string[] = [];
  for (const sink of sinks) {
    if (opts.only && !opts.only.includes(sink.name)) continue;
    if (!matchesSink(sink, event)) continue;
    const kind = sinkJobKind(sink.name);
    const open = await findOpenJob(trx, eventId, kind);
    await resetDelivery(trx, { eventId, sink: sink.name, messageId: messageIdFor(eventId, sink.name) }, now);
    if (!open) {
      const payload: DeliveryPayload = { event_id: eventId, sink: sink.name };
      // source = the job kind: the pause domain of the sink's own worker gate (see SinkGate).
      await enqueue(trx, { kind, payload, eventId, source: kind, maxAttempts: sink.maxAttempts }, now);
    }
    queued.push(sink.name);
  }
  return queued;
}
