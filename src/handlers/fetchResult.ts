import type { Transaction } from 'kysely';
import { directStatements } from '../db/directStatements.js';
import { isoMovedBack } from '../db/sqliteHelpers.js';
import type { Database, ResultState } from '../db/schema.js';
import { isDecisionError, PauseSourceError, PermanentError, RetryableError, RetryAfterError } from '../hiring/errors.js';
import { isTransientClientStatus } from '../hiring/decideOutcome.js';
import { describeOutcome, NOT_FOUND_MARK, outcomeToError } from '../hiring/outcomeToError.js';
import { applicationIdProblem } from '../hiring/resourcePath.js';
import type { HiringResource } from '../hiring/types.js';
import { rebuildApplication } from '../processing/rebuildApplication.js';
import { headlineOf, nullHeadline, RESULT_TABLE } from '../processing/resources.js';
import { preparedJobWritesOn, type ClaimedJob } from '../queue/JobQueue.js';
import { JobKind } from '../queue/jobKinds.js';
import { SaidOnce } from '../util/collections.js';
import { sameJson } from '../util/json.js';
import { failedBeforeRequest, type HandlerResult } from '../queue/Worker.js';
import { resultDigest, settleEvent, type ProcessingContext } from './ProcessingContext.js';

interface Payload {
  event_id: string;
  application_id: string;
  resource: HiringResource;
  /** From `replay`: ask the service again even if a final result is stored. */
  refetch?: boolean;
  /** Set when an operator ran the dead-lettered job again (JobQueue.retryDeadLetters). */
  requeued_at?: string;
}

const FINAL: ReadonlySet<ResultState> = new Set(['ready', 'unavailable', 'given_up']);
/** v1 InterviewCallStatus values (spec 3.2) of a call that has not finished yet. */
const UNFINISHED_CALL: ReadonlySet<string> = new Set(['pending', 'in_progress', 'processing']);
/** v1 PipelinePhase values (spec 3.1) before the interview's outcome is known. */
const UNFINISHED_PHASE: ReadonlySet<string> = new Set(['awaiting_booking', 'outreach', 'scheduled', 'calling', 'in_progress', 'evaluating']);

/**
 * Why a v1 interview call detail (spec 2.3: no readiness envelope) is not final yet, or null when
 * it is. Phase `evaluating` is unfinished whatever the status; otherwise `status` decides. It is
 * optional there: without it, `pipeline_phase` decides, and without either, a call with no
 * `output` yet is taken as unfinished (read again, up to RESULT_GIVE_UP_HOURS).
 */
export function unfinishedLegacyCall(data: Record<string, unknown>): string | null {
  const status = typeof data.status === 'string' ? data.status : null;
  const phase = typeof data.pipeline_phase === 'string' ? data.pipeline_phase : null;
  // The call ended (`completed`) and is being scored: its output, the score, is still to come.
  // interview_v2.completed is sent when the interview finishes (spec 6.4), and no event is known
  // to follow the scoring: taken as final, the call was kept without its score, never read again.
  if (status !== null && UNFINISHED_CALL.has(status)) return `interview call ${status}`;
  if (phase === 'evaluating') return 'interview call in phase evaluating';
  if (status !== null) return null;
  if (phase !== null) return UNFINISHED_PHASE.has(phase) ? `interview call in phase ${phase}` : null;
  return data.output === null || data.output === undefined ? 'interview call has no status, phase or output yet' : null;
}

/**
 * What a read that waits (not fails) leaves in its job's last_error. A failure counts an attempt
 * and leaves its error; these do not, so `status` tells a failing read from a waiting one.
 */
export const WAIT_NOTES = {
  spacing: 'waiting for the 30 s poll spacing',
  processing: 'result still processing',
  interrupted: 'interrupted: the receiver was stopping (SHUTDOWN_GRACE_MS passed)',
} as const;

/**
 * Delay before the next poll of a result still processing: 30 s more than this read has waited
 * so far (30 s, 60 s, 2 min, 4 min ... up to the cap), counted from when the read began (the
 * event's arrival, a replay, an operator's retry). Not from the polls sent: failed reads during
 * an outage, or probes of a paused key, would stretch it to the cap (a read 3 min into an
 * outage was next polled 16 min later), and so would every poll of earlier events.
 */
