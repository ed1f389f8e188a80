import type { Context, ErrorHandler, Hono } from 'hono';
import { Registry } from 'prom-client';
import { WORK_METRICS, type Metrics } from '../observability/metrics.js';
import { metricsOnlyApp } from './metricsOnlyApp.js';

/**
 * For a `work` process: its own counters (job runs, result reads, sink deliveries, its process
 * and event loop) on their own port, WORK_METRICS_PORT. Not the database-derived gauges
 * (queue depth, backlog, sink lag...): `serve` reports those, and scraping both processes
 * would count them twice in the runbook's sums.
 */
export function workMetricsApp(metrics: Metrics, onError: ErrorHandler): Hono {
  // Only what a `work` process counts, and Node's process and event-loop series: the ingest
  // series and the database's gauges would sit at 0 here, and read wrong in any min() or avg().
  const own = new Registry();
  for (const { name } of metrics.registry.getMetricsAsArray()) {
    if (!name.startsWith('receiver_') || WORK_METRICS.has(name)) own.registerMetric(metrics.registry.getSingleMetric(name)!);
  }
  const ownCounters = async (c: Context) => c.text(await own.metrics(), 200, { 'Content-Type': own.contentType });
  return metricsOnlyApp(ownCounters, 'WORK_METRICS_PORT', onError);
}
