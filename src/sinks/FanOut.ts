import type { Writable } from 'node:stream';
import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../db/schema.js';
import { betweenBatches } from '../db/sqliteHelpers.js';
import { KNOWN_EVENT_TYPES } from '../events/eventTypes.js';
import { sharedHttpClient, type HttpClient } from '../http/httpClient.js';
import type { Logger } from '../observability/logger.js';
import type { BackoffOptions } from '../queue/backoff.js';
import type { JobQueue } from '../queue/JobQueue.js';
import { Worker, type SourceHold, type WorkerOptions } from '../queue/Worker.js';
import type { Clock } from '../util/clock.js';
import { createDeliveryHandler } from './deliveryHandler.js';
import { deadLetterRecord, enableSink, newerJobOfPair, sinkDisabled, sinkStatuses, type SinkStatus } from './deliveryRecords.js';
import { closeDeadLetteredRows } from './closeDeadLetteredRows.js';
import { closeRemovedSinksRows, deadLetterRemovedSinks } from './deadLetterRemovedSinks.js';
import { applySinkMaxAttempts, enqueueDeliveries, sinkJobKind, type DeliveryPayload, type DeliveryWrites } from './enqueueDeliveries.js';
import { undocumentedPatterns } from './matchesSink.js';
import { sinkKindOf } from './registry.js';
import type { SinkConfig } from './sinkConfig.js';
import { SinkGate } from './SinkGate.js';
import type { Sink } from './types.js';

/**
 * Retry schedule of failed deliveries: 10 s, 30 s, 90 s ... capped at 1 h,
 * with jitter; with 25 attempts that spans 9.5-19 h (about 14 h on average) before a dead letter, as README says.
 */
export const SINK_BACKOFF: BackoffOptions = { baseMs: 10_000, factor: 3, capMs: 60 * 60_000, jitter: 0.5 };

/**
 * How often an idle sink worker looks for due deliveries. Deliveries queued by
 * this process wake it at once; this bounds the wait for those queued by
 * another one (the CLI's `replay`, `dead-letters retry`). An idle look is a
 * read (no write lock), so it can be this frequent.
 */
export const SINK_POLL_MS = 50;

export interface FanOutOptions {
  db: Kysely<Database>;
  queue: JobQueue;
  clock: Clock;
  logger: Logger;
  sinks: readonly SinkConfig[];
  /** Used by http sinks (tests inject one). */
  http?: HttpClient;
  /** Where stdout sinks write (tests inject a stream). */
  stdout?: Writable;
  backoff?: BackoffOptions;
  pollIntervalMs?: number;
  /** Observes every delivery attempt's end (metrics). */
  onJobSettled?: WorkerOptions['onJobSettled'];
}

interface Lane {
  config: SinkConfig;
  sink: Sink;
  worker: Worker;
}

/**
 * Sends every settled event to every sink that wants it. Each sink has its
 * own Worker over the shared durable queue (it claims only `sink:<name>`
 * jobs) with its own concurrency, so a slow, failing or disabled sink never
 * holds up another sink or the ingest and processing workers. A sink with
 * `deliverBatch` (file) works in batches of its kind's `batchSize`: one claim,
 * batched reads, one write + fsync and one transaction recording and
 * completing the delivered ones; others (http, stdout) one message per job.
 */
export class FanOut {
  private readonly lanes: Lane[];
  private readonly shutdown = new AbortController();

  constructor(private readonly o: FanOutOptions) {
    const deps = { http: o.http ?? sharedHttpClient(), stdout: o.stdout ?? process.stdout, logger: o.logger, shutdown: this.shutdown.signal };
    this.lanes = o.sinks.map((config) => {
      const kind = sinkKindOf(config.type);
      const sink = kind.create(config.name, config.options, deps);
      const maxJobs = sink.deliverBatch ? (kind.batchSize ?? 1) : 1;
      const gate = new SinkGate(o.db, o.clock, config.name, config.target);
      const worker = new Worker({
        queue: o.queue,
        clock: o.clock,
        logger: o.logger.child({ sink: config.name }),
        gate,
        soleSource: sinkJobKind(config.name),
        // A dead letter the handler did not record itself (one claimed past its last attempt,
        // which is not run again): its delivery record says so too. That last attempt was cut (a
        // crash during it) and is counted, as by its job (all its claims but this one). Not when a
        // newer job of the pair runs the current cycle (a replay queued during that attempt): the
        // record is that cycle's, still to run, and says so (recordFailedAttempt likewise).
        onDeadLetter: async (job, error) => {
          const eventId = job.event_id ?? (JSON.parse(job.payload) as DeliveryPayload).event_id;
          await o.db
            .updateTable('deliveries')
            .set(deadLetterRecord(error, job.attempts, new Date(o.clock.now()).toISOString()))
            .where('event_id', '=', eventId)
            .where('sink', '=', config.name)
            .where('state', 'in', ['pending', 'retrying'])
            .where((eb) => eb.not(newerJobOfPair(eb, { eventId, sink: config.name, jobId: job.id })))
            .execute();
        },
        concurrency: config.concurrency,
        backoff: o.backoff ?? SINK_BACKOFF,
        pollIntervalMs: o.pollIntervalMs ?? SINK_POLL_MS,
        ...(o.onJobSettled ? { onJobSettled: o.onJobSettled } : {}),
        handlers: { [sinkJobKind(config.name)]: createDeliveryHandler({ db: o.db, clock: o.clock, logger: o.logger, sink, config, gate, maxJobs, revise: this.revise }) },
      });
      return { config, sink, worker };
    });
  }

