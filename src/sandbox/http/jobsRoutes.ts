import { Hono } from 'hono';
import { z } from 'zod';
import type { SandboxContext } from '../context.js';
import { createJobRecord, JOB_ENUMS, jobView } from '../jobRecord.js';
import type { JobRecord } from '../types.js';
import { invalidInput, methodNotAllowed } from './apiError.js';
import type { AuthEnv } from './auth.js';
import { paginate } from './pagination.js';
import { readJsonObject, validate } from './readJson.js';

/** Body of POST /api/v2/jobs: "not shown" in spec 4.2; the sandbox accepts the fields of 2.6. */
const jobBody = z.object({
  title: z.string().trim().min(1).max(255),
  description: z.string().optional(),
  location: z.string().max(255).optional(),
  external_id: z.string().max(255).optional(),
  employment_type: z.enum(JOB_ENUMS.employment_type).optional(),
  status: z.enum(JOB_ENUMS.status).optional(),
  is_public: z.boolean().optional(),
  language: z.enum(JOB_ENUMS.language).optional(),
  is_multilingual: z.boolean().optional(),
  cv_requirement: z.enum(JOB_ENUMS.cv_requirement).optional(),
  additional_information: z.string().optional(),
  salary: z
    .object({ min: z.string(), max: z.string(), currency: z.string().length(3), frequency: z.enum(JOB_ENUMS.salary_frequency) })
    .optional(),
});

/** Spec 4.2: the sort parameter takes `created_at` or `title`, a leading `-` meaning descending. */
const ORDERINGS = ['created_at', '-created_at', 'title', '-title'] as const;

/** A job and its place in creation order (the store's insertion order). */
interface Ranked {
  job: JobRecord;
  seq: number;
}

function compareBy(ordering: (typeof ORDERINGS)[number]): (a: Ranked, b: Ranked) => number {
  const desc = ordering.startsWith('-');
  const field = desc ? ordering.slice(1) : ordering;
  return (a, b) => {
    // Jobs made in the same millisecond (a manual clock makes them all so) are ordered by when
    // they were made, as their times would order them at a finer grain: newest first for
    // -created_at. Other ties keep creation order, so pages never overlap.
    const x = field === 'title' ? a.job.title.localeCompare(b.job.title) : a.job.created_at.localeCompare(b.job.created_at) || a.seq - b.seq;
    return (desc ? -x : x) || a.seq - b.seq;
  };
}

export function jobsRoutes(ctx: SandboxContext): Hono<AuthEnv> {
  const app = new Hono<AuthEnv>();

  // Spec 4.2 + 2.2: parameter names are "not shown"; the sandbox uses `ordering`, `search`, `status`.
  app.get('/', (c) => {
    const orgId = c.get('organizationId');
    const ordering = c.req.query('ordering') ?? '-created_at';
    if (!(ORDERINGS as readonly string[]).includes(ordering)) {
      throw invalidInput(`Unknown ordering; use one of ${ORDERINGS.join(', ')}.`, 'ordering');
    }
    // An empty search matches everything; an unknown status is 400 rather than an empty page.
    const search = c.req.query('search')?.trim().toLowerCase() || undefined;
    const status = c.req.query('status');
    if (status !== undefined && !(JOB_ENUMS.status as readonly string[]).includes(status)) {
      throw invalidInput(`Unknown status; use one of ${JOB_ENUMS.status.join(', ')}.`, 'status');
    }
    const jobs = [...ctx.store.jobs.values()]
      .map((job, seq): Ranked => ({ job, seq }))
      .filter(({ job: j }) => j.organizationId === orgId)
      .filter(({ job: j }) => status === undefined || j.status === status)
      .filter(({ job: j }) => search === undefined || j.title.toLowerCase().includes(search) || j.description.toLowerCase().includes(search))
      .sort(compareBy(ordering as (typeof ORDERINGS)[number]));
    return c.json(paginate(c.req.url, jobs.map(({ job }) => jobView(job))));
  });

  // Spec 4.2 + 4.6: create, honoring Idempotency-Key. Jobs created via v2 use the v3 engine (9).
  app.post('/', async (c) => {
    const orgId = c.get('organizationId');
    const { body } = await readJsonObject(c);
    ctx.idempotency.precheck(c, orgId, body);
    const input = validate(jobBody, body);
    return ctx.idempotency.handle(c, orgId, body, () => {
      const job = createJobRecord(orgId, input, 'v3', ctx.clock.now());
      ctx.store.jobs.set(job.id, job);
      return { status: 201, body: jobView(job) };
    });
  });

  // Not in spec 4.2 (assumption): a plain read of one job, 404 for another organization's.
  app.get('/:id', (c) => c.json(jobView(ctx.store.job(c.get('organizationId'), c.req.param('id')))));

  app.all('/', methodNotAllowed);
  app.all('/:id', methodNotAllowed);
  return app;
}
