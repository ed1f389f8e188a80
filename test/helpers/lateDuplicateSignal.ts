/**
 * The CLI's entry as main.ts runs it (runCli, then flush and exit), for a command that stops on the
 * first SIGTERM (stopOnInterrupt): the first is sent to itself once a batch committed (its first
 * progress line), and a second, the copy `timeout` sends to the process group, right after the
 * command returned, as it comes when the first was taken late. For the test in
 * test/cli/bulkInterrupt.test.ts. Arguments: the command's. SIGNAL_AFTER: the progress text that
 * sends the first (' so far', the first batch's line, by default).
 */
import { Writable } from 'node:stream';
import { processIo } from '../../src/cli/io.js';
import { runCli } from '../../src/cli/program.js';

let sent = false;
const stderr = new Writable({
  write(chunk: Buffer, _enc, done) {
    process.stderr.write(chunk);
    if (!sent && chunk.toString().includes(process.env.SIGNAL_AFTER ?? ' so far')) {
      sent = true;
      process.kill(process.pid, 'SIGTERM');
    }
    done();
  },
});
const outcome = await runCli(process.argv.slice(2), { ...processIo(), stderr });
process.kill(process.pid, 'SIGTERM');
await new Promise<void>((resolve) => process.stdout.write('', () => resolve()));
await new Promise<void>((resolve) => process.stderr.write('', () => resolve()));
process.exit(outcome.code);
