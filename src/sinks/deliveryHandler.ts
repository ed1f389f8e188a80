import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.js';
import { isDecisionError, PermanentError } from '../hiring/errors.js';
import type { Logger } from '../observability/logger.js';
import { dropAnsweredDeadLetters, type ClaimedJob } from '../queue/JobQueue.js';
import type { BatchItemResult, BatchJobHandler } from '../queue/Worker.js';
import type { Clock } from '../util/clock.js';
import { groupBy } from '../util/collections.js';
import { buildMessages } from './buildMessage.js';
import { adoptCycle, currentMessageIds, pairCycles, recordAttempt, recordAttempts, recordFailedAttempt } from './deliveryRecords.js';
import { sinkJobKind, type DeliveryPayload } from './enqueueDeliveries.js';
import { InterruptedByStopError } from './interrupted.js';
import { matchesSink } from './matchesSink.js';
import { BATCH_BYTES, countWithin, storedMessageBytes } from './messageBytes.js';
import { messageIdFor } from './messageId.js';
import type { SinkConfig } from './sinkConfig.js';
import type { SinkGate } from './SinkGate.js';
import type { DeliveryContext, DeliveryOutcome, Sink, SinkMessage } from './types.js';
import { failureMessage } from '../queue/failureMessage.js';

/** A message whose result is being fetched again is looked at again after this (not counted as an attempt). */
export const INCOMPLETE_RECHECK_MS = 60_000;
/** A message whose next revision could not be made (a storage error) is tried again after this. */
export const STALE_RETRY_MS = 5_000;
const NOT_WANTED = "not sent: the sink's events/sources filters no longer take this event (changed after it was queued)";

const statusOf = (err: unknown): number | null => {
  const s = (err as { status?: unknown } | null | undefined)?.status;
  return typeof s === 'number' ? s : null;
};

type Batch = { message: SinkMessage; ctx: DeliveryContext }[];

/** The sink's own batch delivery, or `deliver` for each message (concurrently; the worker bounds the batch size). */
async function deliverAll(sink: Sink, batch: Batch): Promise<PromiseSettledResult<DeliveryOutcome>[]> {
  if (batch.length === 0) return [];
  if (sink.deliverBatch) return sink.deliverBatch(batch);
  return Promise.allSettled(batch.map(({ message, ctx }) => sink.deliver(message, ctx)));
}

/**
 * Runs a batch of one sink's delivery jobs: builds their messages with
 * batched reads, hands them to the sink (one write and fsync for a file
 * sink), and lets the worker complete the delivered ones together with their
 * `deliveries` rows in one transaction. Each message that fails is handled on
 * its own: its row records the attempt and the worker backs the job off
 * (honouring Retry-After) or, past max_attempts or when permanent,
 * dead-letters it; the row's state says which, decided the same way. A
 * PauseSourceError (410 Gone) disables the sink instead: the job is put back
 * without counting, and waits behind the gate with every other pending one.
 * A delivery counts as done only once the sink accepted it (2xx, fsynced).
 */
