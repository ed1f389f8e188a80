import { afterAll, expect, it } from 'vitest';
import { join } from 'node:path';
import { openDatabase } from '../../src/db/openDatabase.js';
import { sendSinkNow } from '../../src/sinks/sendSinkNow.js';
import { jobSeeder } from '../helpers/jobs.js';
import { tempDir } from '../helpers/receiver.js';

const { dir, cleanup } = tempDir('send-now-count-');
afterAll(cleanup);

// `sinks send-now` stamps the sink as enabled first: a running receiver ends its hold of the sink
// at its next claim and may send due deliveries while the command still runs. The pending count
// it prints is the one as it began (CI once printed 2 of 3, one sent meanwhile, as a flake).
it('counts the pending deliveries (those in flight too) as the command began, not after a running receiver sent some of them', async () => {
  const database = openDatabase(join(dir, 'count.db'));
  try {
    const now = Date.now();
    const at = (ms: number) => new Date(now + ms).toISOString();
    const job = jobSeeder(database.sqlite);
    // One waiting an hour (a Retry-After), two due but held by the receiver's wait.
    for (const [i, runAt] of [at(3_600_000), at(-1_000), at(-1_000)].entries()) job({ kind: 'sink:crm', event_id: `evt_${i}`, state: 'pending', run_at: runAt, attempts: 1, created_at: at(-60_000) });
    // One in flight (a consumer slow to answer): not delivered yet, pending as `sinks list` counts it.
    job({ kind: 'sink:crm', event_id: 'evt_3', state: 'running', run_at: at(-1_000), attempts: 1, created_at: at(-60_000), lease_expires_at: at(60_000) });
    // The receiver sends one of the due ones while the command makes the waiting one due.
    const sendOne = () => database.sqlite.prepare("UPDATE jobs SET state = 'done' WHERE id = (SELECT min(id) FROM jobs WHERE run_at < ? AND state = 'pending')").run(at(-500));
    const r = await sendSinkNow(database.db, 'crm', now, { onBatch: () => void sendOne() });
    expect(database.sqlite.prepare("SELECT count(*) FROM jobs WHERE state = 'done'").pluck().get()).toBe(1);
    expect({ due: r.due, pending: r.pending }).toEqual({ due: 1, pending: 4 });
  } finally {
    await database.close();
  }
});
