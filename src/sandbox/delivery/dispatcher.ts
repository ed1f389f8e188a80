import { setMaxListeners } from 'node:events';
import { Webhook } from 'standardwebhooks';
import type { ChaosOptions } from '../chaos.js';
import { iso, type Clock } from '../clock.js';
import { newId, newMessageId } from '../ids.js';
import type { SandboxStore } from '../store.js';
import type { DeliveryRecord, SandboxEvent, WebhookEndpoint } from '../types.js';
import { isAcknowledged, retryDelayMs } from './backoff.js';
import type { DeliveryScheduler } from './scheduler.js';

export interface SandboxLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
}

export interface DispatcherDeps {
  store: SandboxStore;
  clock: Clock;
  scheduler: DeliveryScheduler;
  chaos: () => ChaosOptions;
  fetch: typeof fetch;
  random: () => number;
  attemptTimeoutMs: number;
  logger?: SandboxLogger | undefined;
}

/** One delivery of one event to one endpoint; its `webhook-id` stays the same across its retries. */
interface Message {
  messageId: string;
  endpointId: string;
  event: SandboxEvent;
  body: string;
}

/** Spec 6: every enabled endpoint of the organization whose `event_types` holds the event or is empty. */
export function subscribedEndpoints(store: SandboxStore, event: SandboxEvent): WebhookEndpoint[] {
  return store
    .webhooksOf(event.organizationId)
    .filter((w) => w.enabled && (w.event_types.length === 0 || w.event_types.includes(event.event_type)));
}

/** Sends events as signed Standard Webhooks deliveries with the retry schedule of spec 6.3. */
export class Dispatcher {
  private readonly abort = new AbortController();

  constructor(private readonly deps: DispatcherDeps) {
    // Every attempt in flight listens on this signal (removed when it ends), so more than ten at
    // once (the `parallel` knob, several endpoints) is normal: not the leak Node warns about at 11.
    setMaxListeners(0, this.abort.signal);
  }

  emit(event: SandboxEvent): void {
    const chaos = this.deps.chaos();
    for (const endpoint of subscribedEndpoints(this.deps.store, event)) {
      // Spec 6.1 envelope; the body is fixed per endpoint so every retry signs the same bytes.
      const envelope = { id: event.id, created_at: event.created_at, webhook_id: endpoint.id, event_type: event.event_type, payload: event.payload };
      const body = JSON.stringify(envelope);
      const copies = this.deps.random() < chaos.duplicateRate ? 2 : 1;
      for (let i = 0; i < copies; i++) {
        const message: Message = { messageId: newMessageId(), endpointId: endpoint.id, event, body };
        this.deps.scheduler.schedule(endpoint.id, chaos.delayMs, () => this.attempt(message, 1));
      }
    }
  }

  stop(): void {
    this.abort.abort();
  }

  /** `previous`: the failed attempt's record that announced this retry. */
  private async attempt(message: Message, attempt: number, previous?: DeliveryRecord): Promise<void> {
    const { store, clock, scheduler } = this.deps;
    const endpoint = store.webhooks.get(message.endpointId);
    // Deleted or paused (spec 2.11 `enabled: false`) endpoints get nothing more: the spec says
    // nothing of holding retries for an endpoint resumed later, so the delivery is dropped, and the
    // record that announced this retry says so instead of a next attempt that will never come.
    if (endpoint === undefined || !endpoint.enabled) {
      if (previous === undefined) return;
      const reason = endpoint === undefined ? 'endpoint_deleted' : 'endpoint_paused';
      Object.assign(previous, { retry_delay_ms: null, next_attempt_at: null, retry_dropped: { reason, at: iso(clock.now()) } });
      this.deps.logger?.info({ event_id: message.event.id, webhook_id: message.endpointId, attempt, reason }, 'delivery retry dropped');
      return;
    }
    const attemptedAt = clock.now();
    const started = performance.now();
    const { responseCode, error } = await this.post(endpoint, message, attemptedAt);
    const ok = responseCode !== null && isAcknowledged(responseCode);
    // An attempt stop() cut short gets no retry: the scheduler is stopped and would hold it for
    // ever, counted as pending, announced by a next_attempt_at that never comes.
    const delay = ok || this.abort.signal.aborted ? null : retryDelayMs(attempt);
    const record: DeliveryRecord = {
      id: newId(),
      webhook_id: endpoint.id,
      event_id: message.event.id,
      event_type: message.event.event_type,
      message_id: message.messageId,
      attempt,
      status: ok ? 'succeeded' : 'failed',
      response_code: responseCode,
      error,
      attempted_at: iso(attemptedAt),
      duration_ms: Math.round(performance.now() - started),
      retry_delay_ms: delay,
      next_attempt_at: delay === null ? null : iso(scheduler.schedule(endpoint.id, delay, () => this.attempt(message, attempt + 1, record))),
      retry_dropped: null,
    };
    store.recordDelivery(record);
    this.deps.logger?.info(
      { event_id: message.event.id, webhook_id: endpoint.id, attempt, response_code: responseCode, error, dropped: !ok && delay === null },
      ok ? 'delivery acknowledged' : 'delivery failed',
    );
  }

  private async post(
    endpoint: WebhookEndpoint,
    message: Message,
    attemptedAt: number,
  ): Promise<{ responseCode: number | null; error: 'timeout' | 'network_error' | null }> {
    const timestamp = new Date(attemptedAt + this.deps.chaos().timestampOffsetMs);
    // Signed by the standardwebhooks package, never by our own code (issue 3).
    const signature = new Webhook(endpoint.secret).sign(message.messageId, timestamp, message.body);
    // Not AbortSignal.any over AbortSignal.timeout: on Node 20 the combined signal holds its
    // sources weakly, a garbage collection loses the timeout (nodejs/node#57736), and a receiver
    // that never answers would hold this endpoint's deliveries for ever. The timer is ours here.
    const attempt = new AbortController();
    const timer = setTimeout(() => attempt.abort(new DOMException('attempt timed out', 'TimeoutError')), this.deps.attemptTimeoutMs);
    const onStop = () => attempt.abort(this.abort.signal.reason);
    if (this.abort.signal.aborted) onStop();
    else this.abort.signal.addEventListener('abort', onStop, { once: true });
    const signal = attempt.signal;
    try {
      const res = await this.deps.fetch(endpoint.url, {
        method: 'POST',
        // Spec 6.3: redirects are not followed; a 3xx is a failed attempt.
        redirect: 'manual',
        signal,
        headers: {
          'content-type': 'application/json',
          'user-agent': 'hiring-service-sandbox',
          'webhook-id': message.messageId,
          'webhook-timestamp': String(Math.floor(timestamp.getTime() / 1000)),
          'webhook-signature': signature,
        },
        body: message.body,
      });
      // The answer is whole only with its body: 2xx headers then a body stalled past the timeout
      // is a timeout (spec 6.3), and a body cut off is a network error, not an acknowledgement.
      await res.arrayBuffer();
      return { responseCode: res.status, error: null };
    } catch {
      const timedOut = signal.aborted && (signal.reason as Error | undefined)?.name === 'TimeoutError';
      return { responseCode: null, error: timedOut ? 'timeout' : 'network_error' };
    } finally {
      clearTimeout(timer);
      this.abort.signal.removeEventListener('abort', onStop);
    }
  }
}
