import type { Writable } from 'node:stream';
import type { z } from 'zod';
import type { HttpClient } from '../http/httpClient.js';
import type { HiringResource } from '../hiring/types.js';
import type { Logger } from '../observability/logger.js';
import type { Clock } from '../util/clock.js';

/** The result block of a message: the final state of the scoring read behind the event. */
export interface MessageResult {
  resource: HiringResource;
  state: 'ready' | 'unavailable' | 'given_up';
  reason: string | null;
  /** The full object as fetched, or null when none came. */
  data: unknown;
  fetched_at: string | null;
}

/** What every sink receives (public contract, documented in README). */
export interface SinkMessage {
  id: string;
  event_type: string;
  created_at: string | null;
  received_at: string;
  source: string;
  webhook_id: string | null;
  application_id: string | null;
  external_id: string | null;
  /** 1; higher when the event's result changed after it was sent, and the message was sent again. */
  revision: number;
  payload: unknown;
  result: MessageResult | null;
  needs_review: boolean;
  /**
   * The envelope's top-level fields other than those of spec 6.1 (`id`, `created_at`,
   * `webhook_id`, `event_type`, `payload`), as sent: fields the service added since. Absent when
   * there are none.
   */
  envelope_extra?: Record<string, unknown>;
}

export interface DeliveryContext {
  /** Stable for the (event, sink, revision): the `webhook-id` of http sinks. */
  messageId: string;
  /** 1 for the first attempt of this cycle. */
  attempt: number;
  clock: Clock;
  logger: Logger;
}

/** A success; failures are thrown as DecisionErrors (src/hiring/errors.ts), with `status` when there is one. */
export interface DeliveryOutcome {
  statusCode?: number;
}

/**
 * A destination for messages. `deliver` resolves when the message is accepted
 * (2xx, on disk, written) and throws a DecisionError otherwise:
 * RetryableError / RetryAfterError retry with backoff, PermanentError
 * dead-letters at once, PauseSourceError disables the sink (410 Gone).
 */
export interface Sink {
  deliver(message: SinkMessage, ctx: DeliveryContext): Promise<DeliveryOutcome>;
  /**
   * Optional: many messages at once (the file sink: one write and one fsync for all of them).
   * Resolves with one settled result per message, in order, each exactly as `deliver` would
   * have resolved or thrown; a sink that offers it gets batches of up to its kind's `batchSize`.
   */
  deliverBatch?(batch: readonly { message: SinkMessage; ctx: DeliveryContext }[]): Promise<PromiseSettledResult<DeliveryOutcome>[]>;
  /**
   * At start: whether the sink can work at all (a file that can be opened for appending). It
   * throws for a problem only the operator can fix, which stops the start; a passing condition
   * (a full disk) is not checked here, the deliveries retry it.
   */
  check?(): Promise<void>;
  /** Release files and sockets at shutdown. */
  close?(): Promise<void>;
}

/** Things a sink may use, injected by the app (tests pass their own). */
export interface SinkDeps {
  http: HttpClient;
  stdout: Writable;
  logger: Logger;
  /** Aborted when the receiver stops and its grace has passed: a request still waiting gives up. */
  shutdown?: AbortSignal;
}

/** Helps a kind turn its parsed config fields into options. */
export interface ResolveContext {
  /** The config path of this sink, e.g. `CONFIG_FILE sinks.0`. */
  at: string;
  /** A secret given inline or as `{ "env": "NAME" }`; null (problem recorded) when unset. */
  secret(where: string, ref: string | { env: string }): string | null;
  problem(message: string): void;
}

/**
 * One kind of sink: its config keys (beyond the common ones), how they
 * become options, and how a sink is built from them. Adding a kind is a file
 * in src/sinks/kinds/ exporting one of these, plus a line in registry.ts.
 */
export interface SinkKind<Fields extends z.ZodRawShape, Options> {
  /** zod shape of the kind's own keys; unknown keys are refused. */
  fields: Fields;
  /** Jobs in flight at once when `concurrency` is not configured. */
  defaultConcurrency: number;
  /** Deliveries per batch when the sink has `deliverBatch` (they are claimed, built and recorded together); 1 when absent. */
  batchSize?: number;
  resolve(raw: z.infer<z.ZodObject<Fields>>, ctx: ResolveContext): Options | null;
  /**
   * What a 410 disables (a path; for a URL, its origin and a digest): a different target at
   * start re-enables the sink. It is logged and stored, so it must hold no secret.
   */
  target(options: Options): string;
  /** What to warn about at start (valid, but likely a mistake); no secret in them. */
  warnings?(options: Options): string[];
  /** Forms of `target` that earlier versions stored for these options: still the same target. */
  formerTargets?(options: Options): string[];
  create(name: string, options: Options, deps: SinkDeps): Sink;
}
