import { statSync, statfsSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Context } from 'hono';
import type { Statement } from 'better-sqlite3';
import type { Config } from '../config/loadConfig.js';
import type { OpenDatabase } from '../db/openDatabase.js';
import { processingBacklog } from '../handlers/foldNewEvents.js';
import type { Metrics } from '../observability/metrics.js';
import { JobKind } from '../queue/jobKinds.js';
import { oldestUndeliveredAgeMs, sinkDisabled } from '../sinks/deliveryRecords.js';
import type { Clock } from '../util/clock.js';
import { realPathOf } from '../util/realPath.js';

export interface MetricsRouteDeps {
  config: Config;
  database: OpenDatabase;
  clock: Clock;
  metrics: Metrics;
  /** The paused sources, as /readyz reports them (one statement for both). */
  pausedStmt: Statement;
}

/** GET /metrics: the counters, and the gauges read from the database at each scrape. */
export function createMetricsRoute({ config, database, clock, metrics, pausedStmt }: MetricsRouteDeps): (c: Context) => Promise<Response> {
  // Two walks, so they run on the checkpointer thread (OffLoopReads) and the scrape awaits their
  // rows; on this connection, as before, only when the thread cannot answer (none, gone, or not
  // within 2 s): exact either way. The job counts walk jobs_kind_ready over every pending, running
  // and dead job: 30 ms warm, 420-580 ms with the file out of the page cache, at 250,000 dead
  // letters and 50,000 pending reads (the loop stalled that long at each scrape). The quarantine
  // count walks an index of every quarantined delivery, kept for ever: 1.7 ms warm, 142 ms cold at 100,000.
  const depthSql = "SELECT state, kind, COUNT(*) AS n FROM jobs WHERE state IN ('pending', 'running', 'dead') GROUP BY state, kind";
  const depthStmt = database.ingestSqlite.prepare(depthSql);
  const quarantinedSql = 'SELECT COUNT(*) AS n FROM quarantine';
  const quarantinedStmt = database.ingestSqlite.prepare(quarantinedSql);
  // Both on indexes (jobs_kind_ready, jobs_lease): a lookup, not a walk of the queue.
  const oldestDueStmt = database.ingestSqlite.prepare("SELECT MIN(run_at) FROM jobs WHERE state = 'pending' AND kind = ? AND run_at <= ?").pluck();
  const leasesExpiredStmt = database.ingestSqlite.prepare("SELECT COUNT(*) FROM jobs WHERE state = 'running' AND lease_expires_at < ?").pluck();
  // The file SQLite opened: a DATABASE_PATH that is a symlink (to a volume mounted elsewhere) has
  // its -wal beside the file it points to, on that file's filesystem, not beside the link.
  const opened = database.ingestSqlite.memory ? null : realPathOf(database.ingestSqlite.name);
  return async (c: Context) => {
    // First: a scrape beside this one resets the gauges, so each is reset and set with no await between.
    const [offDepth, offQuarantined] = await Promise.all([database.offLoop.all(depthSql), database.offLoop.all(quarantinedSql)]);
    const depth = offDepth ?? depthStmt.all();
    metrics.quarantined.set(((offQuarantined?.[0] ?? quarantinedStmt.get()) as { n: number }).n);
    metrics.pausedSources.reset();
    for (const s of config.sources) metrics.pausedSources.set({ source: s.name }, 0);
    for (const p of pausedStmt.all() as { source: string }[]) metrics.pausedSources.set({ source: p.source }, 1);
    if (opened !== null) {
      metrics.walBytes.set(statSync(`${opened}-wal`, { throwIfNoEntry: false })?.size ?? 0);
      // The space left, before it runs out: a full disk otherwise shows only once checkpoints and
      // commits fail. bavail, not bfree: the blocks this (unprivileged) process may use, as df says.
      // Its folder gone (removed under the receiver, which /readyz says): NaN, no figure, rather than
      // no scrape (reset() would say 0 bytes left, and a threshold on the bytes alone would fire).
      try {
        const fs = statfsSync(dirname(opened));
        metrics.filesystemAvail.set(fs.bavail * fs.bsize);
        metrics.filesystemSize.set(fs.blocks * fs.bsize);
      } catch {
        metrics.filesystemAvail.set(Number.NaN);
        metrics.filesystemSize.set(Number.NaN);
      }
    }
    const backlog = await processingBacklog(database.db);
    metrics.unprocessedEvents.set(backlog.events);
    const nowMs = clock.now();
    const ageOf = (iso: string | null | undefined) => (iso ? Math.max(0, (nowMs - Date.parse(iso)) / 1000) : 0);
    metrics.unprocessedAge.set(ageOf(backlog.oldestReceivedAt));
    const nowIso = new Date(nowMs).toISOString();
    metrics.leasesExpired.set(leasesExpiredStmt.get(nowIso) as number);
    metrics.oldestDue.reset();
    metrics.queueDepth.reset();
    // Every kind's pending, running and dead series exist, at 0 when empty: `sum()` of no series is
    // no value in PromQL, and an alert adding it to another (the backlog one) would never fire.
    for (const kind of [JobKind.processEvent, JobKind.fetchResult, ...config.sinks.map((s) => `sink:${s.name}`)]) {
      for (const state of ['pending', 'running', 'dead']) metrics.queueDepth.set({ state, kind }, 0);
      metrics.oldestDue.set({ kind }, ageOf(oldestDueStmt.get(kind, nowIso) as string | null));
    }
    // Not `done` jobs nor delivered messages: counting them walks all history on the loop that
    // answers the service, every scrape (180 ms at a million of each); their counters are
    // receiver_job_runs_total and receiver_sink_deliveries_total.
    for (const d of depth as { state: string; kind: string; n: number }[]) metrics.queueDepth.set({ state: d.state, kind: d.kind }, d.n);
    metrics.sinkLag.reset();
    metrics.sinkDisabled.reset();
    for (const s of config.sinks) {
      metrics.sinkLag.set({ sink: s.name }, ((await oldestUndeliveredAgeMs(database.db, nowMs, [s.name])) ?? 0) / 1000);
      metrics.sinkDisabled.set({ sink: s.name }, (await sinkDisabled(database.db, s.name)) ? 1 : 0);
    }
    return c.text(await metrics.registry.metrics(), 200, { 'Content-Type': metrics.registry.contentType });
  };
}

