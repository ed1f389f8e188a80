import { afterEach, describe, expect, it } from 'vitest';
import { startReceiver, type TestReceiver } from '../helpers/receiver.js';
import { envelope, newSecret, postSigned } from '../helpers/signing.js';
import { cli } from './helpers.js';

/**
 * Ingest takes an envelope nested as deep as its 1 MiB limit allows (JSON.parse does), and a later
 * body under the same id that differs is kept as a conflict. `conflicts show` must show it: its
 * walk of the two bodies, and its pretty print, ran out of stack (`error: Maximum call stack size
 * exceeded`, exit 1), so the operator could not see what the service sent.
 */

let r: TestReceiver | undefined;
afterEach(async () => {
  await r?.close();
  r = undefined;
});

const SECRET = newSecret();
const DEPTH = 100_000;

/** An envelope whose payload holds an array DEPTH levels deep beside its `status`. */
const deepBody = (status: string) =>
  JSON.stringify(envelope({ id: 'evt_deep', event_type: 'application.status_changed', created_at: '2026-11-02T09:00:00Z', payload: { status, nested: 0 } })).replace(
    '"nested":0',
    `"nested":${'['.repeat(DEPTH)}${']'.repeat(DEPTH)}`,
  );

describe('conflicts show of a deeply nested body', () => {
  it('names the differing path and prints both bodies', async () => {
    r = await startReceiver({ WEBHOOK_SECRET: SECRET, WORKER_CONCURRENCY: '0' });
    const first = await postSigned(r.url, SECRET, deepBody('applied'));
    expect(await first.json()).toMatchObject({ outcome: 'accepted' });
    const later = await postSigned(r.url, SECRET, deepBody('hired'));
    expect(await later.json()).toMatchObject({ outcome: 'conflict' });
    const env = { DATABASE_PATH: r.dbPath };

    const json = await cli(['conflicts', 'show', '1', '--json'], env);
    expect(json.stderr).toBe('');
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({ event_id: 'evt_deep', differing_paths: ['$.payload.status'] });

    const text = await cli(['conflicts', 'show', '1'], env);
    expect(text.stderr).toBe('');
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^differs at {2}\$\.payload\.status$/m);
    expect(text.stdout).toContain('"status":"hired","nested":[[[');
  }, 60_000);
});