export function pollDelay(waitedMs: number, minMs: number, maxMs: number): number {
  return Math.min(maxMs, minMs + Math.max(0, waitedMs));
}

/**
 * Reads the full result behind an event from the scoring GET and records it.
 * The 30-second spacing is enforced per (application, resource) through the
 * result row's last_polled_at, so duplicate events and replays wait their turn
 * instead of polling faster; a result already final since this event arrived
 * is reused without a request.
 */
export function createFetchResultHandler(ctx: ProcessingContext) {
  const read = createRead(ctx);
  const newerRead = ctx.sqlite.prepare(NEWER_READ);
  return async (job: ClaimedJob): Promise<HandlerResult> => {
    // A replay that came while this read ran queued a newer read of the event (processEvent.ts):
    // if this one would wait or fail, it ends here and that one carries on, so the event has one
    // read to reschedule or dead-letter, not two. A refused key still pauses its source.
    let outcome: HandlerResult;
    try {
      outcome = await read(job);
    } catch (err) {
      if (isDecisionError(err) && err.decision === 'pause_source') throw err;
      if (job.event_id !== null && newerRead.get(job.event_id, job.id) !== undefined) {
        const yielded = yieldTo(ctx, job, (err as Error).message);
        // The service's wait holds every read of the source, the newer one included: the worker
        // applies it, and ends this job instead of retrying it.
        if (err instanceof RetryAfterError && err.throttlesSource) throw Object.assign(err, { superseded: true });
        return yielded;
      }
      throw err;
    }
    if (outcome && 'rescheduleAt' in outcome && job.event_id !== null && newerRead.get(job.event_id, job.id) !== undefined) {
      return yieldTo(ctx, job, outcome.note ?? 'waiting');
    }
    return outcome;
  };
}

/** A pending read of the same event queued after this job (jobs_event covers it: the literal kind term). */
const NEWER_READ = `SELECT 1 FROM jobs WHERE event_id = ? AND kind <> '${JobKind.processEvent}' AND kind = '${JobKind.fetchResult}' AND state = 'pending' AND id > ? LIMIT 1`;

function yieldTo(ctx: ProcessingContext, job: ClaimedJob, why: string): HandlerResult {
  ctx.logger?.info({ job_id: job.id, event_id: job.event_id, outcome: why }, 'result read ends: a newer read of the event (a replay) carries on');
  // Says nothing of whether the source's key works.
  return { untested: true };
}