  /** The processing layer's hook: runs in the transaction that settles the event. */
  readonly onSettled = async (writes: DeliveryWrites, eventId: string): Promise<void> => {
    await this.enqueueDeliveries(writes, eventId);
  };

  /**
   * A message about to go out whose result changed since its revision was settled (a later event
   * of the application fetched another result; a replay to a sink, or a retry, would otherwise send
   * the new body under the old webhook-id): the event gets its next revision, with the result's
   * digest now, and is queued to every sink that takes it, as settleEvent does for a revision made
   * by processing. Only from the digest the message was built against: when another sink's lane
   * made the revision first, or the event is being processed again, nothing more is done here
   * (that revision, or the settle, queued it), and null is returned; else the sinks queued.
   */
  readonly revise = async (eventId: string, was: string, digest: string): Promise<string[] | null> => {
    const now = new Date(this.o.clock.now()).toISOString();
    return this.o.db.transaction().execute(async (trx) => {
      const made = await trx
        .updateTable('event_processing')
        .set((eb) => ({ revision: eb('revision', '+', 1), result_digest: digest, updated_at: now }))
        .where('event_id', '=', eventId)
        .where('state', '=', 'settled')
        .where('result_digest', '=', was)
        .executeTakeFirst();
      return made.numUpdatedRows > 0n ? this.enqueueDeliveries(trx, eventId) : null;
    });
  };

  /** Queue the event's deliveries (all matching sinks, or only those named: the CLI's replay). */
  async enqueueDeliveries(trx: Transaction<Database> | DeliveryWrites, eventId: string, opts: { sinks?: readonly string[] } = {}): Promise<string[]> {
    const queued = await enqueueDeliveries(trx, eventId, this.o.sinks, this.o.clock.now(), opts.sinks ? { only: opts.sinks } : {});
    // The claim waits for the connection, so it runs after this transaction commits.
    for (const lane of this.lanes) if (queued.includes(lane.config.name)) lane.worker.kick();
    return queued;
  }

  /**
   * A sink disabled by a 410 stays disabled across restarts, unless its
   * target changed in the configuration since (the operator pointed it elsewhere). Returns false
   * when `signal` (a stop during the start) cut it short.
   */
  async reconcile(signal?: AbortSignal): Promise<boolean> {
    // In short transactions with a pause between two: deliveries are being answered meanwhile,
    // by this process under `serve` (start() listens before the workers start), or by the `serve`
    // beside this `work`. A stop ends it at the next batch rather than after all of it (tens of
    // seconds at a few million: past `docker stop`'s 10 s): each batch committed whole, so the
    // next start finds what is left.
    const now = new Date(this.o.clock.now()).toISOString();
    const interrupted = () => {
      if (!signal?.aborted) return false;
      this.o.logger.warn("the stop came during the start's sink housekeeping: ended part-way, the next start finishes it");
      return true;
    };
    const dropped = await deadLetterRemovedSinks(this.o.db, this.lanes.map((l) => sinkJobKind(l.config.name)), now, betweenBatches, signal);
    if (dropped > 0) this.o.logger.warn({ deliveries: dropped }, 'deliveries of sinks no longer configured are now dead letters');
    if (interrupted()) return false;
    const closed = await closeRemovedSinksRows(this.o.db, this.lanes.map((l) => l.config.name), now, betweenBatches, signal);
    if (closed > 0) this.o.logger.warn({ deliveries: closed }, 'deliveries of sinks no longer configured that still said pending, with no job left to send them, now say dead');
    if (interrupted()) return false;
    const recorded = await closeDeadLetteredRows(this.o.db, this.lanes.map((l) => l.config.name), now, betweenBatches, signal);
    if (recorded > 0) this.o.logger.warn({ deliveries: recorded }, 'deliveries whose dead letter was never recorded on them (a crash or a refused write between the two) now say dead');
    if (interrupted()) return false;
    // A max_attempts raised (or lowered) since, as during a consumer's outage, applies to the
    // deliveries already waiting too.
    for (const c of await applySinkMaxAttempts(this.o.db, this.lanes.map((l) => l.config), now, betweenBatches, signal)) {
      this.o.logger.info({ sink: c.sink, deliveries: c.deliveries, max_attempts: c.maxAttempts }, "queued deliveries take the sink's max_attempts as configured now");
    }
    if (interrupted()) return false;
    for (const { config } of this.lanes) {
      const st = await sinkDisabled(this.o.db, config.name);
      if (!st) continue;
      const former = sinkKindOf(config.type).formerTargets?.(config.options as never) ?? [];
      if (st.disabled_target !== null && former.includes(st.disabled_target)) {
        // Stored by an earlier version (an http sink's whole URL, token included): the same
        // target, so it stays disabled, now recorded in the current form.
        await this.o.db.updateTable('sink_state').set({ disabled_target: config.target }).where('sink', '=', config.name).execute();
        st.disabled_target = config.target;
      }
      if (st.disabled_target !== config.target) {
        await enableSink(this.o.db, config.name, this.o.clock.now());
        this.o.logger.warn({ sink: config.name }, 'sink re-enabled: its target changed since it was disabled');
      } else {
        this.o.logger.error(
          { sink: config.name, disabled_at: st.disabled_at, reason: st.disabled_reason },
          'sink is DISABLED; its deliveries wait until it is re-enabled (CLI) or its target changes',
        );
      }
    }
    return true;
  }

