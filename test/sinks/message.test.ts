import { afterEach, describe, expect, it } from 'vitest';
import { buildMessage } from '../../src/sinks/buildMessage.js';
import { FanOut } from '../../src/sinks/FanOut.js';
import { matchesEventType } from '../../src/sinks/matchesSink.js';
import { messageIdFor } from '../../src/sinks/messageId.js';
import { newSecret } from '../helpers/signing.js';
import { startConsumer, startFakeHiringApi, startHarness, type Consumer, type Harness } from './helpers.js';

const closers: { close(): Promise<void> }[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c.close();
});
const keep = <T extends { close(): Promise<void> }>(c: T): T => (closers.push(c), c);

const APP = 'a7d1c3e0-0000-4000-8000-0000000000a1';
const LEGACY_APP = 'a7d1c3e0-0000-4000-8000-0000000000a2';
const at = (m: number) => new Date(Date.UTC(2026, 10, 1, 9, m)).toISOString();
const application = { id: APP, external_id: 'ats-9', status: 'interviewed', created_at: at(0) };
const cand = { first_name: 'Ada', last_name: 'Lovelace', email: 'ada@example.com' };
const job = { id: 'job-1', title: 'Engineer' };
const ev = (id: string, event_type: string, payload: Record<string, unknown>) => ({ id, created_at: at(1), webhook_id: 'wh_1', event_type, payload });

const EVENTS = [
  ev('e-created', 'application.created', { application: { ...application, status: 'applied' }, candidate: cand, job }),
  ev('e-status', 'application.status_changed', { application, candidate: cand, job, previous_status: 'applied' }),
  ev('e-interview', 'interview.completed', {
    application, job, candidate: { ...cand, phone_number: '+15555550100' },
    interview: { id: 'iv-1', completed_at: at(1), result: { overall_score: 2.1, is_eligible: false, summary: 's', strengths: [], weaknesses: [], red_flags: [] } },
  }),
  ev('e-cv', 'cv_evaluation.completed', { application, cv_evaluation: { id: 'cv-1', overall_score: 3 } }),
  ev('e-insights', 'insights.completed', { application, insights: { overall_score: 4, hiring_recommendation: 'yes', is_eligible: true } }),
  ev('e-legacy', 'interview_v2.completed', { application_id: LEGACY_APP }),
  // The snapshot as spec 6.4 lists it: no external_id; the message takes it from the stored application.
  ev('e-deleted', 'job_application.deleted', { id: APP, status: 'interviewed', created_at: at(0), candidate: cand, job }),
  ev('e-unknown', 'candidate.teleported', { anything: [1, 'two', { three: null }] }),
];

const INTERVIEW = { status: 'completed', overall_score: 2.1, is_eligible: false, ineligibility_reasons: ['work permit'], criteria_results: [] };
const INSIGHTS = { overall_score: 4, hiring_recommendation: 'yes', is_eligible: true };
const LEGACY = { id: 'call-1', status: 'completed', job_application_id: LEGACY_APP, output: { overall_score: '3.50' } };
const API = {
  [`/api/v2/applications/${APP}/interview`]: INTERVIEW,
  [`/api/v2/applications/${APP}/cv-evaluation`]: { status: 'unavailable', reason: 'scoring_failed', result: null },
  [`/api/v2/applications/${APP}/insights`]: INSIGHTS,
  [`/api/v1/applications/${LEGACY_APP}/interview`]: LEGACY,
};

async function withAllEvents(sinks: (c: Consumer, secret: string) => Record<string, unknown>[]) {
  const api = keep(await startFakeHiringApi(API));
  const secret = newSecret();
  const consumer = keep(await startConsumer({ '/all': secret }));
  const h = keep(await startHarness({ sinks: sinks(consumer, secret) }, { hiringApiUrl: api.url }));
  for (const e of EVENTS) await h.post(e);
  await h.settle();
  return { h, consumer, api };
}