function createRead(ctx: ProcessingContext) {
  // Readiness statuses the spec does not list, already logged (once each per process and resource).
  const unrecognizedLogged = new SaidOnce();
  return async (job: ClaimedJob): Promise<HandlerResult> => {
    const p = JSON.parse(job.payload) as Payload;
    const table = RESULT_TABLE[p.resource];
    const now = ctx.clock.now();
    const nowIso = new Date(now).toISOString();

    const row = await ctx.db.selectFrom(table).selectAll().where('application_id', '=', p.application_id).executeTakeFirst();
    const event = await ctx.db.selectFrom('events').select(['received_at']).where('id', '=', p.event_id).executeTakeFirst();
    if (!row || !event) throw failedBeforeRequest(new PermanentError(`nothing to fetch for event ${p.event_id}: result row or event missing`));

    // Before any reuse of the row: a result read with another organization's key is not this event's.
    // A source not configured is not judged here: its read pauses, as below (no sink can filter on it).
    if (job.source !== null && row.source !== job.source && ctx.clients.has(job.source)) {
      const foreign = await otherSourcesResult(ctx, job.source, p, row.source);
      if (foreign) return foreign;
    }
    // A replay, or an operator's retry of a dead letter, asks the service again.
    const askAgain = p.refetch === true || p.requeued_at !== undefined;
    // A result fetched "after now" was fetched before the wall clock went back: it says nothing of
    // whether it is newer than this event (a re-score announced since would keep the old result).
    if (!askAgain && FINAL.has(row.state) && row.fetched_at !== null && row.fetched_at >= event.received_at && row.fetched_at <= nowIso) {
      await ctx.db.transaction().execute(async (trx) => {
        await settleEvent(ctx, trx, p.event_id, p.resource, { digest: resultDigest(row) });
        dropAnsweredDeadReads(ctx, trx, job.id, p.event_id, row.state);
      });
      // No request: says nothing of whether the source's key works (a paused source stays paused).
      return { untested: true };
    }
    // Its last try got a 404, and the application's deletion has been folded since (deliveries are
    // unordered: the read had been waiting out its retry, a minute or more, when the deletion came;
    // the fold brought it forward, see processEvent): that 404 was final (spec 4.2), and no request
    // is needed to settle it. No request: says nothing of whether the source's key works (as above:
    // taken as a read that went through, it resumed a paused source whose key was still refused).
    if (job.last_error?.includes(NOT_FOUND_MARK) && (await isDeleted(ctx, p.application_id))) {
      await settleDeletedRead(ctx, job, p, row, nowIso);
      return { untested: true };
    }
    // The read's age, for its poll spacing and its give-up: from this event's arrival (a result
    // re-announced days later gets its own window), a replay's from when it was queued, a retried
    // dead letter's from the retry.
    const since = Math.max(
      Date.parse(event.received_at),
      p.refetch ? Date.parse(job.created_at) : 0,
      p.requeued_at ? Date.parse(p.requeued_at) : 0,
    );
    // An id no request can name (".." would change the request's path): no retry will read it.
    const idProblem = applicationIdProblem(p.application_id);
    if (idProblem !== null) throw failedBeforeRequest(new PermanentError(`application id ${JSON.stringify(p.application_id)} cannot be read from the service: it ${idProblem}`));
    const client = job.source ? ctx.clients.get(job.source) : undefined;
    if (!client) {
      const missing = `source ${job.source ?? '(none)'} has no HIRING_API_URL / HIRING_API_KEY configured`;
      // No read can ever answer: past the give-up window it is a dead letter (given_up, visible,
      // retried once the source is configured), not a pause for ever.
      if (now - since > ctx.giveUpAfterMs) throw failedBeforeRequest(new PermanentError(`${missing} for ${Math.round(ctx.giveUpAfterMs / 3_600_000)} h`));
      // Not "API key refused": no key was sent, and a new key would not help. The configuration
      // requires both for every source, so this is a source renamed or removed since its events came.
      throw new PauseSourceError(missing, {
        status: 0,
        summary: `source ${job.source ?? '(none)'} is not configured (renamed or removed since its events were stored): its result reads are paused until a source of that name is configured again (CONFIG_FILE, with api_url and api_key), and given up after RESULT_GIVE_UP_HOURS`,
      });
    }
    // Reserve the poll slot before the request, atomically: two jobs for the same (application,
    // resource) (a duplicate event, a replay) cannot both pass the 30 s check (spec 8).
    const reserved = await ctx.db
      .updateTable(table)
      .set((eb) => ({ last_polled_at: nowIso, polls: eb('polls', '+', 1), updated_at: nowIso }))
      .where('application_id', '=', p.application_id)
      .where((eb) => eb.or([eb('last_polled_at', 'is', null), eb('last_polled_at', '<=', new Date(now - ctx.minPollIntervalMs).toISOString())]))
      .executeTakeFirst();
    if (reserved.numUpdatedRows === 0n) {
      const last = await ctx.db.selectFrom(table).select('last_polled_at').where('application_id', '=', p.application_id).executeTakeFirst();
      const allowedAt = (last?.last_polled_at ? Date.parse(last.last_polled_at) : now) + ctx.minPollIntervalMs;
      return { rescheduleAt: Math.max(allowedAt, now + 1), note: WAIT_NOTES.spacing, untested: true };
    }

    let outcome = await client.fetchResource(p.resource, p.application_id, ctx.shutdown ? { signal: ctx.shutdown } : {});
    // Spec 8's 30 s are the service's: the request reached it at some moment up to now, not at the
    // reservation (a wait for the write lock, a slow connection came between). The slot is moved
    // to the answer's time, so the next read cannot reach the service sooner than 30 s after this one.
    // The next read of this job is scheduled from there too: from `now`, it was claimed before its
    // slot was free, found the spacing unmet and was put back (a claim and a refused reservation more).
    const answeredAt = ctx.clock.now();
    const slotAt = Math.max(now, answeredAt);
    if (answeredAt > now) {
      await ctx.db.updateTable(table).set({ last_polled_at: new Date(answeredAt).toISOString() }).where('application_id', '=', p.application_id).where('last_polled_at', '=', nowIso).execute();
    }
    // Cut by the shutdown, not failed: no attempt is counted and the poll count is given back (no
    // further backoff), and it runs again. The poll slot is kept: the request most likely reached
    // the service, so the read after a restart still waits out the 30 s spacing (spec 8).
    if (ctx.shutdown?.aborted) {
      await ctx.db.updateTable(table).set({ polls: row.polls }).where('application_id', '=', p.application_id).execute();
      // A read that was failing before (an outage) keeps its failure in view: `status` counts it
      // as failing, not as waiting, and shows what failed.
      const prev = job.last_error;
      const note =
        prev === null || (Object.values(WAIT_NOTES) as string[]).includes(prev)
          ? WAIT_NOTES.interrupted
          : prev.startsWith(`${WAIT_NOTES.interrupted}; it failed before: `)
            ? prev
            : `${WAIT_NOTES.interrupted}; it failed before: ${prev}`;
      return { rescheduleAt: slotAt + ctx.minPollIntervalMs, note, untested: true };
    }
    ctx.onApiCall?.(job.source!, p.resource, outcome.kind, outcome.elapsedMs);
    // The v1 read has no readiness envelope (spec 2.3): a call not finished yet is still processing.
    const unfinished = outcome.kind === 'ready' && p.resource === 'legacy_interview' ? unfinishedLegacyCall(outcome.data) : null;
    if (outcome.kind === 'ready' && unfinished !== null) outcome = { ...outcome, kind: 'processing', reason: unfinished };

    switch (outcome.kind) {
      case 'ready':
        await finish(ctx, job.id, p, { state: 'ready', reason: null, data: outcome.data }, nowIso);
        return;
      case 'unavailable':
        await finish(ctx, job.id, p, { state: 'unavailable', reason: outcome.reason ?? 'unavailable', data: null }, nowIso);
        return;
      case 'processing': {
        // Given up only on the service's own word that it is still processing: time spent paused
        // (a revoked key), in an outage or behind a backlog never gives up a result unread.
        if (now - since > ctx.giveUpAfterMs) {
          await finish(ctx, job.id, p, { state: 'given_up', reason: `still processing after ${Math.round(ctx.giveUpAfterMs / 3_600_000)} h`, data: null }, nowIso);
          return;
        }
        if (outcome.unrecognized !== undefined && unrecognizedLogged.first(`${p.resource}\0${outcome.unrecognized}`) !== null) {
          ctx.logger?.warn(
            { source: job.source, resource: p.resource, application_id: p.application_id, readiness_status: outcome.unrecognized.slice(0, 100) },
            'the service answered a readiness status this version does not know: read again later, as for processing',
          );
        }
        await ctx.db.updateTable(table).set({ state: 'processing', reason: outcome.reason }).where('application_id', '=', p.application_id).execute();
        return { rescheduleAt: slotAt + pollDelay(now - since, ctx.minPollIntervalMs, ctx.maxPollIntervalMs), note: WAIT_NOTES.processing };
      }
      case 'not_found': {
        // Deleted applications answer 404 for good (spec 4.2): that is a final answer, not a failure.
        if (await isDeleted(ctx, p.application_id)) return await settleDeletedRead(ctx, job, p, row, nowIso);
        // The application may not be readable yet; a few spaced retries, then a dead letter naming the reason.
        if (job.attempts >= ctx.notFoundAttempts) throw new PermanentError(`${describeOutcome(outcome)}; gave up after ${job.attempts} tries`);
        throw new RetryAfterError(describeOutcome(outcome), Math.max(ctx.minPollIntervalMs, 60_000 * job.attempts));
      }
      // An outage of the service (a 429, a 5xx, no connection, a timeout): `outage` makes the
      // worker retry the read for as long as it lasts, never give it up on its attempts (nothing
      // is given up unread: RESULT_GIVE_UP_HOURS counts only the service's own "processing"),
      // and hold the source while failures pile up (SourceHolds.holdForOutage).
      case 'rate_limited':
        // The whole source waits (the key's limit, not this read's): see Worker's throttle.
        throw outageOf(new RetryAfterError(describeOutcome(outcome), Math.max(outcome.retryAfterMs ?? 60_000, ctx.minPollIntervalMs), { throttlesSource: true }));
      default: {
        const err = outcomeToError(outcome);
        // Not an answer that is not the API's (a proxy's page: a wrong HIRING_API_URL fails the
        // same way for ever, and dead-letters after its attempts, to be seen). A 407 is the outbound
        // proxy refusing its credentials (HTTP_PROXY, an http:// API URL): an outage until they are
        // mended, as a refused tunnel (a network error) is for an https:// one.
        const down = outcome.kind === 'server_error' || outcome.kind === 'network' || (outcome.kind === 'client_error' && isTransientClientStatus(outcome.status));
        const mark = <E extends Error>(e: E): E => (down ? outageOf(e) : e);
        if (err instanceof RetryAfterError) {
          throw mark(new RetryAfterError(err.message, Math.max(err.retryAfterMs, ctx.minPollIntervalMs), { throttlesSource: err.throttlesSource }));
        }
        // 5xx, network errors, timeouts: the worker's backoff, but never sooner than the poll
        // spacing. Retried sooner, the job would only find the spacing unmet and wait anyway,
        // with its log saying a retry in 5 s and last_error hiding the failure behind the wait.
        if (err instanceof RetryableError) throw mark(new RetryAfterError(err.message, ctx.minPollIntervalMs));
        // A refused key (401/403) or a redirect (3xx: the API URL is wrong) is a PauseSourceError:
        // the whole source waits, nothing is given up (a redirect only while the source's other
        // reads are redirected too: Worker/SourceAnswers). Other 4xx, a body over the cap: dead letters.
        throw err ?? new Error(describeOutcome(outcome));
      }
    }
  };
}

