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
  const onSignal = (signal: NodeJS.Signals) => {
    remove();
    try {
      cleanup();
    } finally {
      // With no listener left, the signal's default action: the process ends by it.
      process.kill(process.pid, signal);
    }
  };
  const remove = () => {
    process.removeListener('SIGINT', onSignal);
    process.removeListener('SIGTERM', onSignal);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  return () => void setImmediate(remove);
}