describe('the message (public contract)', () => {
  it('has the full shape for each event type, with the fetched result and needs_review', async () => {
    const { h, consumer } = await withAllEvents((c, secret) => [
      { name: 'everything', type: 'http', url: `${c.url}/all`, secret },
      { name: 'console', type: 'stdout' },
    ]);
    const byId = new Map(consumer.received.map((r) => [r.message!.id as string, r.message!]));
    expect([...byId.keys()].sort()).toEqual(EVENTS.map((e) => e.id).sort());
    const row = (id: string) => h.r.app.database.ingestSqlite.prepare('SELECT received_at FROM events WHERE id = ?').get(id) as { received_at: string };
    const base = (e: (typeof EVENTS)[number]) => ({
      id: e.id, event_type: e.event_type, created_at: at(1), received_at: row(e.id).received_at, source: 'default', webhook_id: 'wh_1', revision: 1, payload: e.payload,
    });
    const fetched = expect.any(String);
    const e = (id: string) => EVENTS.find((x) => x.id === id)!;
    const [created, status, interview, cv, insights, legacy, deleted, unknown] = [
      e('e-created'), e('e-status'), e('e-interview'), e('e-cv'), e('e-insights'), e('e-legacy'), e('e-deleted'), e('e-unknown'),
    ];
    expect(byId.get(created.id)).toEqual({ ...base(created), application_id: APP, external_id: 'ats-9', result: null, needs_review: false });
    expect(byId.get(status.id)).toEqual({ ...base(status), application_id: APP, external_id: 'ats-9', result: null, needs_review: false });
    expect(byId.get(interview.id)).toEqual({
      ...base(interview), application_id: APP, external_id: 'ats-9',
      result: { resource: 'interview', state: 'ready', reason: null, data: INTERVIEW, fetched_at: fetched },
      needs_review: true,
    });
    expect(byId.get(cv.id)).toEqual({
      ...base(cv), application_id: APP, external_id: 'ats-9',
      result: { resource: 'cv_evaluation', state: 'unavailable', reason: 'scoring_failed', data: null, fetched_at: fetched },
      needs_review: false,
    });
    expect(byId.get(insights.id)).toEqual({
      ...base(insights), application_id: APP, external_id: 'ats-9',
      result: { resource: 'insights', state: 'ready', reason: null, data: INSIGHTS, fetched_at: fetched }, needs_review: false,
    });
    expect(byId.get(legacy.id)).toEqual({
      ...base(legacy), application_id: LEGACY_APP, external_id: null,
      result: { resource: 'legacy_interview', state: 'ready', reason: null, data: LEGACY, fetched_at: fetched }, needs_review: false,
    });
    expect(byId.get(deleted.id)).toEqual({ ...base(deleted), application_id: APP, external_id: 'ats-9', result: null, needs_review: false });
    expect(byId.get(unknown.id)).toEqual({ ...base(unknown), application_id: null, external_id: null, result: null, needs_review: false });
    // The stdout sink receives the same messages, one NDJSON line each.
    expect(new Map(h.stdout.messages().map((m) => [m.id, m]))).toEqual(byId);
  });

  it('envelope fields the spec does not list yet reach the sinks, under envelope_extra; a message without any has no such key', async () => {
    const h = keep(await startHarness({ sinks: [{ name: 'console', type: 'stdout' }] }));
    const added = { api_version: '2027-01-01', attempt: 2, organization: { id: 'org-1' }, created_at_ms: null };
    await h.post({ ...ev('e-new-fields', 'application.created', { application, candidate: cand, job }), ...added });
    await h.post(ev('e-plain', 'application.created', { application, candidate: cand, job }));
    await h.settle();
    const byId = new Map(h.stdout.messages().map((m) => [m.id, m]));
    expect(byId.get('e-new-fields')).toMatchObject({ id: 'e-new-fields', webhook_id: 'wh_1', created_at: at(1), envelope_extra: added });
    expect(byId.get('e-plain')).not.toHaveProperty('envelope_extra');
  });

  it('needs_review comes from the result too, when the event payload says nothing', async () => {
    const api = keep(await startFakeHiringApi({ [`/api/v2/applications/${APP}/insights`]: { ...INSIGHTS, is_eligible: false } }));
    const h = keep(await startHarness({ sinks: [{ name: 'console', type: 'stdout' }] }, { hiringApiUrl: api.url }));
    await h.post(ev('e-ins', 'insights.completed', { application, insights: { overall_score: 4 } }));
    await h.settle();
    expect(h.stdout.messages()).toEqual([expect.objectContaining({ id: 'e-ins', needs_review: true })]);
  });

  it('needs_review comes from the event payload too, when the result has no verdict (unavailable)', async () => {
    const api = keep(await startFakeHiringApi({ [`/api/v2/applications/${APP}/interview`]: { status: 'unavailable', reason: 'scoring_failed', result: null } }));
    const h = keep(await startHarness({ sinks: [{ name: 'console', type: 'stdout' }] }, { hiringApiUrl: api.url }));
    await h.post(ev('e-iv', 'interview.completed', { application, interview: { id: 'iv-1', result: { overall_score: 1, is_eligible: false } } }));
    await h.settle();
    expect(h.stdout.messages()).toEqual([expect.objectContaining({ id: 'e-iv', result: expect.objectContaining({ state: 'unavailable', data: null }), needs_review: true })]);
  });

  it('review reasons gather every result of the application in one order: interview, insights, then legacy knockouts, each once', async () => {
    const knockedOut = {
      ...LEGACY, job_application_id: APP, pipeline_phase: 'knocked_out',
      output: { overall_score: '1.00', questions: [{ id: 'q1', question: 'Work permit?', score: 0, is_knockout: true, is_knocked_out: true }], criteria_scores: [] },
    };
    const api = keep(await startFakeHiringApi({
      [`/api/v2/applications/${APP}/interview`]: { ...INTERVIEW, ineligibility_reasons: ['work permit', { code: 'salary', max: 1 }] },
      [`/api/v2/applications/${APP}/insights`]: { ...INSIGHTS, is_eligible: false, ineligibility_reasons: ['relocation', 'work permit'] },
      [`/api/v1/applications/${APP}/interview`]: knockedOut,
    }));
    const h = keep(await startHarness({ sinks: [{ name: 'console', type: 'stdout' }] }, { hiringApiUrl: api.url }));
    // Arrival order opposite to the order of the reasons.
    await h.post(ev('e-legacy-ko', 'interview_v2.completed', { application_id: APP }));
    await h.post(ev('e-ins', 'insights.completed', { application, insights: { overall_score: 4 } }));
    await h.post(ev('e-iv', 'interview.completed', { application, interview: { id: 'iv-1' } }));
    await h.settle();
    const app = h.r.app.database.ingestSqlite.prepare('SELECT needs_review, review_reasons FROM applications WHERE id = ?').get(APP) as { needs_review: number; review_reasons: string };
    expect(app.needs_review).toBe(1);
    expect(JSON.parse(app.review_reasons)).toEqual(['work permit', '{"code":"salary","max":1}', 'relocation', 'knocked out: Work permit?']);
  });

  it('a blank decimal-string score is stored as no score, not as 0', async () => {
    const api = keep(await startFakeHiringApi({ [`/api/v1/applications/${LEGACY_APP}/interview`]: { ...LEGACY, output: { overall_score: ' ' } } }));
    const h = keep(await startHarness({ sinks: [{ name: 'console', type: 'stdout' }] }, { hiringApiUrl: api.url }));
    await h.post(ev('e-legacy-blank', 'interview_v2.completed', { application_id: LEGACY_APP }));
    await h.settle();
    const row = h.r.app.database.ingestSqlite.prepare('SELECT state, overall_score FROM legacy_interview_results WHERE application_id = ?').get(LEGACY_APP);
    expect(row).toEqual({ state: 'ready', overall_score: null });
  });

  it('a legacy interview that knocked the candidate out needs review, with the failed question and criterion as reasons', async () => {
    const knockedOut = {
      ...LEGACY,
      pipeline_phase: 'knocked_out',
      output: {
        overall_score: '1.20',
        questions: [
          { id: 'q1', question: 'Do you hold a work permit?', score: 0, is_knockout: true, is_knocked_out: true },
          { id: 'q2', question: 'Favourite language?', score: 4, is_knockout: false, is_knocked_out: false },
        ],
        criteria_scores: [
          { id: 'c1', score: 20, is_knockout: true, criteria: { criteria: 'German C1', score_system: 'percentage', is_knockout: true, knockout_threshold: 60 } },
          { id: 'c2', score: 90, is_knockout: true, criteria: { criteria: 'English', score_system: 'percentage', is_knockout: true, knockout_threshold: 60 } },
        ],
      },
    };
    const api = keep(await startFakeHiringApi({ [`/api/v1/applications/${LEGACY_APP}/interview`]: knockedOut }));
    const h = keep(await startHarness({ sinks: [{ name: 'console', type: 'stdout' }] }, { hiringApiUrl: api.url }));
    await h.post(ev('e-ko', 'interview_v2.completed', { application_id: LEGACY_APP }));
    await h.settle();
    expect(h.stdout.messages()).toEqual([expect.objectContaining({ id: 'e-ko', needs_review: true })]);
    const app = h.r.app.database.ingestSqlite.prepare('SELECT needs_review, review_reasons FROM applications WHERE id = ?').get(LEGACY_APP) as { needs_review: number; review_reasons: string };
    expect(app.needs_review).toBe(1);
    expect(JSON.parse(app.review_reasons)).toEqual(['knocked out: Do you hold a work permit?', 'knockout criterion failed: German C1']);
  });

  it('is sent only once the result is final, never while it is processing', async () => {
    const api = keep(await startFakeHiringApi({ [`/api/v2/applications/${APP}/insights`]: { status: 'processing', reason: null, result: null } }));
    const h = keep(await startHarness({ sinks: [{ name: 'console', type: 'stdout' }] }, { hiringApiUrl: api.url }));
    await h.post(ev('e-ins', 'insights.completed', { application, insights: { overall_score: 4 } }));
    await h.settle();
    expect(h.stdout.lines).toEqual([]);
    expect(h.deliveries()).toEqual([]);
    api.results[`/api/v2/applications/${APP}/insights`] = INSIGHTS;
    h.clock.advance(30_000);
    await h.settle();
    expect(h.stdout.messages()).toEqual([expect.objectContaining({ id: 'e-ins', result: expect.objectContaining({ state: 'ready', data: INSIGHTS }) })]);
  });

  it('waits, without counting attempts, while the result is being fetched again', async () => {
    const api = keep(await startFakeHiringApi({ [`/api/v2/applications/${APP}/insights`]: INSIGHTS }));
    const h = keep(await startHarness({ sinks: [{ name: 'console', type: 'stdout' }] }, { hiringApiUrl: api.url }));
    await h.post(ev('e-ins', 'insights.completed', { application, insights: { overall_score: 4 } }));
    await h.settle();
    expect(h.stdout.lines).toHaveLength(1);
    // A newer event of the application is re-polling the result when a replay runs.
    const sqlite = h.r.app.database.ingestSqlite;
    sqlite.prepare("UPDATE insights_results SET state = 'processing' WHERE application_id = ?").run(APP);
    await h.r.app.database.db.transaction().execute((trx) => h.r.app.fanOut.enqueueDeliveries(trx, 'e-ins'));
    await h.settle();
    expect(h.stdout.lines).toHaveLength(1);
    expect(sqlite.prepare("SELECT state, attempts FROM jobs WHERE kind = 'sink:console' AND state = 'pending'").all()).toEqual([{ state: 'pending', attempts: 0 }]);
    sqlite.prepare("UPDATE insights_results SET state = 'ready' WHERE application_id = ?").run(APP);
    h.clock.advance(60_000);
    await h.settle();
    expect(h.stdout.messages().map((m) => [m.id, m.result.state])).toEqual([['e-ins', 'ready'], ['e-ins', 'ready']]);
  });

  it('buildMessage reports a missing event', async () => {
    const h = keep(await startHarness({ sinks: [] }));
    expect(await buildMessage(h.r.app.database.db, 'nope')).toEqual({ status: 'missing' });
  });
});

