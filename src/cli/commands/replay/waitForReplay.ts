import { sql, type Kysely } from 'kysely';
import type { Database } from '../../../db/schema.js';
import { inChunks } from '../../../db/sqliteHelpers.js';
import { jobsByEventTerm } from '../../../queue/JobQueue.js';
import { JobKind } from '../../../queue/jobKinds.js';
import { sinkJobKind } from '../../../sinks/enqueueDeliveries.js';
import { groupBy } from '../../../util/collections.js';
import type { CliIo } from '../../io.js';
import type { StopRequest } from '../../onInterrupt.js';
import { ofTotal, startBar, type Progress } from '../../progress.js';

/** What `--wait` saw: the counts, and why it ended before all was finished. */
export interface Waited {
  done: number;
  failed: number;
  unfinished?: number;
  timed_out?: boolean;
  /** A signal ended the wait (the work stays queued). */
  interrupted?: boolean;
}

/**
 * `--wait`: until the work the replay queued has finished, bounded by --timeout. A replayed
 * event's processing is finished when its process_event job is, and what that job caused is:
 * the result read it queued (a fetch_result job made after the replay's first job; it may wait
 * for the 30 s poll spacing or a result still processing), and the deliveries of a new revision
 * that read settled (deliveries rows whose cycle was queued since the replay started). Each is
 * queued before the job that queues it completes, so "nothing open" cannot be seen early. Other
 * work on the event (an older delivery backing off for hours) is not waited for. It failed if
 * the process_event job, that read or one of those deliveries was dead-lettered. A replay to a
 * sink is finished when its (event, sink) delivery is delivered or dead. A signal (`stop`) ends the
 * wait at once, after one last count: the work stays queued, and the caller says how far it was.
 */
export async function waitForReplay(
  io: CliIo,
  db: Kysely<Database>,
  replayed: { job: number; event: string }[],
  pairs: { event: string; sink: string }[],
  startedIso: string,
  o: { timeout: number; json?: boolean },
  progress: Progress,
  stop?: StopRequest,
): Promise<Waited> {
  const total = replayed.length + pairs.length;
  // On a clock that never goes back: on the wall clock, NTP stepping it back an hour made the wait an hour longer.
  const deadline = performance.now() + o.timeout * 1000;
  const bar = io.isTTY && !o.json && total > 0 ? startBar(io.stderr, 'waiting   [{bar}] {value}/{total} finished', total, stop) : null;
  const firstJob = replayed.reduce((min, r) => Math.min(min, r.job), Number.MAX_SAFE_INTEGER);
  // What is still read at each count: an item done for good is counted once and left out of the
  // reads (see waitStep). Every item counted every 200 ms took about a core of the CLI's CPU at
  // 50,000 items, and reads beside the receiver it waits on.
  let following: Following = { replayed, bySink: groupBy(pairs, (p) => p.sink, (p) => p.event) };
  let done = 0;
  let failed = 0;
  try {
    for (;;) {
      const step = await waitStep(db, following, firstJob, startedIso);
      done += step.doneForGood;
      following = step.following;
      failed = step.failed;
      bar?.update(done + failed);
      progress.report(() => `replay --wait: ${ofTotal(done + failed, total, 'finished')}`);
      if (done + failed >= total) return { done, failed };
      if (stop?.signal.aborted) return { done, failed, unfinished: total - done - failed, interrupted: true };
      // Counted and said by the caller (in --json too), then exit 1.
      if (performance.now() > deadline) return { done, failed, unfinished: total - done - failed, timed_out: true };
      // Not past the deadline: the last count is the one just after it, as with a short pause.
      const pause = Math.min(waitPollMs(step.followed), deadline + 1 - performance.now());
      await pauseFor(Math.max(0, pause), stop?.signal);
    }
  } finally {
    bar?.stop();
    progress.end();
  }
}

/** A pause of `ms` that a signal ends early. */
function pauseFor(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const end = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', end);
      resolve();
    };
    const timer = setTimeout(end, ms);
    signal?.addEventListener('abort', end, { once: true });
  });
}

/**
 * The pause between two counts of `--wait`, by how many items a count reads: 200 ms up to 5,000,
 * then longer (400 ms at 10,000), at most 1.5 s (from 37,500). A count of 50,000 unfinished items
 * took about 0.1 s of CPU; every 200 ms it kept the CLI near a core busy beside the receiver.
 */
export const waitPollMs = (followed: number): number => Math.min(1_500, Math.max(200, Math.round(followed / 25)));

interface Following {
  replayed: readonly { job: number; event: string }[];
  bySink: ReadonlyMap<string, readonly string[]>;
}