/**
 * An event of `source` names an application whose result row another source opened: the result
 * tables are keyed by the service's application id alone. While that source is configured, the row
 * is its organization's result, read with its key: this source's key would not read it (404, then
 * a dead letter), or would read another application of the same id into it (two services), and a
 * result reused from it would go to this source's sinks (a sink's `sources` filter then no filter
 * at all). The event settles with no result instead (event_processing.resource NULL: its message
 * carries `result: null`), said at warn. A source no longer configured (renamed or removed) leaves
 * its rows to the source whose event reads them now. Returns undefined when the read goes on.
 */
async function otherSourcesResult(ctx: ProcessingContext, source: string, p: Payload, owner: string): Promise<HandlerResult | undefined> {
  const table = RESULT_TABLE[p.resource];
  if (!ctx.clients.has(owner)) {
    await ctx.db.updateTable(table).set({ source }).where('application_id', '=', p.application_id).where('source', '=', owner).execute();
    return undefined;
  }
  await ctx.db.transaction().execute(async (trx) => {
    // Settled before with a result (a database from before results were kept apart: the other
    // organization's, which its sinks were sent): that changes now, so its next revision goes out
    // (a new webhook-id); its digest goes with the result. Else a replay said nothing, and a message
    // sent again carried no result under the webhook-id that had carried the other one's.
    const prior = await trx.selectFrom('event_processing').select(['state', 'resource']).where('event_id', '=', p.event_id).executeTakeFirst();
    const hadResult = prior?.state === 'settled' && prior.resource !== null;
    await trx.updateTable('event_processing').set({ resource: null, result_digest: null }).where('event_id', '=', p.event_id).execute();
    await settleEvent(ctx, trx, p.event_id, null, { changed: hadResult });
  });
  ctx.logger?.warn(
    { event_id: p.event_id, application_id: p.application_id, resource: p.resource, source, results_source: owner },
    "an event names an application whose results another source reads (ids collide across organizations): not read with this source's key; its message carries no result",
  );
  return { untested: true };
}

