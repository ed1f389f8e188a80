/**
 * Runs `cleanup` when SIGINT (Ctrl-C) or SIGTERM (a supervisor, `timeout`) ends the command, then
 * ends the process by that signal, as it would have ended without a handler (exit status 130 for
 * Ctrl-C, 143 for SIGTERM). Returns what removes the handlers again: call it in a `finally`.
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
  return remove;
}
