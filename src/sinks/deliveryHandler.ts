import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.js';
import { isDecisionError, PermanentError } from '../hiring/errors.js';
import type { Logger } from '../observability/logger.js';
import type { ClaimedJob } from '../queue/JobQueue.js';
import type { HandlerResult, JobHandler } from '../queue/Worker.js';
import type { Clock } from '../util/clock.js';
import { buildMessage } from './buildMessage.js';
import { recordAttempt } from './deliveryRecords.js';
import type { DeliveryPayload } from './enqueueDeliveries.js';
import { messageIdFor } from './messageId.js';
import type { SinkConfig } from './sinkConfig.js';
import type { SinkGate } from './SinkGate.js';
import type { Sink } from './types.js';

/** A message whose result is being fetched again is looked at again after this (not counted as an attempt). */
export const INCOMPLETE_RECHECK_MS = 60_000;

const statusOf = (err: unknown): number | null => {
  const s = (err as { status?: unknown }).status;
  return typeof s === 'number' ? s : null;
};

/**
 * Runs one delivery job: builds the message, hands it to the sink and records
 * the attempt on the deliveries row. The worker owns retries: a thrown
 * DecisionError backs off (honouring Retry-After) and, past max_attempts or
 * when permanent, dead-letters; the row's state says which, decided the same way.
 * A PauseSourceError (410 Gone) disables the sink instead: the job is put back
 * without counting, and waits behind the gate with every other pending one.
 */
export function createDeliveryHandler(h: { db: Kysely<Database>; clock: Clock; logger: Logger; sink: Sink; config: SinkConfig; gate: SinkGate }): JobHandler {
  const { db, clock, config } = h;
  const log = h.logger.child({ sink: config.name });
  return async (job: ClaimedJob): Promise<HandlerResult> => {
    const { event_id: eventId } = JSON.parse(job.payload) as DeliveryPayload;
    const pair = { eventId, sink: config.name };
    const built = await buildMessage(db, eventId);
    if (built.status === 'missing') {
      const error = `event ${eventId} is not stored`;
      await recordAttempt(db, pair, { state: 'dead', statusCode: null, error }, clock.now());
      throw new PermanentError(error);
    }
    if (built.status === 'incomplete') {
      return { rescheduleAt: clock.now() + INCOMPLETE_RECHECK_MS, note: `waiting for the ${built.resource} result to be final again` };
    }
    try {
      const outcome = await h.sink.deliver(built.message, { messageId: messageIdFor(eventId, config.name), attempt: job.attempts, clock, logger: log });
      await recordAttempt(db, pair, { state: 'delivered', statusCode: outcome.statusCode ?? null, error: null }, clock.now());
      log.debug({ event_id: eventId, status: outcome.statusCode }, 'delivered');
      return;
    } catch (err) {
      const message = (err as Error).message ?? String(err);
      const status = statusOf(err);
      if (isDecisionError(err) && err.decision === 'pause_source') {
        await h.gate.pause(`sink:${config.name}`, status ?? 0, message);
        await recordAttempt(db, pair, { state: 'pending', statusCode: status, error: `sink disabled: ${message}` }, clock.now());
        log.error(
          { target: config.target, status, err: message },
          'SINK DISABLED: the endpoint answered 410 Gone; its deliveries are kept pending until it is re-enabled (CLI) or its URL changes',
        );
        return { rescheduleAt: clock.now(), note: `sink disabled: ${message}` };
      }
      const dead = (isDecisionError(err) && err.decision === 'permanent') || job.attempts >= job.max_attempts;
      await recordAttempt(db, pair, { state: dead ? 'dead' : 'retrying', statusCode: status, error: message }, clock.now());
      throw err;
    }
  };
}
