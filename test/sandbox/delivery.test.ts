import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createManualClock } from '../../src/sandbox/clock.js';
import { createSandbox } from '../../src/sandbox/createSandbox.js';
import { GLOBEX_KEY, startReceiver, startSandbox, subscribe, type Receiver, type Running } from './helpers.js';

describe('sending events (spec 6)', () => {
  let run: Running;
  let receiver: Receiver;
  beforeEach(async () => {
    run = await startSandbox();
    receiver = await startReceiver();
  });
  afterEach(async () => {
    await run.sandbox.stop();
    await receiver.close();
  });

  it('6.1, 6.2: a delivery is the envelope with Standard Webhooks headers that standardwebhooks verify accepts', async () => {
    const hook = await subscribe(run, receiver);
    const job = run.sandbox.control.createJob();
    const app = run.sandbox.control.createApplication({ jobId: job.id, externalId: 'ats-7' });
    await run.sandbox.control.idle();
    expect(receiver.requests).toHaveLength(1);
    const [req] = receiver.requests;
    expect(req!.verified).toBe(true);
    expect(req!.headers['webhook-id']).toMatch(/^msg_/);
    expect(req!.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
    expect(Math.abs(Number(req!.headers['webhook-timestamp']) - Date.now() / 1000)).toBeLessThan(60);
    expect(Object.keys(req!.body).sort()).toEqual(['created_at', 'event_type', 'id', 'payload', 'webhook_id']);
    expect(req!.body).toMatchObject({ event_type: 'application.created', webhook_id: hook.id });
    expect(req!.body.payload).toEqual({
      application: { id: app.id, external_id: 'ats-7', status: 'applied', created_at: app.created_at },
      candidate: { first_name: app.candidate.first_name, last_name: app.candidate.last_name, email: app.candidate.email, phone_number: app.candidate.phone_number },
      job: { id: job.id, title: job.title },
    });
    // A tampered body must fail the same verification.
    const { Webhook } = await import('standardwebhooks');
    expect(() => new Webhook(hook.secret).verify(req!.raw.replace('ats-7', 'ats-8'), req!.headers as Record<string, string>)).toThrow();
  });

  it('6.4: a whole life emits one event per change, and every application block carries external_id', async () => {
    await subscribe(run, receiver);
    const { application } = run.sandbox.control.runScenario('lifecycle', { deleteAtEnd: true });
    await run.sandbox.control.idle();
    const events = receiver.requests.map((r) => r.body);
    expect(receiver.requests.every((r) => r.verified)).toBe(true);
    expect(events.map((e) => e.event_type)).toEqual([
      'application.created',
      'application.status_changed',
      'interview.completed',
      'application.status_changed',
      'cv_evaluation.completed',
      'insights.completed',
      'application.status_changed',
      'job_application.deleted',
    ]);
    expect(new Set(events.map((e) => e.id)).size).toBe(8);
    for (const e of events.filter((e) => e.payload.application !== undefined)) {
      expect(e.payload.application, e.event_type).toHaveProperty('external_id', null);
      expect(e.payload.application.id).toBe(application.id);
    }
    const changes = events.filter((e) => e.event_type === 'application.status_changed').map((e) => [e.payload.previous_status, e.payload.application.status]);
    expect(changes).toEqual([['applied', 'screened'], ['screened', 'interviewed'], ['interviewed', 'hired']]);
    const interview = events.find((e) => e.event_type === 'interview.completed')!.payload;
    // Spec 6.4 lists interview.completed's candidate fields exactly; every event's block has those, no id.
    for (const e of events.filter((e) => e.payload.candidate !== undefined)) {
      expect(Object.keys(e.payload.candidate).sort(), e.event_type).toEqual(['email', 'first_name', 'last_name', 'phone_number']);
    }
    expect(interview.candidate.email).toMatch(/^[a-z]+\.[a-z]+\d+@example\.(com|org|net)$/);
    expect(interview.candidate.phone_number).toMatch(/^\+(1\d{3}5550\d{3}|447700900\d{3})$/);
    expect(Object.keys(interview.interview.result).sort()).toEqual(['is_eligible', 'overall_score', 'red_flags', 'strengths', 'summary', 'weaknesses']);
    expect(events.find((e) => e.event_type === 'cv_evaluation.completed')!.payload.cv_evaluation).toEqual({ id: expect.any(String), overall_score: expect.any(Number) });
    expect(Object.keys(events.find((e) => e.event_type === 'insights.completed')!.payload.insights).sort()).toEqual(['hiring_recommendation', 'is_eligible', 'overall_score']);
    const deleted = events.find((e) => e.event_type === 'job_application.deleted')!.payload;
    // Spec 6.4's snapshot, exactly: id, status, created_at, candidate, job.
    expect(Object.keys(deleted).sort()).toEqual(['candidate', 'created_at', 'id', 'job', 'status']);
    expect(deleted).toMatchObject({ id: application.id, status: 'hired', created_at: application.created_at });
    expect(deleted.candidate.email).toBe(application.candidate.email);
    expect((await run.api(`/api/v2/applications/${application.id}/interview`)).status).toBe(404);
  });

  it('6.4: a legacy job emits interview_v2.completed instead of interview.completed', async () => {
    await subscribe(run, receiver);
    const { application } = run.sandbox.control.runScenario('legacy', { externalId: 'legacy-1' });
    await run.sandbox.control.idle();
    const types = receiver.requests.map((r) => r.body.event_type);
    expect(types).toContain('interview_v2.completed');
    expect(types).not.toContain('interview.completed');
    const legacy = receiver.requests.find((r) => r.body.event_type === 'interview_v2.completed')!.body.payload;
    expect(legacy.application).toMatchObject({ id: application.id, external_id: 'legacy-1' });
  });

  it('6: only enabled endpoints of the same organization whose event_types hold the event (or are empty) receive it', async () => {
    const only = await startReceiver();
    const paused = await startReceiver();
    const foreign = await startReceiver();
    try {
      await subscribe(run, receiver);
      await subscribe(run, only, { event_types: ['interview.completed'] });
      await subscribe(run, paused, { enabled: false });
      await subscribe(run, foreign, {}, GLOBEX_KEY);
      run.sandbox.control.runScenario('lifecycle');
      await run.sandbox.control.idle();
      expect(receiver.requests).toHaveLength(7);
      expect(only.requests.map((r) => r.body.event_type)).toEqual(['interview.completed']);
      expect(only.requests[0]!.verified).toBe(true);
      expect(paused.requests).toHaveLength(0);
      expect(foreign.requests).toHaveLength(0);
    } finally {
      await Promise.all([only.close(), paused.close(), foreign.close()]);
    }
  });

  it('6.4: unknown event types can be emitted for tests; 2.11: each attempt is readable through deliveries', async () => {
    const hook = await subscribe(run, receiver);
    const { id } = run.sandbox.control.emitEvent({ eventType: 'candidate.teleported', payload: { application: { id: 'x', external_id: null } } });
    await run.sandbox.control.idle();
    expect(receiver.requests[0]!.body).toMatchObject({ id, event_type: 'candidate.teleported' });
    const res = await run.api(`/api/v2/webhooks/${hook.id}/deliveries`);
    expect(res.body.count).toBe(1);
    expect(res.body.results[0]).toMatchObject({ webhook_id: hook.id, event_id: id, event_type: 'candidate.teleported', attempt: 1, status: 'succeeded', response_code: 204, error: null, next_attempt_at: null });
  });

  it('4.5: a rotated secret signs the next deliveries', async () => {
    const hook = await subscribe(run, receiver);
    const rotated = await run.api(`/api/v2/webhooks/${hook.id}/rotate-secret`, { method: 'POST' });
    receiver.secret = rotated.body.secret;
    run.sandbox.control.emitEvent({ eventType: 'application.created', payload: {} });
    await run.sandbox.control.idle();
    expect(receiver.requests[0]!.verified).toBe(true);
  });
});

describe('stopping with an attempt in flight', () => {
  it('the attempt stop() cut short announces no retry, and nothing is left pending', async () => {
    // The cut attempt was recorded as failed with a retry due in 2 minutes, and that retry sat in
    // the stopped scheduler: pendingDeliveries() said 1 for ever, for a retry that never comes.
    const run = await startSandbox({ clock: createManualClock() });
    const receiver = await startReceiver(() => undefined /* never answers */);
    try {
      await subscribe(run, receiver);
      run.sandbox.control.emitEvent({ eventType: 'application.created', payload: {} });
      void run.sandbox.control.idle();
      for (let i = 0; i < 500 && receiver.requests.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
      expect(receiver.requests).toHaveLength(1);
      await run.sandbox.stop();
      for (let i = 0; i < 500 && run.sandbox.control.deliveries().length === 0; i++) await new Promise((r) => setTimeout(r, 10));
      expect(run.sandbox.control.deliveries().map((d) => [d.status, d.error, d.retry_delay_ms, d.next_attempt_at])).toEqual([['failed', 'network_error', null, null]]);
      expect(run.sandbox.control.pendingDeliveries()).toBe(0);
    } finally {
      await receiver.close();
    }
  });
});

describe('starting again after stop()', () => {
  it('is refused, saying so, rather than serving an API whose deliveries never go out', async () => {
    // Started again, it answered 201 to a webhook and to everything else, and every event it
    // emitted then sat pending for ever: its scheduler and dispatcher end with stop().
    const sandbox = createSandbox();
    await sandbox.start(0, '127.0.0.1');
    await sandbox.stop();
    await expect(sandbox.start(0, '127.0.0.1')).rejects.toThrow(/stopped.*createSandbox\(\)/);
  });
});
