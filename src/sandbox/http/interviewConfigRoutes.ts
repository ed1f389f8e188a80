import { Hono, type Context } from 'hono';
import { z } from 'zod';
import type { SandboxContext } from '../context.js';
import type { JobRecord } from '../types.js';
import { ApiError, methodNotAllowed } from './apiError.js';
import type { AuthEnv } from './auth.js';
import { readJsonObject, validate } from './readJson.js';

/**
 * Spec 4.2: the two generate operations return drafts for review and save nothing. Their request
 * and response shapes are "not shown"; the sandbox's choice (docs/sandbox.md): an optional JSON
 * body `{count}` (1-10) and `{job_id, interview_config_id, criteria | questions}` with 200.
 */
const generateBody = z.object({ count: z.number().int().min(1).max(10).optional() });

interface CriterionDraft {
  name: string;
  description: string;
  type: 'competency' | 'qualification';
  is_required: boolean;
}

const criteriaPool = (job: JobRecord): CriterionDraft[] => [
  { name: 'Role experience', description: `Hands-on experience relevant to the ${job.title} role.`, type: 'competency', is_required: false },
  { name: 'Communication', description: 'Explains clearly and listens; adapts to the listener.', type: 'competency', is_required: false },
  { name: 'Reliability', description: 'Shows up on time and follows through on commitments.', type: 'competency', is_required: false },
  { name: 'Right to work', description: 'Is allowed to work where the job is based.', type: 'qualification', is_required: true },
  { name: 'Customer focus', description: 'Puts the customer first and keeps calm under pressure.', type: 'competency', is_required: false },
  { name: 'Availability', description: 'Can work the schedule the role needs.', type: 'qualification', is_required: true },
  { name: 'Problem solving', description: 'Finds practical fixes on their own and knows when to escalate.', type: 'competency', is_required: false },
  { name: 'Teamwork', description: 'Helps colleagues and shares information.', type: 'competency', is_required: false },
  { name: 'Relevant certificates', description: `Holds the certificates or licences a ${job.title} usually needs.`, type: 'qualification', is_required: false },
  { name: 'Learning agility', description: 'Picks up new tools and procedures quickly.', type: 'competency', is_required: false },
];

const questionPool = (job: JobRecord): { question: string; criterion: string; is_knockout: boolean }[] => [
  { question: `Tell me about the experience you have that is most relevant to the ${job.title} role.`, criterion: 'Role experience', is_knockout: false },
  { question: 'Describe a time you had to explain something complicated to a customer or a colleague.', criterion: 'Communication', is_knockout: false },
  { question: 'How do you make sure you arrive on time and finish what you start?', criterion: 'Reliability', is_knockout: false },
  { question: 'Do you have the right to work in the country where this job is based?', criterion: 'Right to work', is_knockout: true },
  { question: 'Tell me about a time you went out of your way for a customer.', criterion: 'Customer focus', is_knockout: false },
  { question: 'Which days and shifts are you available to work?', criterion: 'Availability', is_knockout: true },
  { question: 'Describe a problem at work that you solved on your own.', criterion: 'Problem solving', is_knockout: false },
  { question: 'Tell me about a time you helped a teammate.', criterion: 'Teamwork', is_knockout: false },
  { question: 'Which certificates or licences do you hold that matter for this role?', criterion: 'Relevant certificates', is_knockout: false },
  { question: 'What is the last new thing you learned for work, and how did you learn it?', criterion: 'Learning agility', is_knockout: false },
];

/** Spec 4.2: only jobs on the v3 engine; others are 400 `interview_version_mismatch` (status: assumption). */
async function v3Job(ctx: SandboxContext, c: Context<AuthEnv>): Promise<{ job: JobRecord; count: number | undefined }> {
  const job = ctx.store.job(c.get('organizationId'), c.req.param('id') ?? '');
  if (job.engine !== 'v3') {
    throw ApiError.of(400, 'interview_version_mismatch', 'This job is not on the v3 interview engine; its interview configuration cannot be generated.');
  }
  const input = validate(generateBody, (await readJsonObject(c)).body);
  return { job, count: input.count };
}

export function interviewConfigRoutes(ctx: SandboxContext): Hono<AuthEnv> {
  const app = new Hono<AuthEnv>();

  app.post('/:id/interview-config/criteria/generate', async (c) => {
    const { job, count } = await v3Job(ctx, c);
    const criteria = criteriaPool(job)
      .slice(0, count ?? 5)
      .map((draft, i) => ({ ...draft, sequence_number: i + 1 }));
    return c.json({ job_id: job.id, interview_config_id: job.interview_config_id, criteria });
  });

  app.post('/:id/interview-config/questions/generate', async (c) => {
    const { job, count } = await v3Job(ctx, c);
    const questions = questionPool(job)
      .slice(0, count ?? 6)
      .map((draft, i) => ({ sequence_number: i + 1, ...draft }));
    return c.json({ job_id: job.id, interview_config_id: job.interview_config_id, questions });
  });

  app.all('/:id/interview-config/criteria/generate', methodNotAllowed);
  app.all('/:id/interview-config/questions/generate', methodNotAllowed);
  return app;
}
