/**
 * The receiver's real entry (runReceiver('serve')), with a SIGTERM sent to itself while it is
 * starting: runReceiver has opened and migrated the database and awaits its start (its first
 * await) when the call returns. For the start-up signal test in test/ingest/process.test.ts.
 */
import { runReceiver } from '../../src/runReceiver.js';

const running = runReceiver('serve');
process.kill(process.pid, 'SIGTERM');
await running;