export function createDeliveryHandler(h: {
  db: Kysely<Database>;
  clock: Clock;
  logger: Logger;
  sink: Sink;
  config: SinkConfig;
  gate: SinkGate;
  /** Jobs per batch (1 for sinks without deliverBatch). */
  maxJobs: number;
  /**
   * Makes the event's next revision for a result that changed since its revision was settled,
   * and queues it to every sink that takes the event (FanOut.revise).
   */
  revise: (eventId: string, was: string, digest: string) => Promise<string[] | null>;
}): BatchJobHandler {
  const { db, clock, config } = h;
  const log = h.logger.child({ sink: config.name });
  const pairOf = (eventId: string) => ({ eventId, sink: config.name });

  /** `sentAt`: when the failed attempt was sent. */
  async function failed(job: ClaimedJob, eventId: string, messageId: string, err: unknown, sentAt: number): Promise<BatchItemResult> {
    const sent = { ...pairOf(eventId), messageId, jobId: job.id, leaseToken: job.lease_token, jobAttempts: job.attempts };
    const message = failureMessage(err);
    const status = statusOf(err);
    if (isDecisionError(err) && err.decision === 'pause_source') {
      const disabled = await h.gate.pause(`sink:${config.name}`, status ?? 0, message, sentAt);
      if (!disabled && !(await h.gate.disabled())) {
        // Enabled (the CLI, a new target) since this attempt was sent: its 410 is from the consumer
        // as it was before, so the enable stands and the message is sent again now (the job's
        // attempt refunded, as for the 410 that disables).
        await recordFailedAttempt(db, sent, { state: 'pending', statusCode: status, error: `${message} (to an attempt sent before the sink was enabled: sent again)` }, clock.now());
        log.warn({ target: config.target, status, err: message }, 'a 410 answered an attempt sent before the sink was enabled: the sink stays enabled and the message is sent again');
        return { rescheduleAt: clock.now(), note: `answered 410 to an attempt sent before the sink was enabled: ${message}` };
      }
      await recordFailedAttempt(db, sent, { state: 'pending', statusCode: status, error: `sink disabled: ${message}` }, clock.now());
      // At error from the attempt that disabled it only; those in flight beside it, at debug.
      log[disabled ? 'error' : 'debug'](
        { target: config.target, status, err: message },
        'SINK DISABLED: the endpoint answered 410 Gone; its deliveries are kept pending until it is re-enabled (CLI) or its URL changes',
      );
      return { rescheduleAt: clock.now(), note: `sink disabled: ${message}` };
    }
    if (err instanceof InterruptedByStopError) {
      // Cut by the stop, not failed by the sink: noted on the delivery without counting an attempt
      // there either, and the job is put back likewise (as an interrupted result read is), to be sent at the restart.
      // Counted, a stop during the last attempt made a dead letter of it.
      await recordFailedAttempt(db, sent, { state: 'retrying', statusCode: null, error: message }, clock.now(), false);
      return { rescheduleAt: clock.now(), note: message, untested: true };
    }
    const dead = (isDecisionError(err) && err.decision === 'permanent') || job.attempts >= job.max_attempts;
    await recordFailedAttempt(db, sent, { state: dead ? 'dead' : 'retrying', statusCode: status, error: message }, clock.now());
    return { error: err };
  }

  return {
    maxJobs: Math.max(1, h.maxJobs),
    async run(claimed) {
      const claimedIds = claimed.map((job) => (JSON.parse(job.payload) as DeliveryPayload).event_id);
      const results: BatchItemResult[] = new Array(claimed.length).fill(undefined);
      // A batch is built and written within BATCH_BYTES of stored JSON: the jobs past it are put
      // back at once, their attempt refunded, for the next claim (one job always goes).
      let taken = claimed.length;
      if (claimed.length > 1) {
        const sizes = await storedMessageBytes(db, claimedIds);
        taken = countWithin(claimedIds.map((id) => sizes.get(id)!), BATCH_BYTES);
        // Unsent: nothing learnt of the sink (untested), and the error of its last attempt kept.
        for (let i = taken; i < claimed.length; i++) {
          const lastError = claimed[i]!.last_error;
          results[i] = { rescheduleAt: clock.now(), untested: true, ...(lastError === null ? {} : { note: lastError }) };
        }
      }
      const jobs = claimed.slice(0, taken);
      const eventIds = claimedIds.slice(0, taken);
      const built = await buildMessages(db, eventIds);
      const sending: number[] = [];
      const batch: Batch = [];
      const sentIdOfJob = new Map<number, string>();
      for (const [i, job] of jobs.entries()) {
        const eventId = eventIds[i]!;
        const b = built.get(eventId)!;
        const wanted = b.status === 'ready' ? b.message : b.status === 'stale' ? b.event : null;
        if (wanted && !matchesSink(config, wanted)) {
          // Queued before the sink's filters changed to leave the event out: not sent, and a dead
          // letter (its row and its job) that says why, rather than a delivery left pending.
          await recordAttempt(db, pairOf(eventId), { state: 'dead', statusCode: null, error: NOT_WANTED }, clock.now());
          results[i] = { error: new PermanentError(NOT_WANTED) };
        } else if (b.status === 'missing') {
          const error = `event ${eventId} is not stored`;
          await recordAttempt(db, pairOf(eventId), { state: 'dead', statusCode: null, error }, clock.now());
          results[i] = { error: new PermanentError(error) };
        } else if (b.status === 'stale') {
          // Not sent under this revision's webhook-id: the next revision is queued (to this sink
          // too, as a job after this one), and this job is done without sending or recording.
          try {
            await h.revise(eventId, b.was, b.digest);
            results[i] = undefined;
          } catch (err) {
            // Its own retry, without an attempt: the other messages of the batch still go out.
            results[i] = { rescheduleAt: clock.now() + STALE_RETRY_MS, note: `could not make the next revision: ${(err as Error).message}` };
          }
        } else if (b.status === 'incomplete') {
          results[i] = { rescheduleAt: clock.now() + INCOMPLETE_RECHECK_MS, note: `waiting for the ${b.resource} result to be final again` };
        } else {
          sending.push(i);
          const messageId = messageIdFor(eventId, config.name, b.message.revision);
          sentIdOfJob.set(job.id, messageId);
          batch.push({ message: b.message, ctx: { messageId, attempt: job.attempts, clock, logger: log } });
        }
      }

      // Each pair's cycle, read with the event's revision in one statement: a revision made since
      // the messages were built is sent by the job it queued, not by this one; a cycle still on an
      // older revision that was not queued again for this sink (its filters left the event out
      // then, and a dead-letter retry runs it now) becomes this revision's before it is sent.
      const cycles = await pairCycles(db, config.name, sending.map((i) => eventIds[i]!));
      for (let k = sending.length - 1; k >= 0; k--) {
        const i = sending[k]!;
        const eventId = eventIds[i]!;
        const cycle = cycles.get(eventId);
        const built = batch[k]!;
        if (!cycle) continue;
        if (cycle.revision > built.message.revision) {
          sending.splice(k, 1);
          batch.splice(k, 1);
          sentIdOfJob.delete(jobs[i]!.id);
          results[i] = undefined;
        } else if (cycle.messageId !== built.ctx.messageId) {
          await adoptCycle(db, { eventId, sink: config.name, from: cycle.messageId, to: built.ctx.messageId }, clock.now());
        }
      }

      const sentAt = clock.now();
      let outcomes: PromiseSettledResult<DeliveryOutcome>[];
      try {
        outcomes = await deliverAll(h.sink, batch);
      } catch (err) {
        outcomes = batch.map(() => ({ status: 'rejected', reason: err }));
      }
      // Delivered event ids by HTTP status (null for files): recorded when the worker completes their jobs.
      const statusOfJob = new Map<number, number | null>();
      for (const [k, i] of sending.entries()) {
        const o = outcomes[k]!;
        if (o.status === 'fulfilled') statusOfJob.set(jobs[i]!.id, o.value.statusCode ?? null);
        else results[i] = await failed(jobs[i]!, eventIds[i]!, sentIdOfJob.get(jobs[i]!.id)!, o.reason, sentAt);
      }
      if (statusOfJob.size > 0) log.debug({ delivered: statusOfJob.size }, 'delivered');
      const eventOfJob = new Map(jobs.map((job, i) => [job.id, eventIds[i]!]));
      return {
        results,
        onComplete: async (trx, completed) => {
          // Recorded only on a pair whose cycle is still the one sent: a newer revision queued
          // meanwhile has its own job, which records it when it is sent.
          const current = await currentMessageIds(trx, config.name, completed.map((job) => eventOfJob.get(job.id)!));
          const stillCurrent = completed.filter((job) => current.get(eventOfJob.get(job.id)!) === sentIdOfJob.get(job.id));
          const byStatus = groupBy(stillCurrent, (job) => statusOfJob.get(job.id) ?? null, (job) => eventOfJob.get(job.id)!);
          const now = clock.now();
          for (const [statusCode, ids] of byStatus) await recordAttempts(trx, config.name, ids, { state: 'delivered', statusCode, error: null }, now);
          // The pair's dead letters are answered: a job that died while this cycle's was queued
          // (its last attempt was running when a replay came) would otherwise stay listed and
          // alerting, and a `dead-letters retry` would send the message again.
          await dropAnsweredDeadLetters(trx, sinkJobKind(config.name), stillCurrent.map((job) => eventOfJob.get(job.id)!));
        },
      };
    },
  };
}