const isDeleted = async (ctx: ProcessingContext, applicationId: string): Promise<boolean> =>
  Boolean((await ctx.db.selectFrom('applications').select('deleted_at').where('id', '=', applicationId).executeTakeFirst())?.deleted_at);

/**
 * A read of an application whose deletion has been folded, answered 404: that answer is final
 * (spec 4.2). A final result read before the deletion stays: the service no longer has it, and a
 * replay must not replace it with nothing. Without one, the answer is final too (a read given up
 * on earlier 404s, before the deletion arrived, included).
 */
async function settleDeletedRead(ctx: ProcessingContext, job: ClaimedJob, p: Payload, row: ResultText, nowIso: string): Promise<void> {
  if (row.state === 'ready' || row.state === 'unavailable' || (row.state === 'given_up' && row.data !== null)) {
    await ctx.db.transaction().execute(async (trx) => {
      await settleEvent(ctx, trx, p.event_id, p.resource, { digest: resultDigest(row) });
      dropAnsweredDeadReads(ctx, trx, job.id, p.event_id, row.state);
    });
    return;
  }
  // Still processing (a replay's read answered "processing" first) over data a ready read gave
  // before: that data is the result, ready again; nothing will read the row any more.
  if (row.data !== null) {
    await finish(ctx, job.id, p, { state: 'ready', reason: null, data: JSON.parse(row.data) as Record<string, unknown> }, nowIso);
    return;
  }
  await finish(ctx, job.id, p, { state: 'unavailable', reason: 'application_deleted', data: null }, nowIso);
}