/**
 * One count of `--wait` over the items still followed. Done for good, and no longer read: a
 * replayed event whose process_event job is done (or pruned), with its result read done and the
 * deliveries of the revision it made delivered, none dead; a (event, sink) delivery delivered. A
 * later cycle of such a delivery is another change's (a later event's revision), not the
 * replay's, which is not waited for. Anything dead is counted failed but read again: it does not
 * stay so by itself. An operator's `dead-letters retry` revives a job or delivery in place; the
 * receiver itself requeues an application's dead reads that failed on 404s when another of its
 * events is folded, deletes an event's dead reads once another read gets the answer, settles the
 * event of a dead read as given_up in a second transaction (queueing its deliveries), and a sink's
 * lane that finds the result changed queues the next revision to every sink, dead deliveries too.
 */
async function waitStep(db: Kysely<Database>, following: Following, firstJob: number, startedIso: string) {
  let doneForGood = 0;
  let failed = 0;
  const replayed: { job: number; event: string }[] = [];
  // Counted per chunk with IN lists (a query per event, every 200 ms, took CPU the receiver needed).
  for (const chunk of inChunks(following.replayed)) {
    const events = chunk.map((r) => r.event);
    const own = new Map((await db.selectFrom('jobs').select(['id', 'state']).where('id', 'in', chunk.map((r) => r.job)).execute()).map((r) => [r.id, r.state]));
    const tally = new Map<string, { open: number; dead: number }>();
    const add = (rows: { event_id: string | null; open: number; dead: number }[]) => {
      for (const r of rows) {
        if (r.event_id === null) continue;
        const t = tally.get(r.event_id) ?? { open: 0, dead: 0 };
        t.open += Number(r.open);
        t.dead += Number(r.dead);
        tally.set(r.event_id, t);
      }
    };
    add(
      await db
        .selectFrom('jobs')
        .select(['event_id', sql<number>`sum(state IN ('pending', 'running'))`.as('open'), sql<number>`sum(state = 'dead')`.as('dead')])
        .where('event_id', 'in', events)
        .where(jobsByEventTerm)
        .where('kind', '=', JobKind.fetchResult)
        .where('id', '>', firstJob)
        .groupBy('event_id')
        .execute(),
    );
    add(
      await db
        .selectFrom('deliveries')
        .select(['event_id', sql<number>`sum(state NOT IN ('delivered', 'dead'))`.as('open'), sql<number>`sum(state = 'dead')`.as('dead')])
        .where('event_id', 'in', events)
        .where('queued_at', '>=', startedIso)
        .groupBy('event_id')
        .execute(),
    );
    for (const r of chunk) {
      // A job no longer there finished and was deleted meanwhile (`prune`: only finished jobs go).
      const state = own.get(r.job) ?? 'done';
      const follow = tally.get(r.event);
      if (state === 'done' && !(follow && (follow.open > 0 || follow.dead > 0))) {
        doneForGood++;
        continue;
      }
      replayed.push(r);
      if (state !== 'done' && state !== 'dead') continue;
      if (follow && follow.open > 0) continue;
      failed++;
    }
  }
  const bySink = new Map<string, string[]>();
  for (const [sink, ids] of following.bySink) {
    const left: string[] = [];
    for (const chunk of inChunks(ids)) {
      const states = new Map(
        (await db.selectFrom('deliveries').select(['event_id', 'state']).where('sink', '=', sink).where('event_id', 'in', chunk).execute()).map((r) => [r.event_id, r.state]),
      );
      // A pair whose job is still to run is not finished, whatever its row says: a send of the same
      // revision that was in flight when the replay came (its message id is the replay's) records
      // the row delivered (or dead) on completing, before the replay's own job has run.
      const open = new Set(
        (
          await db
            .selectFrom('jobs')
            .select('event_id')
            .where('event_id', 'in', chunk)
            .where(jobsByEventTerm)
            .where('kind', '=', sinkJobKind(sink))
            // Unary +: by the event ids (jobs_event), not every open job of the sink (jobs_kind_ready).
            .where(sql<string>`+state`, 'in', ['pending', 'running'])
            .execute()
        ).map((r) => r.event_id),
      );
      for (const event of chunk) {
        const state = states.get(event);
        if (open.has(event)) left.push(event);
        else if (state === 'delivered') doneForGood++;
        else {
          if (state === 'dead') failed++;
          left.push(event);
        }
      }
    }
    if (left.length > 0) bySink.set(sink, left);
  }
  const followed = replayed.length + [...bySink.values()].reduce((n, ids) => n + ids.length, 0);
  return { doneForGood, failed, followed, following: { replayed, bySink } };
}
