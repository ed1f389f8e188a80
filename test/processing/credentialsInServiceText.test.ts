import { afterEach, describe, expect, it } from 'vitest';
import { ACME_KEY, ACME_KEY_2, startPair, type Pair } from '../helpers/pair.js';

let pair: Pair;
afterEach(() => pair?.close());

describe('credentials the service writes in an error stay out of logs and last_error', () => {
  it('after an API key rotation, an error naming the old key, a signing secret or a bearer token shows none of them', async () => {
    pair = await startPair();
    // The key rotated as the runbook says: the receiver now reads with the second key.
    await pair.restartReceiver({ HIRING_API_KEY: ACME_KEY_2, PORT: new URL(pair.receiver.url).port });
    const c = pair.sandbox.control;
    const app = c.createApplication({ jobId: c.createJob({}).id });
    const token = 'eyJhbGciOiJIUzI1NiJ9.e30.4Xo2';
    const detail = `key ${ACME_KEY} was replaced; secret ${pair.secret} (Authorization: Bearer ${token})`;
    c.injectFault({ target: 'interview', applicationId: app.id, status: 400, times: 1, body: [{ code: 'invalid_input', detail, attr: null }] });
    c.completeInterview(app.id);
    await pair.settle();

    const job = pair.receiver.app.database.ingestSqlite.prepare("SELECT state, last_error FROM jobs WHERE kind = 'fetch_result'").get() as Record<string, unknown>;
    expect(job).toEqual({
      state: 'dead',
      last_error: 'interview: HTTP 400 client_error (invalid_input: key [redacted] was replaced; secret [redacted] (Authorization: Bearer [redacted]))',
    });
    const raw = pair.receiver.logs.raw.join('\n');
    expect(raw).toContain('key [redacted] was replaced');
    for (const leak of [ACME_KEY, ACME_KEY.split('.')[1]!, pair.secret, pair.secret.slice('whsec_'.length), token]) expect(raw).not.toContain(leak);
  });
});
