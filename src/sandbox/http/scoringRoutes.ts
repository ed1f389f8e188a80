import { Hono } from 'hono';
import type { SandboxContext } from '../context.js';
import { readScoring } from '../scoring/readiness.js';
import { SCORING_RESOURCES, type ScoringResource } from '../types.js';
import { methodNotAllowed, notFound } from './apiError.js';
import type { AuthEnv } from './auth.js';

/**
 * One poll of a result, for readGaps() (spec 8): a GET of an application of the reader's
 * organization, whatever it was answered (an injected fault too). Not a HEAD (Hono answers it
 * with the GET handler, but it reads no result), nor a read of an id the organization does not
 * have (a 404: no poll of any result of its own, and nothing to grow the record with).
 */
function notePoll(ctx: SandboxContext, method: string, of: { organizationId: string; applicationId: string; resource: string }, arrivedAt: number): void {
  if (method !== 'GET') return;
  try {
    ctx.store.application(of.organizationId, of.applicationId);
  } catch {
    return;
  }
  ctx.reads.noteRead(of, arrivedAt);
}

/** Spec 4.2 + 3.6: v2 scoring reads under /api/v2/applications/{id}/… */
export function v2ScoringRoutes(ctx: SandboxContext): Hono<AuthEnv> {
  const app = new Hono<AuthEnv>();
  for (const resource of SCORING_RESOURCES) {
    const path = `/:id/${resource}`;
    app.get(path, (c) => {
      const arrivedAt = ctx.clock.now();
      return ctx.reads.serve(() => {
        const id = c.req.param('id') ?? '';
        notePoll(ctx, c.req.method, { organizationId: c.get('organizationId'), applicationId: id, resource }, arrivedAt);
        const fault = ctx.faults.take(resource, id);
        if (fault !== undefined) return fault;
        // 404 only for an unknown application or another organization's (4.2); never for work in progress.
        const application = ctx.store.application(c.get('organizationId'), id);
        return c.json(readScoring(application.scoring[resource as ScoringResource], ctx.clock.now()));
      });
    });
    app.all(path, methodNotAllowed);
  }
  return app;
}

/** Spec 4.1 + 2.3: GET /api/v1/applications/{application_id}/interview. */
export function v1InterviewRoutes(ctx: SandboxContext): Hono<AuthEnv> {
  const app = new Hono<AuthEnv>();
  app.get('/:id/interview', (c) => {
    const arrivedAt = ctx.clock.now();
    return ctx.reads.serve(() => {
      const id = c.req.param('id');
      notePoll(ctx, c.req.method, { organizationId: c.get('organizationId'), applicationId: id, resource: 'v1-interview' }, arrivedAt);
      const fault = ctx.faults.take('v1-interview', id);
      if (fault !== undefined) return fault;
      const application = ctx.store.application(c.get('organizationId'), id);
      // Assumption: before any interview call exists, v1 answers 404 (it has no readiness envelope).
      if (application.interviewCall === null) throw notFound('No interview for this application yet.');
      const call = application.interviewCall;
      // Finished but not scored yet (resultDelayMs): the record as it is while the call is being
      // evaluated (spec 3.1, 3.2: status processing, phase evaluating, no output yet).
      if (call.readyAt !== undefined && call.readyAt > ctx.clock.now()) {
        return c.json({ ...call.detail, status: 'processing', pipeline_phase: 'evaluating', output: null });
      }
      return c.json(call.detail);
    });
  });
  app.all('/:id/interview', methodNotAllowed);
  return app;
}
