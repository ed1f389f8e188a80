import { letWaitersGoFirst, openWaitSignalReader, type WaitSignalReader } from '../db/ingestWaitSignal.js';

/**
 * Longest a CLI's bulk change holds its next transaction back while a running receiver's ingest
 * commit or workers wait for the write lock (they say so in the database's `-ingest-wait` file:
 * IngestWaitSignal): longer than the workers' longest delay between two tries, 25 ms, so one of
 * their tries falls in it. SQLite has one write lock and no queue: a `replay` took the lock again
 * within a few ms of each commit, and the workers' tries on their timers missed those gaps, so the
 * receiver delivered nothing of a replay until its last batch was queued (bench/README.md,
 * "Thirtieth round"). Letting them in, their writes run beside the CLI's.
 */
export const LET_WAITERS_IN_MS = 30;

/** What a CLI's bulk change awaits between two of its transactions (see batchPause). */
export interface BatchPause {
  pause(): Promise<void>;
  close(): void;
}

/** Two turns of the event loop: see batchPause. */
const loopTurns = async (): Promise<void> => {
  for (let turn = 0; turn < 2; turn++) await new Promise((resolve) => setImmediate(resolve));
};

/** For a run that writes nothing (a dry run): the loop's turns only, it holds no lock to give up. */
export const TURNS_ONLY: BatchPause = { pause: loopTurns, close() {} };

/**
 * The pause between two short write transactions of a CLI's bulk change next to a running
 * receiver: `replay`'s batches, `prune`, `dead-letters retry` and `discard`, `sinks send-now`.
 *
 * First two turns of the event loop, for the Ctrl-C and SIGTERM handler (stopOnInterrupt): a
 * batch's statements and promises never give it one, and one turn reached outside the loop's check
 * phase ran before the poll phase read the signal, so the stop came a batch late. Then, while the
 * receiver's ingest commit or workers say they wait for the lock, up to LET_WAITERS_IN_MS on 1 ms
 * timers, until they got it. When nobody waits, nothing more: one read of 16 bytes. (`prune`,
 * `dead-letters` and `sinks send-now` paused a fixed 5 ms instead: too short for the workers'
 * tries, and 1 s per 100,000 rows when nobody waited.)
 *
 * Where the database has no `-ingest-wait` file, no receiver has opened it (every `serve` and
 * `work` makes the file as it opens the database, unless it cannot: it then warns and runs without
 * it, and these commands do not pause for it either): nobody to let in, no wait, as for `replay`
 * before (a fixed pause there cost a replay of a restored backup 10 s per million events). The
 * file is looked for again at the next pause, for a receiver started meanwhile.
 */
export function batchPause(databasePath: string): BatchPause {
  let reader: WaitSignalReader | null = null;
  let closed = false;
  return {
    async pause() {
      await loopTurns();
      if (closed) return;
      if (reader === null) {
        const r = openWaitSignalReader(databasePath);
        if (!r.present) return;
        reader = r;
      }
      const open = reader;
      await letWaitersGoFirst(() => open.othersWaiting(Date.now()), LET_WAITERS_IN_MS);
    },
    close() {
      closed = true;
      reader?.close();
    },
  };
}