  /** Checks the sinks, reconciles, then starts the lanes: not when `signal` (a stop) cut the reconcile short. */
  async start(signal?: AbortSignal): Promise<void> {
    for (const { config } of this.lanes) {
      // Valid, since the set of event types can grow (spec 6), but most likely a typo.
      const unmatched = undocumentedPatterns(config.events);
      if (unmatched.length > 0) {
        this.o.logger.warn(
          { sink: config.name, patterns: unmatched, known: KNOWN_EVENT_TYPES },
          'sink events filter: these patterns match no event type the service documents (spec 6.4), only new types of that name',
        );
      }
    }
    for (const { config } of this.lanes) {
      for (const w of sinkKindOf(config.type).warnings?.(config.options as never) ?? []) this.o.logger.warn({ sink: config.name }, `sink: ${w}`);
    }
    for (const { config, sink } of this.lanes) {
      try {
        await sink.check?.();
      } catch (err) {
        throw new Error(`sink ${JSON.stringify(config.name)}: ${(err as Error).message}`);
      }
    }
    if (!(await this.reconcile(signal))) return;
    // A halt during the reconcile (the database file replaced meanwhile) holds: no lane starts.
    if (this.halted) return;
    for (const lane of this.lanes) lane.worker.start();
  }

  private halted = false;

  /** Stop claiming (attempts in flight finish and record), for good; stop() still closes the sinks. */
  async halt(): Promise<void> {
    this.halted = true;
    await Promise.all(this.lanes.map((l) => l.worker.stop()));
  }

  /**
   * Stop claiming, let attempts in flight finish and record, release files. After `graceMs`, a
   * request still waiting on its consumer is aborted (a retryable failure, recorded): a hanging
   * consumer must not hold the shutdown past the orchestrator's kill (`timeout_ms` may be 50 s).
   */
  async stop(graceMs?: number): Promise<void> {
    const stopped = this.halt();
    const timer = graceMs === undefined ? null : setTimeout(() => this.shutdown.abort(), graceMs);
    try {
      await stopped;
    } finally {
      if (timer) clearTimeout(timer);
    }
    await Promise.all(this.lanes.map((l) => l.sink.close?.()));
  }

  /** For tests and the CLI: run every due delivery of every sink until none is left. */
  async runUntilIdle(maxJobs = 10_000): Promise<number> {
    let total = 0;
    for (;;) {
      const ran = (await Promise.all(this.lanes.map((l) => l.worker.runUntilIdle(maxJobs)))).reduce((a, b) => a + b, 0);
      total += ran;
      if (ran === 0 || total >= maxJobs) return total;
    }
  }

  /** The sinks their lanes hold at `now` (a consumer's Retry-After: a delivery's failure is never an outage, so the breaker holds none), as sources `sink:<name>`. */
  heldSources(now: number): SourceHold[] {
    return this.lanes.flatMap((l) => l.worker.heldSources(now));
  }

  worker(sink: string): Worker | undefined {
    return this.lanes.find((l) => l.config.name === sink)?.worker;
  }

  async status(): Promise<SinkStatus[]> {
    return sinkStatuses(this.o.db, this.o.sinks, this.o.clock.now());
  }
}
