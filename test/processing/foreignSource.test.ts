import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/util/clock.js';
import { cli } from '../cli/helpers.js';
import { configFile, startReceiver, type TestReceiver } from '../helpers/receiver.js';
import { envelope, newSecret, postSigned } from '../helpers/signing.js';

/**
 * Two organizations' sources on one receiver. A delivery belongs to the source whose secret
 * verifies it; the applications table and the result tables are keyed by the application id
 * alone. A delivery signed with globex's secret that names one of acme's applications (forged by
 * whoever holds globex's secret, or sent by a misconfiguration) must not change acme's picture of
 * it: not its status, not its candidate, never mark it deleted. It stays stored as received, and
 * is a dead letter that says why.
 */

let r: TestReceiver | undefined;
const cleanups: (() => void)[] = [];
afterEach(async () => {
  await r?.close();
  r = undefined;
  cleanups.splice(0).forEach((c) => c());
});

const ACME = newSecret();
const GLOBEX = newSecret();
const APP = '0b5e7a52-4a1e-4c39-9a57-1f3d2c8e9a77';

async function twoSources() {
  const source = (name: string, secret: string) => ({ name, secrets: [secret], api_url: 'http://127.0.0.1:9', api_key: `sk-${name}.unused` });
  const { file, cleanup } = configFile({ sources: [source('acme', ACME), source('globex', GLOBEX)] });
  cleanups.push(cleanup);
  const clock = new ManualClock(Date.now());
  r = await startReceiver({ CONFIG_FILE: file, WORKER_CONCURRENCY: '0' }, { clock });
  return { rcv: r, clock };
}

const app = (status: string, first: string) => ({
  application: { id: APP, external_id: 'crm-1', status, created_at: '2026-11-02T09:00:00Z' },
  candidate: { first_name: first, last_name: 'Doe', email: `${first.toLowerCase()}@example.com` },
  job: { id: 'job-1', title: 'Driver' },
});

