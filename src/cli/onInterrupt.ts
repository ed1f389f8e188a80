/**
 * Runs `cleanup` when SIGINT (Ctrl-C) or SIGTERM (a supervisor, `timeout`) ends the command, then
 * ends the process by that signal, as it would have ended without a handler (exit status 130 for
 * Ctrl-C, 143 for SIGTERM). Returns what removes the handlers again: call it in a `finally`.
 *
 * A handler runs only when the event loop gets its turn, not while synchronous work or a chain of
 * promises runs; code that holds the loop for long must yield to it now and then
 * (`setImmediate`) for Ctrl-C to work. The removal waits for the loop's next turn too: a signal
 * that came meanwhile is then still handled (a handler removed at once dropped it, and the
 * command went on as if Ctrl-C had not been typed).
 */
export function onInterrupt(cleanup: () => void): () => void {
  const remove = onStopSignals((signal) => {
    remove();
    try {
      cleanup();
    } finally {
      endBy(signal);
    }
  });
  return () => void setImmediate(remove);
}

/** `handler` on SIGINT and SIGTERM, until the function returned removes it. */
function onStopSignals(handler: (signal: NodeJS.Signals) => void): () => void {
  process.on('SIGINT', handler);
  process.on('SIGTERM', handler);
  return () => {
    process.removeListener('SIGINT', handler);
    process.removeListener('SIGTERM', handler);
  };
}

/** With no listener left (removed first), the signal's default action: the process ends by it. */
const endBy = (signal: NodeJS.Signals) => void process.kill(process.pid, signal);

/** A bulk change asked to stop by SIGINT or SIGTERM (stopOnInterrupt). */
export interface StopRequest {
  /** Aborted at the first signal: writeInBatches begins no further transaction. */
  readonly signal: AbortSignal;
  /** The signal that asked, once one has. */
  by(): NodeJS.Signals | undefined;
  /**
   * Runs `cleanup` before a second signal ends the process at once (a bar gives the terminal
   * back); returns what removes it again.
   */
  atOnce(cleanup: () => void): () => void;
  /** Removes the handlers at the loop's next turn (call it in a `finally`). */
  off(): void;
}

/**
 * A repeat of the first signal this soon after it was taken is the same request, not a second
 * one. GNU `timeout` sends its signal twice, to the command and then to its whole process group,
 * and node can take the two as two: a script counting its SIGTERMs under `timeout -s TERM 1` saw
 * two in 1 run of 20 on a loaded 2-core host (plain node and under tsx alike), and
 * `timeout -s TERM 3 ... replay` then ended at once with no line, as a second signal does. Two
 * signals sent while the command waits for the write lock are taken together when that wait
 * ends, and count as one too: the command stops after the batch in flight, as the first asked.
 */
const SAME_REQUEST_MS = 500;

/**
 * For a command that changes rows in many transactions (prune, dead-letters retry and discard,
 * sinks send-now): the first SIGINT (Ctrl-C) or SIGTERM (a supervisor, `timeout`) aborts
 * `signal`, so the batch in flight commits and none begins after it; the command then says what
 * it did and exits by the signal's status (exitBySignal). Ended at once, as onInterrupt does, it
 * left a cron log with nothing at all (40,000 of 100,000 jobs pruned, no line saying so). A
 * second signal (another one, or the same more than SAME_REQUEST_MS later) ends the process at
 * once by that signal (its default action), for a stop that takes too long. Not by removing the
 * handlers at the first: while the CLI waits inside SQLite for the write lock (its busy timeout,
 * up to 5 s) no handler runs, and a SIGINT and a SIGTERM are then handled in one turn of the
 * loop, where the second found no handler and was lost.
 */
export function stopOnInterrupt(): StopRequest {
  const controller = new AbortController();
  let by: NodeJS.Signals | undefined;
  let takenAt = 0;
  const cleanups = new Set<() => void>();
  const remove = onStopSignals((signal) => {
    if (by === undefined) {
      by = signal;
      takenAt = performance.now();
      controller.abort();
      return;
    }
    if (signal === by && performance.now() - takenAt < SAME_REQUEST_MS) return;
    remove();
    try {
      for (const cleanup of cleanups) cleanup();
    } finally {
      endBy(signal);
    }
  });
  const atOnce = (cleanup: () => void) => {
    cleanups.add(cleanup);
    return () => void cleanups.delete(cleanup);
  };
  // Removed a turn of the loop later, as onInterrupt does: removed at once, the repeat `timeout`
  // sends that came as the command ended found no handler, and its default action killed the
  // process (by SIGTERM, not exit 143; a command that had finished then did not exit 0).
  return { signal: controller.signal, by: () => by, atOnce, off: () => void setImmediate(remove) };
}
