import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/util/clock.js';
import { envelope, newSecret, postSigned } from '../helpers/signing.js';
import { startReceiver, type TestReceiver } from '../helpers/receiver.js';

// A full disk fails every ingest transaction for as long as it lasts. Each delivery keeps its own
// `webhook delivery` line (outcome unavailable, storage_error); the committer's line says the
// cause and what to do once, then once a minute, not once per delivery for hours.

const secret = newSecret();
let r: TestReceiver | undefined;
afterEach(async () => {
  await r?.close();
  r = undefined;
});

describe('ingest transactions failing on a full disk', () => {
  it('are logged at error when they start, then once a minute with a count and a hint, and their end at info', async () => {
    const clock = new ManualClock(Date.now());
    r = await startReceiver({ WORKER_CONCURRENCY: '0', WEBHOOK_SECRET: secret }, { clock });
    const ingest = r.app.database.ingestSqlite;
    ingest.pragma(`max_page_count = ${ingest.pragma('page_count', { simple: true }) as number}`);
    const big = () => JSON.stringify(envelope({ padding: 'p'.repeat(20_000) }));
    const failedLines = () => r!.logs.lines.filter((l) => l.msg === 'ingest transaction failed' && l.level === 50);

    for (let i = 0; i < 5; i++) expect((await postSigned(r.url, secret, big())).status).toBe(503);
    // Every delivery keeps its own line; the cause is said once, with what to do.
    expect(r.logs.lines.filter((l) => l.msg === 'webhook delivery' && l.outcome === 'unavailable')).toHaveLength(5);
    expect(failedLines()).toHaveLength(1);
    expect(failedLines()[0]).toMatchObject({ code: 'SQLITE_FULL', batch: 1 });
    expect(String(failedLines()[0]!.hint)).toMatch(/disk that holds DATABASE_PATH is full/);

    clock.advance(60_000);
    expect((await postSigned(r.url, secret, big())).status).toBe(503);
    expect(failedLines()).toHaveLength(2);
    expect(failedLines()[1]).toMatchObject({ code: 'SQLITE_FULL', failed_since_last_line: 4 });

    ingest.pragma('max_page_count = 1073741823');
    expect((await postSigned(r.url, secret, big())).status).toBe(200);
    expect(r.logs.lines.find((l) => l.msg === 'ingest transactions commit again')).toMatchObject({ level: 30, failures: 6 });
  });
});