/**
 * The wall clock stepped back by `stepMs` (Worker's onClockStepBack): the result reads' poll times
 * after `nowMs` were taken on the old clock and move back by the step, so the 30 s spacing counts
 * from when each poll was, not a step later. Each table is walked (last_polled_at has no index):
 * once per step.
 */
export async function movePollsBack(ctx: ProcessingContext, nowMs: number, stepMs: number): Promise<void> {
  for (const table of Object.values(RESULT_TABLE)) {
    await ctx.db
      .updateTable(table)
      .set({ last_polled_at: isoMovedBack('last_polled_at', stepMs) })
      .where('last_polled_at', '>', new Date(nowMs).toISOString())
      .execute();
  }
}

const outageOf = <E extends Error>(err: E): E & { outage: true } => Object.assign(err, { outage: true as const });

async function finish(
  ctx: ProcessingContext,
  jobId: number,
  p: Payload,
  result: { state: ResultState; reason: string | null; data: Record<string, unknown> | null },
  nowIso: string,
): Promise<void> {
  const table = RESULT_TABLE[p.resource];
  await ctx.db.transaction().execute(async (trx) => {
    const q = directStatements(ctx.sqlite, trx);
    const before = q.get<ResultText>(`SELECT state, reason, data FROM ${table} WHERE application_id = ?`, p.application_id);
    const dataText = result.data ? sameResultText(before?.data ?? null, result.data) : null;
    // fetched_at: when the service last gave this answer (a result reused for a later event is
    // one read at or after that event arrived). ready: the new data and its headline;
    // unavailable: no result, so no data or headline; given_up: whatever was fetched before
    // stays, with the time it was fetched (a later re-announcement timing out does not erase it,
    // nor make it look newly fetched).
    const columns: Record<string, unknown> =
      result.state === 'ready' && dataText !== null
        ? { data: dataText, fetched_at: nowIso, ...headlineOf(p.resource, result.data!) }
        : result.state === 'unavailable'
          ? { data: null, fetched_at: nowIso, ...nullHeadline(p.resource) }
          : {};
    const set = { state: result.state, reason: result.reason, updated_at: nowIso, ...columns };
    // The column names are fixed per (table, kind of result): a handful of statement texts.
    const after = q.get<ResultText>(
      `UPDATE ${table} SET ${Object.keys(set).map((c) => `${c} = @${c}`).join(', ')} WHERE application_id = @application_id RETURNING state, reason, data`,
      { ...set, application_id: p.application_id },
    );
    const changed = before?.state !== after?.state || before?.reason !== after?.reason || before?.data !== after?.data;
    rebuildApplication(q, p.application_id, ctx.clock.now());
    await settleEvent(ctx, trx, p.event_id, p.resource, { changed, ...(after ? { digest: resultDigest(after) } : {}) });
    dropAnsweredDeadReads(ctx, trx, jobId, p.event_id, result.state);
  });
}

