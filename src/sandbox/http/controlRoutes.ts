import { Hono, type Context } from 'hono';
import { z } from 'zod';
import type { SandboxControl } from '../control.js';
import { SCENARIOS } from '../scenarios/runScenario.js';
import { APPLICATION_STATUSES, MEMBER_ROLES, SCORING_RESOURCES } from '../types.js';
import { ApiError, invalidInput } from './apiError.js';
import { readJsonObject, validate } from './readJson.js';

async function body<S extends z.ZodType>(c: Context, schema: S): Promise<z.output<S>> {
  return validate(schema, (await readJsonObject(c)).body);
}

const person = z.object({ first_name: z.string(), last_name: z.string(), email: z.string(), phone_number: z.string() }).partial();
const score = z.number().min(0).max(5);

/**
 * Scenario control under /_sandbox: unauthenticated, because it stands for what happens inside the
 * hiring service (candidates applying, interviews ending), not for its public API. The sandbox binds
 * 127.0.0.1 by default. Errors use the same envelope as the API (spec 2.1).
 */
export function controlRoutes(control: SandboxControl): Hono {
  const app = new Hono();

  app.get('/organizations', (c) => c.json(control.organizations()));
  app.post('/organizations/:id/keys', async (c) => {
    // expires_at: spec 5.2's optional expiry date (an ISO 8601 date-time with its offset), so a
    // standalone sandbox can play a key that dies while a receiver uses it.
    const input = await body(c, z.object({ name: z.string().optional(), key: z.string().optional(), expires_at: z.iso.datetime({ offset: true }).optional() }));
    const { expires_at, ...rest } = input;
    return c.json({ key: control.addApiKey(c.req.param('id'), { ...rest, ...(expires_at === undefined ? {} : { expiresAt: Date.parse(expires_at) }) }) }, 201);
  });
  app.get('/organizations/:id/members', (c) => c.json(control.members(c.req.param('id'))));
  app.post('/organizations/:id/members', async (c) => {
    const input = await body(c, z.object({ first_name: z.string(), last_name: z.string(), email: z.string(), role: z.enum(MEMBER_ROLES).optional() }));
    return c.json(control.addMember(c.req.param('id'), input), 201);
  });
  app.post('/keys/revoke', async (c) => {
    control.revokeKey((await body(c, z.object({ key: z.string() }))).key);
    return c.body(null, 204);
  });
  app.post('/keys/restrict', async (c) => {
    const input = await body(c, z.object({ key: z.string(), restricted: z.boolean().optional() }));
    control.restrictKey(input.key, input.restricted ?? true);
    return c.body(null, 204);
  });

  app.post('/jobs', async (c) => {
    const input = await body(c, z.object({ organization_id: z.string().optional(), title: z.string().optional(), legacy: z.boolean().optional() }));
    const { organization_id, ...rest } = input;
    return c.json(control.createJob({ ...rest, ...(organization_id === undefined ? {} : { organizationId: organization_id }) }), 201);
  });
  app.post('/applications', async (c) => {
    const input = await body(c, z.object({ job_id: z.string(), candidate: person.optional(), external_id: z.string().nullable().optional(), status: z.enum(APPLICATION_STATUSES).optional() }));
    const candidate = input.candidate === undefined ? {} : Object.fromEntries(Object.entries(input.candidate).filter(([, v]) => v !== undefined));
    return c.json(control.createApplication({ jobId: input.job_id, candidate, externalId: input.external_id ?? null, ...(input.status === undefined ? {} : { status: input.status }) }), 201);
  });
  app.post('/applications/:id/status', async (c) => {
    const input = await body(c, z.object({ status: z.enum(APPLICATION_STATUSES) }));
    return c.json(control.setApplicationStatus(c.req.param('id'), input.status));
  });
  app.post('/applications/:id/interview', async (c) => {
    const input = await body(c, z.object({
      outcome: z.enum(['completed', 'unreachable', 'failed', 'opted_out']).optional(),
      eligible: z.boolean().optional(),
      failed_qualifications: z.array(z.string()).optional(),
      not_assessed: z.array(z.string()).optional(),
      competency_scores: z.array(z.number().int().min(1).max(5)).optional(),
    }));
    const { failed_qualifications, not_assessed, competency_scores, ...rest } = input;
    return c.json(control.completeInterview(c.req.param('id'), {
      ...rest,
      ...(failed_qualifications === undefined ? {} : { failedQualifications: failed_qualifications }),
      ...(not_assessed === undefined ? {} : { notAssessed: not_assessed }),
      ...(competency_scores === undefined ? {} : { competencyScores: competency_scores }),
    }));
  });
  app.post('/applications/:id/opt-out', async (c) => {
    control.optOut(c.req.param('id'), (await body(c, z.object({ note: z.string().optional() }))).note);
    return c.body(null, 204);
  });
  app.post('/applications/:id/unavailable', async (c) => {
    const input = await body(c, z.object({ resource: z.enum(SCORING_RESOURCES), reason: z.enum(['interview_not_available', 'scoring_failed', 'no_result']) }));
    control.markUnavailable(c.req.param('id'), input.resource, input.reason);
    return c.body(null, 204);
  });
  app.post('/applications/:id/cv-evaluation', async (c) => {
    const input = await body(c, z.object({ overall_score: score.optional() }));
    return c.json(control.completeCvEvaluation(c.req.param('id'), input.overall_score === undefined ? {} : { overallScore: input.overall_score }));
  });
  app.post('/applications/:id/insights', async (c) => {
    const input = await body(c, z.object({ overall_score: score.optional() }));
    return c.json(control.completeInsights(c.req.param('id'), input.overall_score === undefined ? {} : { overallScore: input.overall_score }));
  });
  app.delete('/applications/:id', (c) => {
    control.deleteApplication(c.req.param('id'));
    return c.body(null, 204);
  });

  app.post('/scenarios/:name', async (c) => {
    const name = c.req.param('name');
    const scenario = SCENARIOS.find((s) => s === name);
    if (scenario === undefined) throw invalidInput(`Unknown scenario; use one of ${SCENARIOS.join(', ')}.`, 'name');
    const input = await body(c, z.object({ organization_id: z.string().optional(), external_id: z.string().nullable().optional(), delete_at_end: z.boolean().optional() }));
    return c.json(control.runScenario(scenario, {
      ...(input.organization_id === undefined ? {} : { organizationId: input.organization_id }),
      externalId: input.external_id ?? null,
      deleteAtEnd: input.delete_at_end ?? false,
    }), 201);
  });
  app.post('/events', async (c) => {
    const input = await body(c, z.object({ organization_id: z.string().optional(), event_type: z.string().min(1), payload: z.record(z.string(), z.unknown()), id: z.string().optional() }));
    return c.json(control.emitEvent({ eventType: input.event_type, payload: input.payload, ...(input.organization_id === undefined ? {} : { organizationId: input.organization_id }), ...(input.id === undefined ? {} : { id: input.id }) }), 201);
  });

  app.post('/faults', async (c) => {
    const input = await body(c, z.object({
      target: z.enum(['interview', 'cv-evaluation', 'insights', 'v1-interview', '*']),
      application_id: z.string().optional(),
      status: z.number().int().min(200).max(599),
      times: z.number().int().min(1).optional(),
      headers: z.record(z.string(), z.string()).optional(),
      body: z.unknown().optional(),
    }));
    control.injectFault({ target: input.target, applicationId: input.application_id, status: input.status, times: input.times, headers: input.headers, body: input.body });
    return c.body(null, 204);
  });
  app.delete('/faults', (c) => {
    control.clearFaults();
    return c.body(null, 204);
  });

  app.get('/chaos', (c) => c.json(control.chaos()));
  app.patch('/chaos', async (c) => {
    const input = await body(c, z.strictObject({ duplicateRate: z.number().min(0).max(1), reorder: z.boolean(), parallel: z.boolean(), delayMs: z.number().min(0), timestampOffsetMs: z.number() }).partial());
    return c.json(control.setChaos(Object.fromEntries(Object.entries(input).filter(([, v]) => v !== undefined))));
  });
  app.patch('/settings', async (c) => {
    const input = await body(
      c,
      z
        .strictObject({ result_delay_ms: z.number().min(0), read_delay_ms: z.number().min(0) })
        .partial()
        .refine((v) => v.result_delay_ms !== undefined || v.read_delay_ms !== undefined, 'Give result_delay_ms, read_delay_ms or both.'),
    );
    if (input.result_delay_ms !== undefined) control.setResultDelay(input.result_delay_ms);
    if (input.read_delay_ms !== undefined) control.setReadDelay(input.read_delay_ms);
    return c.body(null, 204);
  });
  app.get('/read-gaps', (c) =>
    c.json(control.readGaps().map((g) => ({ organization_id: g.organizationId, application_id: g.applicationId, resource: g.resource, reads: g.reads, shortest_gap_ms: g.shortestGapMs }))),
  );
  app.get('/reads', (c) => {
    const { inFlight, answered } = control.reads();
    return c.json({ in_flight: inFlight, answered });
  });

  app.get('/deliveries', (c) => {
    // An empty value (`?webhook_id=&event_id=`, the documented form) is no filter, not a filter on "".
    const webhookId = c.req.query('webhook_id') || undefined;
    const eventId = c.req.query('event_id') || undefined;
    return c.json(control.deliveries({ ...(webhookId === undefined ? {} : { webhookId }), ...(eventId === undefined ? {} : { eventId }) }));
  });
  app.post('/deliveries/wait', async (c) => {
    const input = await body(c, z.object({ timeout_ms: z.number().int().min(1).max(600_000).optional() }));
    try {
      await control.waitForDeliveries(input.timeout_ms === undefined ? {} : { timeoutMs: input.timeout_ms });
    } catch (e) {
      // Not the caller's mistake nor a crash: the wait ended with deliveries still pending (a
      // receiver that is down, retries hours away). Said as such, with how many.
      const message = e instanceof Error ? e.message : String(e);
      if (!/^deliveries still pending after /.test(message)) throw e;
      throw new ApiError(504, [{ code: 'timeout', detail: message, attr: null }], {});
    }
    return c.json({ pending: control.pendingDeliveries() });
  });
  app.post('/clock/advance', async (c) => {
    const input = await body(c, z.object({ ms: z.number().min(0) }));
    try {
      await control.advance(input.ms);
    } catch (e) {
      throw invalidInput((e as Error).message, 'ms');
    }
    return c.json({ now: new Date(control.now()).toISOString() });
  });
  return app;
}
