import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/util/clock.js';
import { newSecret, postSigned } from '../helpers/signing.js';
import { startReceiver } from '../helpers/receiver.js';

const APP = 'a7d1c3e0-0000-4000-8000-000000000051';
const JOB = { id: 'job-1', title: 'Backend Engineer' };
const cand = { first_name: 'Grace', last_name: 'Hopper', email: 'grace@example.com', phone_number: '+15555550100' };
const at = (minute: number) => new Date(Date.UTC(2026, 10, 1, 9, minute)).toISOString();
const application = (status: string) => ({ id: APP, external_id: 'ats-42', status, created_at: at(0) });

// Spec 6.4: the application block of every event carries the status; spec 6: an endpoint may take some event types only.
const CV = { id: 'cv1', created_at: at(2), event_type: 'cv_evaluation.completed', payload: { application: application('screened'), cv_evaluation: { id: 'cv-1', overall_score: 4 } } };
const INTERVIEW = {
  id: 'iv1', created_at: at(3), event_type: 'interview.completed',
  payload: { application: application('interviewed'), candidate: cand, job: JOB, interview: { id: 'iv-1', completed_at: at(3), result: { overall_score: 4, is_eligible: true } } },
};
const CREATED = { id: 'c1', created_at: at(0), event_type: 'application.created', payload: { application: application('applied'), candidate: cand, job: JOB } };

async function picture(events: object[][]) {
  const secret = newSecret();
  const clock = new ManualClock(Date.parse(at(10)));
  const r = await startReceiver({ WEBHOOK_SECRET: secret, WORKER_CONCURRENCY: '0' }, { clock });
  const seen: unknown[] = [];
  try {
    for (const step of events) {
      for (const e of step) {
        const res = await postSigned(r.url, secret, JSON.stringify({ webhook_id: 'wh_1', ...e }), { timestampSeconds: Math.floor(clock.now() / 1000) });
        expect(res.status).toBe(200);
      }
      await r.app.worker.runUntilIdle();
      seen.push(r.app.database.ingestSqlite.prepare('SELECT status, status_changed_at FROM applications WHERE id = ?').get(APP));
    }
    return seen;
  } finally {
    await r.close();
  }
}

describe('an application whose status events were not received', () => {
  it('takes its status from the newest application block of its other events, whatever their order', async () => {
    for (const order of [[CV, INTERVIEW], [INTERVIEW, CV]]) {
      expect(await picture([order])).toEqual([{ status: 'interviewed', status_changed_at: at(3) }]);
    }
  });

  it('is not taken back by an older application.created that arrives late (no status_changed taken): the newer block stands', async () => {
    for (const order of [[[INTERVIEW], [CREATED]], [[CREATED], [INTERVIEW]]]) {
      expect((await picture(order)).at(-1)).toEqual({ status: 'interviewed', status_changed_at: at(3) });
    }
  });

  it('yields to a status_changed once one is received, even an older one (the blocks of other events may lag behind the changes)', async () => {
    const CHANGED = {
      id: 'sc1', created_at: at(1), event_type: 'application.status_changed',
      payload: { application: application('screening'), previous_status: 'applied', candidate: cand, job: JOB },
    };
    expect(await picture([[INTERVIEW, CREATED], [CHANGED]])).toEqual([
      { status: 'interviewed', status_changed_at: at(3) },
      { status: 'screening', status_changed_at: at(1) },
    ]);
  });
});