/**
 * The text to store for `data`: the stored text when it holds the same JSON, its objects' keys in
 * another order included (JSON objects are unordered; another server of the service, or a restart,
 * may serialize them otherwise). Stored anew, the reordered text changed the result's digest, and
 * a replay or retry that read the same result sent it to the sinks as a new revision.
 */
function sameResultText(stored: string | null, data: Record<string, unknown>): string {
  const text = JSON.stringify(data);
  if (stored === null || stored === text || stored.length !== text.length) return text;
  // Both parsed from text: a -0 in `data` is 0 once stored, as it is in `text`.
  return sameJson(JSON.parse(stored), JSON.parse(text)) ? stored : text;
}

/**
 * The event's earlier reads that were dead-lettered, deleted once a read of it settles it with the
 * service's answer (ready, unavailable): a `replay` (what `status` says to do with a given_up
 * result) or a retry of one of them got the result, so they are no longer work for an operator.
 * Left, they held the dead-letter alert for good, and a later `dead-letters retry --all` read the
 * result again. A read that gives up again leaves them. As a sink's answered dead letters
 * (dropAnsweredDeadLetters). Through jobs_event (its literal kind term, and `+state`: see
 * NOT_PROCESS_EVENT in eventJobs.ts; without it, every dead read was walked for each read settled).
 */
function dropAnsweredDeadReads(ctx: ProcessingContext, trx: Transaction<Database>, jobId: number, eventId: string, state: ResultState): void {
  if (state !== 'ready' && state !== 'unavailable') return;
  directStatements(ctx.sqlite, trx).run(ANSWERED_DEAD_READS, eventId, jobId);
}

export const ANSWERED_DEAD_READS = `DELETE FROM jobs WHERE event_id = ? AND kind <> '${JobKind.processEvent}' AND kind = '${JobKind.fetchResult}' AND +state = 'dead' AND id <> ?`;

/**
 * The dead letter of a read and what follows it (given_up and the settle, the handler above) are
 * two transactions: a write lock held past the wait, a full disk or a crash between them left the
 * result 'processing' and the event unsettled for good, its sinks never told. This finds such reads
 * (the event still awaiting a result, no read or fold of it open) and runs the handler for the
 * newest dead read of each; the workers run it at their start and every few minutes.
 */
export function createStrandedReadSweep(ctx: ProcessingContext, handler: (job: ClaimedJob, error: string) => Promise<void>) {
  return async (): Promise<number> => {
    const rows = ctx.sqlite.prepare(STRANDED_DEAD_READS).all() as (ClaimedJob & { last_error: string | null })[];
    if (rows.length === 0) return 0;
    // Events with a fold open (a replay queued it): their read is queued again by it. One read of
    // the open folds, not one walk of them per dead read (no index covers process_event by event).
    const folding = preparedJobWritesOn(ctx.sqlite).openProcessEventIds();
    const stillStranded = ctx.sqlite.prepare(STILL_STRANDED);
    let done = 0;
    for (const job of rows) {
      if (job.event_id === null || folding.has(job.event_id)) continue;
      // Again just before: an operator's retry or a replay may have committed since the list was read.
      if (stillStranded.get(job.id) === undefined) continue;
      try {
        await handler(job, job.last_error ?? 'dead-lettered');
        done++;
      } catch (err) {
        // One that fails does not stop the others; it is found again at the next sweep.
        ctx.logger?.warn({ job_id: job.id, event_id: job.event_id, err: (err as Error).message }, 'a dead-lettered read could not be given up; the next sweep tries again');
      }
    }
    return done;
  };
}

