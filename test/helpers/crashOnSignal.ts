/**
 * The receiver's real entry (runReceiver('serve')), then, on SIGUSR2, an error nothing catches:
 * thrown from a timer (CRASH_KIND unset or 'exception') or a promise rejected with no handler
 * (CRASH_KIND=rejection). A test chooses the moment: for the exit tests in
 * test/observability/exitLogs.test.ts, once it has filled the log pipe.
 */
import { runReceiver } from '../../src/runReceiver.js';

await runReceiver('serve');
process.once('SIGUSR2', () => {
  if (process.env['CRASH_KIND'] === 'rejection') void Promise.reject(new Error('boom in a promise (test)'));
  else
    setTimeout(() => {
      throw new Error('boom in a timer (test)');
    }, 0);
});