describe('filters', () => {
  it('matches exact names, prefix.* and *', () => {
    expect(matchesEventType(null, 'x.y')).toBe(true);
    expect(matchesEventType(['insights.*'], 'insights.completed')).toBe(true);
    expect(matchesEventType(['interview.*'], 'interview_v2.completed')).toBe(false);
    expect(matchesEventType(['interview.completed'], 'interview.completed')).toBe(true);
    expect(matchesEventType(['interview.completed'], 'interview.completed.extra')).toBe(false);
    expect(matchesEventType(['*'], 'anything')).toBe(true);
  });

  it('each sink receives exactly the events its type and source filters select', async () => {
    const acmeSecret = newSecret();
    const secrets = { '/types': newSecret(), '/acme': newSecret(), '/all': newSecret() };
    const consumer = keep(await startConsumer(secrets));
    const h = keep(
      await startHarness({
        sources: [{ name: 'acme', secrets: acmeSecret, api_url: 'http://127.0.0.1:9', api_key: 'sk-acme.key' }],
        sinks: [
          { name: 'types', type: 'http', url: `${consumer.url}/types`, secret: secrets['/types'], events: ['application.status_changed', 'job_application.*'] },
          { name: 'acme', type: 'http', url: `${consumer.url}/acme`, secret: secrets['/acme'], sources: ['acme'] },
          { name: 'everything', type: 'http', url: `${consumer.url}/all`, secret: secrets['/all'] },
        ],
      }),
    );
    const mk = (id: string, type: string) => ev(id, type, { application: { ...application, id: `${APP}-${id}` } });
    await h.post(mk('d-created', 'application.created'));
    await h.post(mk('d-status', 'application.status_changed'));
    await h.post(mk('d-deleted', 'job_application.deleted'));
    await h.post(mk('a-status', 'application.status_changed'), acmeSecret);
    await h.post(mk('a-created', 'application.created'), acmeSecret);
    await h.settle();
    const ids = (path: string) => consumer.on(path).map((r) => r.message!.id).sort();
    expect(consumer.received.every((r) => r.message !== null)).toBe(true);
    expect(ids('/types')).toEqual(['a-status', 'd-deleted', 'd-status']);
    expect(ids('/acme')).toEqual(['a-created', 'a-status']);
    expect(ids('/all')).toEqual(['a-created', 'a-status', 'd-created', 'd-deleted', 'd-status']);
    expect(consumer.on('/acme').every((r) => r.message!.source === 'acme')).toBe(true);
    expect(h.deliveries('types').map((d) => d.event_id).sort()).toEqual(['a-status', 'd-deleted', 'd-status']);
  });
});

