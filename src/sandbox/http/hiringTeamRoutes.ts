import { Hono } from 'hono';
import { z } from 'zod';
import { iso } from '../clock.js';
import type { SandboxContext } from '../context.js';
import { newId } from '../ids.js';
import { sameEmail } from '../organization.js';
import { JOB_ROLES, type HiringTeamMember, type JobRole, type OrganizationMember } from '../types.js';
import { ApiError, invalidInput, methodNotAllowed } from './apiError.js';
import type { AuthEnv } from './auth.js';
import { paginate } from './pagination.js';
import { readJsonObject, validate } from './readJson.js';

/** Spec 2.7: roles from the enum, possibly empty; a repeated role is kept once (assumption). */
const jobRoles = z.array(z.enum(JOB_ROLES)).transform((roles) => [...new Set<JobRole>(roles)]);
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** `null` counts as "not given" for the two identifiers (assumption). */
const createBody = z.object({
  email: z.email().max(254).nullable().optional(),
  organization_member: z.string().nullable().optional(),
  job_roles: jobRoles.optional(),
});
const updateBody = z.object({ job_roles: jobRoles.optional() });

/** Spec 2.7 view. */
export function hiringTeamView(row: HiringTeamMember): Record<string, unknown> {
  return { id: row.id, email: row.email, organization_member: row.organization_member, job_roles: [...row.job_roles], created_at: row.created_at };
}

/** Spec 4.4 + 3.5: a job's hiring team under /api/v2/jobs/{job_id}/hiring-team. */
export function hiringTeamRoutes(ctx: SandboxContext): Hono<AuthEnv> {
  const app = new Hono<AuthEnv>();
  const { store } = ctx;

  app.get('/:jobId/hiring-team', (c) => {
    const job = store.job(c.get('organizationId'), c.req.param('jobId'));
    return c.json(paginate(c.req.url, store.hiringTeamOf(job.id).map(hiringTeamView)));
  });

  app.post('/:jobId/hiring-team', async (c) => {
    const orgId = c.get('organizationId');
    const job = store.job(orgId, c.req.param('jobId'));
    const { body } = await readJsonObject(c);
    ctx.idempotency.precheck(c, orgId, body);
    const input = validate(createBody, body);
    const email = input.email ?? null;
    const memberId = input.organization_member ?? null;
    // Spec 4.4 + 7: exactly one of the two identifiers, else 400.
    if ((email === null) === (memberId === null)) {
      throw invalidInput('Provide exactly one of email or organization_member.');
    }
    let member: OrganizationMember | null = null;
    if (memberId !== null) {
      // Spec 4.4: the member must belong to the caller's organization; another organization's looks unknown.
      const found = UUID.test(memberId) ? store.members.get(memberId) : undefined;
      if (found === undefined || found.organizationId !== orgId) {
        throw ApiError.of(400, 'does_not_exist', `Invalid pk "${memberId}" - object does not exist.`, 'organization_member');
      }
      member = found;
    }
    // Spec 4.6: a replay answers before the duplicate check, which its own first try passed.
    return ctx.idempotency.handle(c, orgId, body, () => {
      // Spec 3.5: an email equal to a member's is matched at once, otherwise pending.
      // A matched row shows the member's email as the organization has it (assumption).
      member ??= store.membersOf(orgId).find((m) => sameEmail(m.user.email, email ?? '')) ?? null;
      const rowEmail = member?.user.email ?? email!.trim();
      // Spec 2.7 + 4.4: a person appears once per team, keyed by email, matched or pending.
      if (store.hiringTeamOf(job.id).some((row) => sameEmail(row.email, rowEmail))) {
        throw invalidInput('This person is already on the hiring team of this job.', memberId === null ? 'email' : 'organization_member');
      }
      const row: HiringTeamMember = {
        id: newId(),
        organizationId: orgId,
        jobId: job.id,
        email: rowEmail,
        organization_member: member?.id ?? null,
        job_roles: input.job_roles ?? [],
        created_at: iso(ctx.clock.now()),
      };
      store.hiringTeam.set(row.id, row);
      return { status: 201, body: hiringTeamView(row) };
    });
  });

  // Spec 4.4: `job_roles` replaces the whole list; 200 (assumption). Other fields are ignored.
  app.patch('/:jobId/hiring-team/:memberId', async (c) => {
    const job = store.job(c.get('organizationId'), c.req.param('jobId'));
    const row = store.hiringTeamMember(job.id, c.req.param('memberId'));
    const input = validate(updateBody, (await readJsonObject(c)).body);
    if (input.job_roles !== undefined) row.job_roles = input.job_roles;
    return c.json(hiringTeamView(row));
  });

  // Spec 4.4: removes the member; 204 (assumption).
  app.delete('/:jobId/hiring-team/:memberId', (c) => {
    const job = store.job(c.get('organizationId'), c.req.param('jobId'));
    const row = store.hiringTeamMember(job.id, c.req.param('memberId'));
    store.hiringTeam.delete(row.id);
    return c.body(null, 204);
  });

  app.all('/:jobId/hiring-team', methodNotAllowed);
  app.all('/:jobId/hiring-team/:memberId', methodNotAllowed);
  return app;
}