const NO_OPEN_READ = (alias: string) =>
  `NOT EXISTS (SELECT 1 FROM jobs o WHERE o.event_id = ${alias}.event_id AND o.kind <> '${JobKind.processEvent}' AND o.kind = '${JobKind.fetchResult}' AND o.state IN ('pending', 'running'))`;

/**
 * The candidates first (dead reads whose event still awaits its result: few), then the checks on
 * them: the newest dead read of its event, no read of it open. Checked per dead read instead, the
 * sweep walked every dead read's checks (seconds at 10,000 dead reads and 10,000 open folds).
 * The candidates are found from the events awaiting a result (event_processing_awaiting, migration
 * 011: only those), each one's dead reads through jobs_event (CROSS JOIN keeps that order, `+state`
 * keeps jobs_kind_ready out): from the dead reads, it walked every one of them at each sweep, on
 * the event loop (237 ms with 50,000 dead reads; 0.02 ms this way).
 */
const STRANDED_DEAD_READS = `WITH candidates AS MATERIALIZED (
    SELECT j.* FROM event_processing ep CROSS JOIN jobs j ON j.event_id = ep.event_id
    WHERE ep.state = 'awaiting_result' AND j.kind <> '${JobKind.processEvent}' AND j.kind = '${JobKind.fetchResult}' AND +j.state = 'dead'
  )
  SELECT c.* FROM candidates c
  WHERE c.id = (SELECT MAX(d.id) FROM jobs d WHERE d.event_id = c.event_id AND d.kind <> '${JobKind.processEvent}' AND d.kind = '${JobKind.fetchResult}' AND d.state = 'dead')
    AND ${NO_OPEN_READ('c')}`;

const STILL_STRANDED = `SELECT 1 FROM jobs j JOIN event_processing ep ON ep.event_id = j.event_id
  WHERE j.id = ? AND j.state = 'dead' AND ep.state = 'awaiting_result' AND ${NO_OPEN_READ('j')}`;

/** What a result's digest is taken over (resultDigest). */
type ResultText = { state: ResultState; reason: string | null; data: string | null };

/**
 * A fetch that was dead-lettered (404s, another 4xx, 25 failures) would leave
 * its result row 'processing' and its event unsettled for ever, holding its
 * sink messages. It becomes given_up with the reason, and the event settles,
 * so the consumer hears of it; an operator retry can still fetch it later.
 */
export function createFetchDeadLetterHandler(ctx: ProcessingContext) {
  return async (job: ClaimedJob, error: string): Promise<void> => {
    const p = JSON.parse(job.payload) as Payload;
    const nowIso = new Date(ctx.clock.now()).toISOString();
    // 404s, and the deletion folded meanwhile (between the read and this dead letter, so its
    // requeue of dead 404 reads did not see this one): the 404 is final, as in the read itself.
    if (error.includes(NOT_FOUND_MARK)) {
      const deleted = await isDeleted(ctx, p.application_id);
      const row = await ctx.db.selectFrom(RESULT_TABLE[p.resource]).select(['state', 'data']).where('application_id', '=', p.application_id).executeTakeFirst();
      if (deleted && row?.state === 'processing' && row.data === null) {
        await finish(ctx, job.id, p, { state: 'unavailable', reason: 'application_deleted', data: null }, nowIso);
        // A final answer, not work for an operator: no dead letter left behind (nor its alert).
        await ctx.db.updateTable('jobs').set({ state: 'done', run_at: nowIso, finished_at: nowIso, updated_at: nowIso }).where('id', '=', job.id).where('state', '=', 'dead').execute();
        return;
      }
    }
    await ctx.db.transaction().execute(async (trx) => {
      await trx
        .updateTable(RESULT_TABLE[p.resource])
        .set({ state: 'given_up', reason: `fetch failed: ${error}`.slice(0, 500), updated_at: nowIso })
        .where('application_id', '=', p.application_id)
        .where('state', '=', 'processing')
        .execute();
      const row = await trx.selectFrom(RESULT_TABLE[p.resource]).select(['state', 'reason', 'data']).where('application_id', '=', p.application_id).executeTakeFirst();
      await settleEvent(ctx, trx, p.event_id, p.resource, row ? { digest: resultDigest(row) } : {});
    });
  };
}