describe('configuration changes and replay', () => {
  it('a newly added sink gets no stored event unless replayed; a replay keeps the webhook-id', async () => {
    const h: Harness = keep(await startHarness({ sinks: [{ name: 'console', type: 'stdout' }] }));
    const secret = newSecret();
    const consumer = keep(await startConsumer({ '/new': secret }));
    await h.post(ev('old-1', 'application.created', { application }));
    await h.settle();
    const cfg = { name: 'new', type: 'http' as const, events: null, sources: null, concurrency: 1, maxAttempts: 5, target: `${consumer.url}/new`, options: { url: `${consumer.url}/new`, secret, timeoutMs: 1000 } };
    // The same database, restarted with one more sink.
    const fan = new FanOut({ db: h.r.app.database.db, queue: h.r.app.queue, clock: h.clock, logger: h.r.app.logger, sinks: [cfg] });
    expect(await fan.runUntilIdle()).toBe(0);
    expect(consumer.received).toEqual([]);

    const replay = () => h.r.app.database.db.transaction().execute((trx) => fan.enqueueDeliveries(trx, 'old-1', { sinks: ['new'] }));
    expect(await replay()).toEqual(['new']);
    await fan.runUntilIdle();
    expect(await replay()).toEqual(['new']);
    expect(h.deliveries('new')[0]).toMatchObject({ state: 'pending', attempts: 0, delivered_at: null });
    await fan.runUntilIdle();
    expect(consumer.received.map((r) => r.headers['webhook-id'])).toEqual([messageIdFor('old-1', 'new'), messageIdFor('old-1', 'new')]);
    expect(consumer.received.every((r) => r.message?.id === 'old-1')).toBe(true);
    expect(h.deliveries('new')[0]).toMatchObject({ state: 'delivered', attempts: 1 });
    await expect(h.r.app.database.db.transaction().execute((trx) => fan.enqueueDeliveries(trx, 'old-1', { sinks: ['nope'] }))).rejects.toThrow(/no sink named "nope"/);
  });
});
