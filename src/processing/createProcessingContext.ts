import type { AppDeps } from '../app.js';
import type { Config } from '../config/loadConfig.js';
import type { OpenDatabase } from '../db/openDatabase.js';
import { DEFAULT_PROCESSING, type ProcessingContext } from '../handlers/ProcessingContext.js';
import { createHiringClient, type HiringClient } from '../hiring/HiringClient.js';
import { createNodeHttpClient } from '../http/httpClient.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { JobQueue } from '../queue/JobQueue.js';
import { FanOut } from '../sinks/FanOut.js';
import type { Clock } from '../util/clock.js';
import { SourcePauses } from './SourcePauses.js';

export interface ProcessingContextDeps {
  config: Config;
  database: OpenDatabase;
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
  /** createApp's seams: leaseMs, http, sinks, processing. */
  deps: Pick<AppDeps, 'leaseMs' | 'http' | 'sinks' | 'processing'>;
}

/**
 * The processing context of the handlers, and what it is built on: the job queue, the source
 * pauses, the outbound HTTP client (`ownHttp` when this receiver made it), the hiring API
 * clients, the fan-out to sinks, and the abort of result reads at stop (`processingShutdown`).
 */
export function createProcessingContext({ config, database, clock, logger, metrics, deps }: ProcessingContextDeps) {
  const queue = new JobQueue(database.db, clock, deps.leaseMs ?? 60_000);
  const pauses = new SourcePauses(database.db, clock);
  // One keep-alive client for the result reads and the http sinks, closed at stop.
  const ownHttp = deps.http ? null : createNodeHttpClient({ proxy: config.outboundProxy });
  const http = deps.http ?? ownHttp!;
  const clients = new Map<string, HiringClient>();
  for (const src of config.sources) {
    if (src.apiUrl && src.apiKey) clients.set(src.name, createHiringClient({ baseUrl: src.apiUrl, apiKey: src.apiKey, http, now: () => clock.now() }));
  }
  const fanOut = new FanOut({
    db: database.db,
    queue,
    clock,
    logger,
    sinks: config.sinks,
    http,
    onJobSettled: (job, outcome) => {
      metrics.jobsSettled.inc({ kind: job.kind, outcome });
      metrics.sinkDeliveries.inc({ sink: job.kind.slice('sink:'.length), outcome });
    },
    ...deps.sinks,
  });
  // Aborted when stop()'s grace has passed: a result read still waiting on the service gives up.
  const processingShutdown = new AbortController();
  const processing: ProcessingContext = {
    db: database.db,
    sqlite: database.sqlite,
    clock,
    clients,
    shutdown: processingShutdown.signal,
    onSettled: fanOut.onSettled,
    onApiCall: (source, resource, outcome, elapsedMs) => {
      metrics.apiCalls.inc({ source, resource, outcome });
      metrics.apiCallDuration.observe({ resource }, elapsedMs / 1000);
    },
    logger,
    ...DEFAULT_PROCESSING,
    giveUpAfterMs: config.resultGiveUpMs,
    ...deps.processing,
  };
  return { queue, pauses, ownHttp, fanOut, processingShutdown, processing };
}
