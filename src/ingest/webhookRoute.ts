import type { HttpBindings } from '@hono/node-server';
import type { Context } from 'hono';
import { isKnownEventType } from '../events/eventTypes.js';
import { DATABASE_REPLACED } from '../db/DatabaseFileWatch.js';
import { primarySqliteCode } from '../db/sqliteHelpers.js';
import { deliveryLogger, type Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { RefusalLog } from '../observability/RefusalLog.js';
import type { Clock } from '../util/clock.js';
import { isCredentialHeader } from '../util/credentialHeaders.js';
import { SaidOnce } from '../util/collections.js';
import type { IngestItem, IngestOutcome } from './eventStore.js';
import { StorageUnavailableError, type GroupCommitter } from './GroupCommitter.js';
import { parseEnvelope } from './parseEnvelope.js';
import type { BodyBudget, BodyHold } from './BodyBudget.js';
import { BodyBudgetExceededError, BodyTooLargeError, readNodeBody, readWebBody } from './readBody.js';
import type { Verifier } from './verifySignature.js';

export interface WebhookRouteDeps {
  verifier: Verifier;
  committer: GroupCommitter<IngestItem, IngestOutcome>;
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
  /** Where a refused delivery's line is throttled: a few a minute per reason at warn, the rest at debug. */
  refusals: RefusalLog;
  maxBodyBytes: number;
  /**
   * The bytes of bodies held at once over all requests (MAX_BODY_BYTES_IN_FLIGHT): a request's
   * share is taken as its body is read and given back when the handler is done with it, however
   * it ends. Node requests only (app.request in tests reads a web stream).
   */
  bodyBudget?: BodyBudget;
  /**
   * True once the receiver is stopping: answers then close their connection. Kept alive, the
   * connection was closed as soon as it was idle, and a next delivery the sender had written on
   * it meanwhile was reset unanswered; told to close, the sender opens a new connection, which is
   * refused cleanly.
   */
  draining?: () => boolean;
  /**
   * Each request's time on the event loop, its awaits (the body's reading, the commit) left out:
   * the processing pacer holds nothing back while the handlers take little of the loop
   * (src/processing/IngestFirst.ts).
   */
  onLoopWork?: (ms: number) => void;
}

/** Node joins repeated headers with ", " (the Fetch API does the same); set-cookie is the only array. */
const headerValue = (v: string | string[] | undefined): string | undefined => (Array.isArray(v) ? v.join(', ') : v);

/**
 * POST /webhooks: verify on the raw bytes, dedupe on the envelope id, store
 * durably, and only then answer 2xx. Nothing here calls the hiring API or a sink.
 */
export function createWebhookHandler(deps: WebhookRouteDeps) {
  const { bodyBudget } = deps;
  const logger = deliveryLogger(deps.logger);
  // Event types this version does not know, said once each at warn (a bounded few), so an
  // operator hears that the service sends a new one: every delivery is logged at info.
  const unknownTypesTold = new SaidOnce();

  // A request's share of the budget is given back when the handler returns or throws, whatever
  // the answer: every way out passes there (a closed connection fails the read, a commit waits at
  // most WRITE_TIMEOUT_MS). Not at the response's 'close': a delivery pipelined behind one still
  // unanswered has its answer queued, and Node 22 never closes a queued answer when the
  // connection goes, so its bytes stayed taken for ever, and with them the room of later ones.
  const handle = createDeliveryHandler(deps, logger, unknownTypesTold, new WeakMap());
  return async (c: Context<{ Bindings: Partial<HttpBindings> }>) => {
    const hold = bodyBudget && c.env?.incoming ? bodyBudget.holder() : undefined;
    try {
      return await handle(c, hold);
    } finally {
      hold?.release();
    }
  };
}

/**
 * The handler of one delivery; `hold` takes the bytes of its body from the BodyBudget as they are read.
 * `readOnSocket`: how many deliveries were read on each connection so far, the last one's number.
 */
function createDeliveryHandler(deps: WebhookRouteDeps, logger: Logger, unknownTypesTold: SaidOnce, readOnSocket: WeakMap<object, number>) {
  const { verifier, committer, clock, metrics, refusals, maxBodyBytes } = deps;
  return async (c: Context<{ Bindings: Partial<HttpBindings> }>, hold: BodyHold | undefined) => {
    // Booked in this function's own `finally`, which runs as it returns or throws: after an
    // `await` of it, other handlers resumed by the same commit (a batch) ran first and were booked too.
    const loop = new LoopStretches();
    try {
      const started = performance.now();
      const incoming = c.env?.incoming;
      // Numbered as Node reads them (this runs when the head is read, before any await): a delivery
      // pipelined behind this one on the connection has a higher number.
      const socket = incoming?.socket;
      const readAs = socket ? (readOnSocket.get(socket) ?? 0) + 1 : 0;
      if (socket) readOnSocket.set(socket, readAs);
      // On Node, the headers come straight from the IncomingMessage: c.req.header() would
      // build a WHATWG Headers object (undici) for each delivery just to read three values.
      const header = incoming ? (name: string) => headerValue(incoming.headers[name]) : (name: string) => c.req.header(name);
      const deliveryId = header('webhook-id');
      // Every answer goes through here, just before it is returned.
      const done = (outcome: string, status: number, fields: Record<string, unknown> = {}) => {
        // Stopping: the last delivery read on the connection closes it. Not one with another
        // pipelined behind it: Node sends answers in order and drops those queued behind a closing
        // one, so that delivery, read and maybe stored, went unanswered (its own answer closes).
        if (deps.draining?.() && c.env?.outgoing && (!socket || readOnSocket.get(socket) === readAs)) c.env.outgoing.shouldKeepAlive = false;
        const durationMs = performance.now() - started;
        // Only the deliveries whose signature verified: a refused one may come from anyone, as slowly
        // as they like (a body trickled for REQUEST_TIMEOUT_MS), and timed here one such request
        // raised the "ingest latency" alert's p99 past 1 s. Refused ones are counted by outcome.
        if (!outcome.startsWith('rejected')) metrics.ingestDuration.observe(durationMs / 1000);
        const source = fields.source as string | undefined;
        metrics.deliveriesReceived.inc({ outcome, source: source ?? 'unknown' });
        const line = { outcome, status, delivery_id: deliveryId, duration_ms: Math.round(durationMs * 100) / 100, ...fields };
        if (outcome.startsWith('rejected')) {
          // Anyone can send these, as fast as they are answered: a few a minute per reason (and
          // source, a configured name) at warn, the rest at debug and counted (RefusalLog).
          const counts = refusals.refused(`${outcome}\n${source ?? ''}`, { outcome, status, ...(source ? { source } : {}) });
          if (counts === null) logger.debug(line, 'webhook delivery');
          else logger.warn({ ...line, ...counts }, 'webhook delivery');
          return;
        }
        // The service's own deliveries (and storage failures): every one logged.
        logger[outcome === 'unavailable' ? 'error' : outcome === 'quarantined' || outcome === 'conflict' ? 'warn' : 'info'](line, 'webhook delivery');
      };
      // A 503 is `unavailable` (the storage failed: logged at error), except a refusal of the request
      // itself (`receiver_busy`), which is counted and logged at warn like the other rejections.
      const reject = (status: 400 | 401 | 413 | 503, error: string, message: string, fields: Record<string, unknown> = {}, refused = false) => {
        done(status === 503 && !refused ? 'unavailable' : `rejected:${error}`, status, fields);
        // The rest of a body not read (over MAX_BODY_BYTES, or no room for it) is never read: the
        // connection closes rather than parse it as a next request.
        const headers: Record<string, string> = status === 413 || refused ? { Connection: 'close' } : {};
        if (status === 503) headers['Retry-After'] = '5';
        return c.json({ error, message }, status, headers);
      };

      // Node joins a repeated header's lines with ", ". Two webhook-id lines make an id no sender
      // signed, which would only fail as a bad signature (401), and two timestamp lines one that is
      // no number: each said as what it is instead. Node's headersDistinct (every line, names
      // lower-cased) is built on first use: only for such a value.
      if (incoming) {
        for (const [name, what] of [['webhook-id', 'id'], ['webhook-timestamp', 'timestamp']] as const) {
          if (header(name)?.includes(',') && (incoming.headersDistinct[name]?.length ?? 0) > 1) {
            return reject(400, 'malformed_header', `${name} header was sent more than once; a delivery has exactly one ${what}`);
          }
        }
      }

      const checked = verifier.check({
        id: deliveryId,
        timestamp: header('webhook-timestamp'),
        signature: header('webhook-signature'),
      });
      if (!checked.ok) return reject(checked.status, checked.reason, checked.message, checked.fields);

      let body: Buffer;
      loop.pause();
      try {
        body = incoming
          ? await readNodeBody(incoming, maxBodyBytes, hold)
          : await readWebBody(c.req.raw.body, maxBodyBytes, header('content-length'));
      } catch (err) {
        loop.resume();
        if (err instanceof BodyTooLargeError) return reject(413, 'body_too_large', err.message);
        if (err instanceof BodyBudgetExceededError) {
          return reject(503, 'receiver_busy', `${err.message}: other requests' bodies are being read or handled; retry later`, {}, true);
        }
        return reject(400, 'body_unreadable', 'the request body could not be read');
      }

      loop.resume();
      const verified = verifier.match(checked, body);
      if (!verified.ok) return reject(verified.status, verified.reason, verified.message);

      const source = verified.source;
      const receivedAt = new Date(clock.now()).toISOString();
      const parsed = parseEnvelope(body);
      const item: IngestItem = parsed.ok
        ? { type: 'event', source, deliveryId: deliveryId!, receivedAt, envelope: parsed.envelope, text: parsed.text }
        : {
            type: 'quarantine',
            source,
            deliveryId: deliveryId!,
            receivedAt,
            reason: parsed.reason,
            body,
            // Kept with the quarantined delivery; credentials are never stored (webhook-signature is, and `quarantine show` hides it).
            headers: JSON.stringify(
              Object.fromEntries(Object.entries(c.req.header()).filter(([k]) => !isCredentialHeader(k))),
            ),
          };

      let outcome: IngestOutcome;
      loop.pause();
      try {
        outcome = await committer.submit(item);
      } catch (err) {
        loop.resume();
        if (err instanceof StorageUnavailableError) {
          // Bounded label values: lock_timeout, database_replaced, an SQLite error code, or 'error'.
          // The primary result code (SQLITE_IOERR for SQLITE_IOERR_WRITE, _FSYNC...): a small set.
          const primary = primarySqliteCode(err.reason);
          const replaced = err.reason === DATABASE_REPLACED;
          // A delivery still waiting for the lock when a stop's grace ran out: a deploy, not a storage fault.
          const reason = err.abandoned ? 'shutdown' : replaced ? 'database_replaced' : err.reason.startsWith('database write lock') ? 'lock_timeout' : (primary ?? 'error');
          metrics.storageErrors.inc({ reason });
          // Why, and which event: a lock timeout has no other line at info or above (an SQLite
          // error also has the committer's 'ingest transaction failed').
          const which = parsed.ok ? { event_id: parsed.envelope.id, event_type: parsed.envelope.eventType } : {};
          const fields = { source, storage_error: reason, ...which };
          // Not stored anywhere that lasts (DatabaseFileWatch): retried by the service once the receiver is restarted.
          if (replaced) return reject(503, 'database_replaced', 'the receiver\'s database file was deleted or replaced while it ran: the event was not stored, and the receiver must be restarted; retry later', fields);
          return reject(503, 'storage_unavailable', 'the event could not be stored; retry later', fields);
        }
        throw err;
      }
      loop.resume();

      if (!parsed.ok) {
        metrics.quarantined.inc();
        done('quarantined', 200, { source, reason: parsed.reason });
        return c.json({ outcome, reason: parsed.reason }, 200);
      }
      const { id, eventType } = parsed.envelope;
      if (outcome === 'conflict') metrics.eventConflicts.inc();
      // Unknown types are stored and acknowledged like any other (spec 6): noted at info level,
      // the first of each type at warn too.
      const known = isKnownEventType(eventType);
      done(outcome, 200, { source, event_id: id, event_type: eventType, ...(known ? {} : { unknown_type: true }) });
      const told = known || outcome !== 'accepted' ? null : unknownTypesTold.first(eventType);
      if (told !== null) {
        logger.warn(
          { source, event_id: id, event_type: told },
          'an event type this version does not know: stored, acknowledged and sent to the sinks as received, with no result read for it (said once per type)',
        );
      }
      return c.json({ outcome, id }, 200);
    } finally {
      deps.onLoopWork?.(loop.end());
    }
  };
}

/** A request's time on the event loop: its stretches between awaits, added up. */
class LoopStretches {
  private ms = 0;
  private since: number | null = performance.now();

  /** Before an await. */
  pause(): void {
    if (this.since !== null) this.ms += performance.now() - this.since;
    this.since = null;
  }

  /** After it. */
  resume(): void {
    this.since ??= performance.now();
  }

  /** The total, the stretch running now included. */
  end(): number {
    this.pause();
    return this.ms;
  }
}
