/**
 * The receiver's real entry (runReceiver('serve')), then an error nothing catches, thrown from a
 * timer once it listens: what a bug in a callback would do. For the crash test in
 * test/ingest/process.test.ts.
 */
import { runReceiver } from '../../src/runReceiver.js';

await runReceiver('serve');
setTimeout(() => {
  throw new Error('boom in a timer (test)');
}, 50);
