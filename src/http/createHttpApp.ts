import type { HttpBindings } from '@hono/node-server';
import { Hono, type Context } from 'hono';
import type { Config } from '../config/loadConfig.js';
import type { DatabaseFileWatch } from '../db/DatabaseFileWatch.js';
import type { OpenDatabase } from '../db/openDatabase.js';
import type { GroupCommitter } from '../ingest/GroupCommitter.js';
import type { IngestItem, IngestOutcome } from '../ingest/eventStore.js';
import type { IngestState } from '../ingest/IngestState.js';
import { BodyBudget } from '../ingest/BodyBudget.js';
import { createVerifier } from '../ingest/verifySignature.js';
import { createWebhookHandler } from '../ingest/webhookRoute.js';
import type { WriteLockHold } from '../ingest/WriteLockHold.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { RefusalLog } from '../observability/RefusalLog.js';
import type { SourceHold } from '../queue/SourceHolds.js';
import { isoTime, type Clock } from '../util/clock.js';
import { registerHealthRoutes } from './healthRoutes.js';
import { metricsOnlyApp } from './metricsOnlyApp.js';
import { createMetricsRoute } from './metricsRoute.js';

export interface HttpAppDeps {
  config: Config;
  database: OpenDatabase;
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
  /** Throttles the lines of refused deliveries (shared with the listener's refusals before routing). */
  refusals: RefusalLog;
  committer: GroupCommitter<IngestItem, IngestOutcome>;
  lockHold: WriteLockHold;
  fileWatch: DatabaseFileWatch;
  /** Read by the routes: draining (set by stop) and storageFailure (set by the committer). */
  state: IngestState;
  /**
   * The sources this process's workers hold at a time (a Retry-After, the outage breaker), for
   * /readyz; absent where no workers run (a `serve` with WORKER_CONCURRENCY=0), whose /readyz then
   * has no `held_sources`: an empty list would say "none held" of holds in the `work` process.
   */
  heldSources?: (now: number) => SourceHold[];
  /** Each delivery request's time on the event loop (the processing pacer weighs the deliveries' share). */
  onLoopWork?: (ms: number) => void;
}

/**
 * The receiver's Hono app (deliveries, /healthz and /readyz, /metrics unless METRICS_PORT), the
 * app of /metrics on METRICS_PORT when it is set, and the handler of their unhandled errors.
 */
export function createHttpApp({ config, database, clock, logger, metrics, refusals, committer, lockHold, fileWatch, state, heldSources, onLoopWork }: HttpAppDeps) {
  const app = new Hono<{ Bindings: Partial<HttpBindings> }>();
  const bodyBudget = new BodyBudget(config.maxBodyBytesInFlight);
  metrics.bodiesHeld.bytes = () => bodyBudget.inFlight;
  const webhookHandler = createWebhookHandler({
    verifier: createVerifier(config.sources, clock),
    committer,
    clock,
    logger,
    metrics,
    refusals,
    maxBodyBytes: config.maxBodyBytes,
    bodyBudget,
    draining: () => state.draining,
    ...(onLoopWork ? { onLoopWork } : {}),
  });
  // With and without a trailing slash: an endpoint registered as `.../webhooks/` would otherwise
  // answer 404 to every delivery, and the service drops an event after 6 failed attempts.
  for (const path of ['/webhooks', '/webhooks/']) {
    app.post(path, webhookHandler);
    app.all(path, (c) => c.json({ error: 'method_not_allowed', message: 'use POST' }, 405, { Allow: 'POST' }));
  }
  // Paused sources are reported, never failing readiness: deliveries must keep being accepted.
  // Not the detail: /readyz is unauthenticated, and the detail is the service's own error text
  // (`status` and the CLI's `status` show it).
  const pausedStmt = database.ingestSqlite.prepare('SELECT source, status, paused_at FROM source_pauses ORDER BY source');
  const disabledSinksStmt = database.ingestSqlite.prepare(
    // Not the reason: /readyz is unauthenticated, and the reason names the consumer's host.
    'SELECT sink, disabled_at FROM sink_state WHERE disabled_at IS NOT NULL ORDER BY sink',
  );
  // Configured sinks only, as in the metrics: a sink removed from the configuration while disabled
  // keeps its sink_state row (for `sinks list`), but is no longer this receiver's to report.
  const configuredSinks = new Set(config.sinks.map((s) => s.name));
  const disabledSinks = () => (disabledSinksStmt.all() as { sink: string }[]).filter((r) => configuredSinks.has(r.sink));
  // Held by the workers of this process (in their memory: not known to a `serve` with
  // WORKER_CONCURRENCY=0), reported like the pauses: the receiver still ingests meanwhile.
  const held = (read: (now: number) => SourceHold[]) =>
    read(clock.now())
      .sort((a, b) => a.source.localeCompare(b.source) || a.reason.localeCompare(b.reason))
      .map((h) => ({ source: h.source, reason: h.reason, until: isoTime(h.untilMs) }));
  const extras = () => ({ paused_sources: pausedStmt.all(), disabled_sinks: disabledSinks(), ...(heldSources ? { held_sources: held(heldSources) } : {}) });
  registerHealthRoutes(app, database, extras, () => state.storageFailure, {
    hold: lockHold,
    boundMs: config.writeTimeoutMs,
    clock,
  }, () => fileWatch.check());
  const metricsRoute = createMetricsRoute({ config, database, clock, metrics, pausedStmt });
  const onError = (err: Error, c: Context) => {
    logger.error({ err: err.message, path: c.req.path }, 'unhandled error');
    return c.json({ error: 'internal_error', message: 'internal error' }, 500);
  };
  // With METRICS_PORT, /metrics is served on that port only: the webhook port is public.
  let metricsApp: Hono | null = null;
  if (config.metricsPort === null) app.get('/metrics', metricsRoute);
  else {
    metricsApp = metricsOnlyApp(metricsRoute, 'METRICS_PORT', onError);
  }
  app.notFound((c) => c.json({ error: 'not_found', message: `no route for ${c.req.method} ${c.req.path}` }, 404));
  app.onError(onError);
  return { app, metricsApp, onError };
}