describe('an event signed by one source for an application of another', () => {
  it('changes nothing of the application and is dead-lettered, naming both sources', async () => {
    const { rcv, clock } = await twoSources();
    const post = async (secret: string, body: Record<string, unknown>) => {
      const res = await postSigned(rcv.url, secret, JSON.stringify(body));
      expect(res.status).toBe(200);
    };
    await post(ACME, envelope({ id: 'evt_acme_1', event_type: 'application.created', created_at: '2026-11-02T09:00:00Z', payload: app('applied', 'Ann') }));
    await rcv.app.worker.runUntilIdle();
    // Created earlier, so it would sort first and claim the application for globex.
    await post(GLOBEX, envelope({ id: 'evt_globex_1', event_type: 'application.status_changed', created_at: '2026-11-02T08:00:00Z', payload: { ...app('hired', 'Mallory'), previous_status: 'applied' } }));
    await post(GLOBEX, envelope({ id: 'evt_globex_2', event_type: 'job_application.deleted', created_at: '2026-11-02T09:05:00Z', payload: { id: APP, status: 'hired', created_at: '2026-11-02T09:00:00Z' } }));
    await rcv.app.worker.runUntilIdle();
    await post(ACME, envelope({ id: 'evt_acme_2', event_type: 'application.status_changed', created_at: '2026-11-02T09:10:00Z', payload: { ...app('interviewing', 'Ann'), previous_status: 'applied' } }));
    // A fold that fails from the cursor is queued for a retry after a backoff: that run dead-letters it.
    for (let i = 0; i < 3; i++) {
      clock.advance(60_000);
      await rcv.app.worker.runUntilIdle();
    }

    const db = rcv.app.database.ingestSqlite;
    expect(db.prepare('SELECT source, status, candidate_first_name, deleted_at FROM applications WHERE id = ?').get(APP)).toEqual({
      source: 'acme',
      status: 'interviewing',
      candidate_first_name: 'Ann',
      deleted_at: null,
    });
    expect(db.prepare('SELECT event_id FROM application_events ORDER BY event_id').all()).toEqual([{ event_id: 'evt_acme_1' }, { event_id: 'evt_acme_2' }]);
    // Stored as received, under the source that signed them; not processed.
    expect(db.prepare("SELECT id, source FROM events WHERE source = 'globex' ORDER BY id").all()).toEqual([
      { id: 'evt_globex_1', source: 'globex' },
      { id: 'evt_globex_2', source: 'globex' },
    ]);
    const dead = db.prepare("SELECT event_id, last_error FROM jobs WHERE state = 'dead' ORDER BY event_id").all() as { event_id: string; last_error: string }[];
    expect(dead.map((d) => d.event_id)).toEqual(['evt_globex_1', 'evt_globex_2']);
    for (const d of dead) expect(d.last_error).toMatch(/application .* belongs to source "acme".*signed by source "globex"/);

    // A retry is refused again, so nothing but a discard ends these dead letters (and the alert).
    const discard = await cli(['dead-letters', 'discard', '--source', 'globex', '--json'], { DATABASE_PATH: rcv.dbPath });
    expect(discard.code).toBe(0);
    expect(JSON.parse(discard.stdout)).toMatchObject({ discarded: 2, by_kind: { process_event: 2 }, kept: [] });
    expect(db.prepare("SELECT count(*) AS n FROM jobs WHERE state = 'dead'").get()).toEqual({ n: 0 });
    expect(db.prepare("SELECT count(*) AS n FROM events WHERE source = 'globex'").get()).toEqual({ n: 2 });
  }, 30_000);

  it('of a database from before: the source of its first stored event keeps it, the other is refused', async () => {
    const { rcv, clock } = await twoSources();
    const post = async (secret: string, body: Record<string, unknown>) => {
      const res = await postSigned(rcv.url, secret, JSON.stringify(body));
      expect(res.status).toBe(200);
    };
    const db = rcv.app.database.ingestSqlite;
    await post(ACME, envelope({ id: 'evt_acme_1', event_type: 'application.created', created_at: '2026-11-02T09:00:00Z', payload: app('applied', 'Ann') }));
    await rcv.app.worker.runUntilIdle();
    // Before the check, every event was linked to the application it names: a globex deletion, as
    // a database from then holds it.
    await post(GLOBEX, envelope({ id: 'evt_globex_1', event_type: 'job_application.deleted', created_at: '2026-11-02T09:05:00Z', payload: { id: APP, status: 'applied', created_at: '2026-11-02T09:00:00Z' } }));
    for (let i = 0; i < 3; i++) {
      clock.advance(60_000);
      await rcv.app.worker.runUntilIdle();
    }
    db.prepare("INSERT INTO application_events (application_id, event_id) VALUES (?, 'evt_globex_1')").run(APP);

    await post(GLOBEX, envelope({ id: 'evt_globex_2', event_type: 'application.status_changed', created_at: '2026-11-02T09:11:00Z', payload: { ...app('hired', 'Mallory'), previous_status: 'applied' } }));
    await post(ACME, envelope({ id: 'evt_acme_2', event_type: 'application.status_changed', created_at: '2026-11-02T09:10:00Z', payload: { ...app('interviewing', 'Ann'), previous_status: 'applied' } }));
    for (let i = 0; i < 3; i++) {
      clock.advance(60_000);
      await rcv.app.worker.runUntilIdle();
    }

    // acme's new event folds (the application is not stopped for good), globex's old one no longer counts.
    expect(db.prepare('SELECT source, status, candidate_first_name, deleted_at FROM applications WHERE id = ?').get(APP)).toEqual({
      source: 'acme',
      status: 'interviewing',
      candidate_first_name: 'Ann',
      deleted_at: null,
    });
    expect(db.prepare("SELECT state FROM event_processing WHERE event_id = 'evt_acme_2'").get()).toEqual({ state: 'settled' });
    const dead = db.prepare("SELECT event_id, last_error FROM jobs WHERE state = 'dead' ORDER BY event_id").all() as { event_id: string; last_error: string }[];
    expect(dead.map((d) => d.event_id)).toEqual(['evt_globex_1', 'evt_globex_2']);
    for (const d of dead) expect(d.last_error).toMatch(/application .* belongs to source "acme".*signed by source "globex"/);
  }, 30_000);
});
