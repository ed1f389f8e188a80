import { WAIT_NOTES } from '../../handlers/fetchResult.js';
import { sql } from 'kysely';
import { processingBacklog } from '../../handlers/foldNewEvents.js';
import { JobKind } from '../../queue/jobKinds.js';
import { databasePathOf } from '../cliConfig.js';
import { openCliDatabase } from '../cliDatabase.js';
import { formatAge, oneLine, printJson, printTable, shownError, type CliIo } from '../io.js';
import { configuredSinks, sinkRows, unlistedSinkState } from '../sinkOps.js';

export interface StatusOptions {
  database?: string;
  json?: boolean;
}

/** `status`: a glance at health, read from the database (works while the receiver runs). */
export async function runStatus(io: CliIo, o: StatusOptions): Promise<number> {
  const path = databasePathOf(io.env, o.database);
  const { sinks, problems } = configuredSinks(io.env, path);
  // A broken sink configuration does not hide the rest of the picture.
  for (const p of problems) io.err(`warning: ${p} (sinks shown from the database only)`);
  const database = openCliDatabase(path, { readOnly: true });
  try {
    const now = Date.now();
    // Every figure in one read transaction, so all from one moment: read one after another beside a
    // receiver storing events, they disagreed ("events 19313" above "19554 events waiting").
    const { report, byType, backlog, oldest } = await database.db.transaction().execute(async (db) => {
      // When the last delivery was stored: refused deliveries (a signing secret rotated at the
      // service and not configured here, a proxy stripping the webhook-* headers) leave no row, so
      // this is all the database can say of them.
      const latest = await db.selectFrom('events').select((eb) => eb.fn.max('received_at').as('at')).executeTakeFirst();
      const latestAt = (latest?.at as string | null | undefined) ?? null;
      const byType = await db.selectFrom('events').select(['event_type', (eb) => eb.fn.countAll<number>().as('n')]).groupBy('event_type').orderBy('event_type').execute();
      const byState = await db.selectFrom('jobs').select(['kind', 'state', (eb) => eb.fn.countAll<number>().as('n')]).groupBy(['kind', 'state']).orderBy('kind').execute();
      const count = async (table: 'quarantine' | 'event_conflicts') =>
        Number((await db.selectFrom(table).select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n);
      const apps = await db
        .selectFrom('applications')
        .select([(eb) => eb.fn.countAll<number>().as('total'), sql<number>`COALESCE(SUM(needs_review), 0)`.as('needs_review')])
        .executeTakeFirstOrThrow();
      const oldest = await db
        .selectFrom('jobs')
        .select(['id', 'kind', 'event_id', 'source', 'created_at', 'run_at', 'attempts', 'last_error'])
        .where('state', '=', 'pending')
        .orderBy('created_at')
        .orderBy('id')
        .limit(1)
        .executeTakeFirst();
      // Result reads waiting, and failing: a failure counts an attempt and leaves its error in
      // last_error; a read that only waits (the poll spacing, a result still processing, a pause)
      // leaves a note or has its attempt refunded.
      const notes = Object.values(WAIT_NOTES);
      const failing = sql<boolean>`attempts > 0 AND last_error IS NOT NULL AND last_error NOT IN (${sql.join(notes)})`;
      const reads = await db
        .selectFrom('jobs')
        .select([(eb) => eb.fn.countAll<number>().as('pending'), sql<number>`COALESCE(SUM(${failing}), 0)`.as('failing')])
        .where('kind', '=', 'fetch_result')
        .where('state', '=', 'pending')
        .executeTakeFirstOrThrow();
      // The same by source: with several organizations, which one's reads are failing (its API
      // down, its key refused) or waiting (a source removed from CONFIG_FILE).
      const readsBySource = await db
        .selectFrom('jobs')
        .select(['source', (eb) => eb.fn.countAll<number>().as('pending'), sql<number>`COALESCE(SUM(${failing}), 0)`.as('failing'), sql<string | null>`MAX(CASE WHEN ${failing} THEN updated_at END)`.as('latest_failure_at')])
        .where('kind', '=', 'fetch_result')
        .where('state', '=', 'pending')
        .groupBy('source')
        .orderBy('source')
        .execute();
      const latestFailure = await db
        .selectFrom('jobs')
        .select(['last_error', 'updated_at'])
        .where('kind', '=', 'fetch_result')
        .where('state', '=', 'pending')
        .where(failing)
        .orderBy('updated_at', 'desc')
        .limit(1)
        .executeTakeFirst();
      // Results by state over the four result tables: given_up and unavailable are final answers a
      // consumer was told, and given_up ones may be worth reading again (replay).
      const resultStates = await sql<{ state: string; n: number }>`SELECT state, COUNT(*) AS n FROM (
          SELECT state FROM interview_results UNION ALL SELECT state FROM cv_evaluation_results
          UNION ALL SELECT state FROM insights_results UNION ALL SELECT state FROM legacy_interview_results)
        GROUP BY state`.execute(db);
      const results: Record<string, number> = { ready: 0, processing: 0, unavailable: 0, given_up: 0 };
      for (const r of resultStates.rows) results[r.state] = Number(r.n);
      const backlog = await processingBacklog(db);
      // A pause's detail is the message of the read that paused it, stored as its last_error is: shown as that is.
      const paused = (await db.selectFrom('source_pauses').selectAll().orderBy('source').execute()).map((p) => ({ ...p, detail: shownError(p.detail) }));
      const sinkList = await sinkRows(db, sinks, now);

      const jobsByState: Record<string, number> = { pending: 0, running: 0, done: 0, dead: 0 };
      for (const r of byState) jobsByState[r.state] = (jobsByState[r.state] ?? 0) + Number(r.n);
      // Running jobs whose lease ran out: their process died or hangs (a live worker, or the next
      // start, takes them back).
      const leaseExpired = Number(
        (await db.selectFrom('jobs').select((eb) => eb.fn.countAll<number>().as('n')).where('state', '=', 'running').where('lease_expires_at', '<', new Date(now).toISOString()).executeTakeFirst())?.n ?? 0,
      );
      const report = {
        database: path,
        events: {
          total: byType.reduce((a, r) => a + Number(r.n), 0),
          by_type: Object.fromEntries(byType.map((r) => [r.event_type, Number(r.n)])),
          latest_received_at: latestAt,
          latest_received_age_ms: latestAt ? Math.max(0, now - Date.parse(latestAt)) : null,
        },
        processing: {
          events_waiting: backlog.events,
          oldest_waiting_age_ms: backlog.oldestReceivedAt ? Math.max(0, now - Date.parse(backlog.oldestReceivedAt)) : null,
        },
        jobs: { by_state: jobsByState, by_kind: byState.map((r) => ({ kind: r.kind, state: r.state, count: Number(r.n) })), running_lease_expired: leaseExpired },
        result_reads: {
          pending: Number(reads.pending),
          failing: Number(reads.failing),
          latest_failure: latestFailure ? { ...latestFailure, last_error: shownError(latestFailure.last_error) } : null,
          by_source: readsBySource.map((r) => ({ source: r.source, pending: Number(r.pending), failing: Number(r.failing), latest_failure_at: r.latest_failure_at })),
        },
        results,
        dead_letters: jobsByState['dead'] ?? 0,
        quarantined: await count('quarantine'),
        conflicts: await count('event_conflicts'),
        applications: { total: Number(apps.total), needs_review: Number(apps.needs_review) },
        sinks: sinkList,
        paused_sources: paused,
        oldest_pending_job: oldest ? { ...oldest, last_error: shownError(oldest.last_error), age_ms: Math.max(0, now - Date.parse(oldest.created_at)) } : null,
      };
      return { report, byType, backlog, oldest };
    });
    const { latest_received_at: latestAt } = report.events;
    const { by_state: jobsByState, running_lease_expired: leaseExpired } = report.jobs;
    const { latest_failure: latestFailure } = report.result_reads;
    const { results, paused_sources: paused, sinks: sinkList } = report;
    if (o.json) {
      printJson(io, report);
      return 0;
    }
    io.out(`database       ${path}`);
    io.out(`events         ${report.events.total}${latestAt ? ` (latest stored ${formatAge(report.events.latest_received_age_ms!)} ago, at ${latestAt})` : ''}`);
    for (const r of byType) io.out(`  ${oneLine(r.event_type).padEnd(28)} ${r.n}`);
    io.out(
      `processing     ${backlog.events === 0 ? 'caught up' : `${backlog.events} event${backlog.events === 1 ? '' : 's'} waiting, oldest stored ${formatAge(report.processing.oldest_waiting_age_ms!)} ago`}`,
    );
    io.out(
      `jobs           ${Object.entries(jobsByState)
        .map(([k, v]) => (k === 'running' && leaseExpired > 0 ? `running ${v} (${leaseExpired} past their lease: their process died or hangs)` : `${k} ${v}`))
        .join(', ')}`,
    );
    io.out(
      `result reads   ${
        report.result_reads.pending === 0
          ? 'none waiting'
          : `${report.result_reads.pending} waiting, ${report.result_reads.failing} failing${latestFailure ? ` (latest, ${latestFailure.updated_at}: ${oneLine(latestFailure.last_error ?? '')})` : ''}`
      }`,
    );
    // By source when more than one has reads waiting, or the one that has is a named source of
    // CONFIG_FILE: with several organizations, the one whose API is down for good is often the
    // only one left with reads waiting, and the line above does not say whose they are. The
    // environment's source alone (`default`) is the line above.
    const bySource = report.result_reads.by_source;
    if (bySource.length > 1 || bySource.some((r) => r.source !== 'default')) {
      const width = Math.max(...bySource.map((r) => oneLine(r.source ?? '(none)').length));
      for (const r of bySource) {
        io.out(`  ${oneLine(r.source ?? '(none)').padEnd(width)}  ${r.pending} waiting, ${r.failing} failing${r.latest_failure_at ? ` (latest at ${r.latest_failure_at})` : ''}`);
      }
    }
    io.out(
      `results        ready ${results['ready']}, processing ${results['processing']}, unavailable ${results['unavailable']}, given up ${results['given_up']}${
        (results['given_up'] ?? 0) > 0 ? '   (given up: `replay --application <id>` reads one again)' : ''
      }`,
    );
    io.out(`dead letters   ${report.dead_letters}${report.dead_letters > 0 ? '   (dead-letters list)' : ''}`);
    io.out(`quarantined    ${report.quarantined}${report.quarantined > 0 ? '   (quarantine list)' : ''}`);
    io.out(`conflicts      ${report.conflicts}${report.conflicts > 0 ? '   (conflicts list)' : ''}`);
    io.out(`applications   ${report.applications.total} (${report.applications.needs_review} ${report.applications.needs_review === 1 ? 'needs' : 'need'} review)`);
    io.out(`oldest pending ${oldest ? oldestJobLine(oldest, report.oldest_pending_job!, paused) : 'none'}`);
    io.out(`paused sources ${paused.length === 0 ? 'none' : paused.length}`);
    // Status 0: no request was made, the source is not configured (renamed or removed).
    for (const p of paused) io.out(`  ${p.source}: ${pauseCause(p)} since ${p.paused_at} (${oneLine(p.detail)})`);
    if (sinkList.length === 0) io.out('sinks          none configured');
    else {
      io.out('sinks');
      printTable(
        io,
        ['sink', 'type', 'state', 'pending', 'failing', 'delivered', 'dead', 'oldest undelivered'],
        sinkList.map((s) => [
          s.name,
          s.type,
          !s.configured ? unlistedSinkState(io.env, s, problems.length > 0, true) : s.enabled ? (s.failing > 0 ? 'failing' : 'enabled') : `DISABLED (${s.disabled_reason ?? ''})`,
          s.pending,
          s.failing,
          s.delivered,
          s.dead,
          s.oldest_undelivered_ms === null ? null : formatAge(s.oldest_undelivered_ms),
        ]),
      );
    }
    return 0;
  } finally {
    await database.close();
  }
}

/**
 * The oldest pending job, with its source (a result read's organization; a sink job's source is
 * its kind) and, when its source is paused, that it waits on the pause: its run_at is then past
 * and its last note (`result still processing`, say) is from its run before the pause.
 */
function oldestJobLine(
  job: { id: number; kind: string; source: string | null; run_at: string },
  shown: { age_ms: number; last_error: string | null },
  paused: readonly { source: string; paused_at: string; status: number }[],
): string {
  const of = job.source !== null && job.source !== job.kind ? ` of source ${oneLine(job.source)}` : '';
  // Only result reads wait on a pause: folds and sink deliveries go on (see Worker's gatedKinds).
  const pause = job.kind === JobKind.fetchResult ? paused.find((p) => p.source === job.source) : undefined;
  const note = shown.last_error ? oneLine(shown.last_error) : null;
  const waits = pause ? `waits: source ${oneLine(pause.source)} paused since ${pause.paused_at}, ${pauseCause(pause)}` : null;
  const why = waits ? ` (${waits}${note ? `; last note: ${note}` : ''})` : note ? ` (${note})` : '';
  return `job ${job.id} ${job.kind}${of}, queued ${formatAge(shown.age_ms)} ago, runs at ${job.run_at}${why}`;
}

/** A pause's cause as status says it: status 0 is a source not configured (no request was made). */
const pauseCause = (p: { status: number }): string => (p.status === 0 ? 'not configured' : `HTTP ${p.status}`);
