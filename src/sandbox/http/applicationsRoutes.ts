import { Hono, type Context } from 'hono';
import { z } from 'zod';
import { iso } from '../clock.js';
import type { SandboxContext } from '../context.js';
import { detectCvType } from '../cvFile.js';
import { newId } from '../ids.js';
import { APPLICATION_STATUSES, type ApplicationRecord, type CvUpload } from '../types.js';
import { ApiError, invalidInput, methodNotAllowed, required } from './apiError.js';
import type { AuthEnv } from './auth.js';
import { paginate } from './pagination.js';
import { readJsonObject, validate } from './readJson.js';

/**
 * Spec 2.10 and 4.1 leave the application record and its create/update/delete endpoints "not
 * shown". The sandbox serves them under /api/v2/applications so an integration can drive the
 * whole life through the API; every choice here is listed in docs/sandbox.md.
 */
const candidateBody = z.object({
  // Spec 8: names at most 150 characters, email at most 254.
  first_name: z.string().trim().min(1).max(150),
  last_name: z.string().trim().min(1).max(150),
  email: z.email().max(254),
  phone_number: z.string().max(32).optional(),
});
const createBody = z.object({
  job_id: z.string(),
  candidate: candidateBody,
  external_id: z.string().max(255).nullable().optional(),
});
const updateBody = z.object({
  status: z.enum(APPLICATION_STATUSES).optional(),
  external_id: z.string().max(255).nullable().optional(),
});

export function applicationView(app: ApplicationRecord): Record<string, unknown> {
  const cv = app.cv === null ? null : { file_name: app.cv.file_name, file_type: app.cv.file_type, size_bytes: app.cv.size_bytes, uploaded_at: app.cv.uploaded_at };
  return {
    id: app.id,
    job_id: app.jobId,
    external_id: app.external_id,
    status: app.status,
    created_at: app.created_at,
    candidate: { ...app.candidate },
    cv,
  };
}

const MULTIPART = 'multipart/form-data';
const URLENCODED = 'application/x-www-form-urlencoded';
/** Form overhead allowed above the size limit before the body is refused unread (base64 grows by 4/3). */
const formBudget = (maxBytes: number): number => Math.ceil((maxBytes * 4) / 3) + 64 * 1024;

interface ReceivedFile {
  name: string | null;
  bytes: Buffer;
}

/**
 * Spec 4.2: field `cv_file` in multipart/form-data, or in form-urlencoded where (the sandbox's
 * choice) the value is the file's bytes in base64, since that encoding cannot carry a file.
 */
async function readCvFile(c: Context, maxBytes: number): Promise<ReceivedFile> {
  const type = (c.req.header('content-type') ?? '').split(';')[0]!.trim().toLowerCase();
  if (type !== MULTIPART && type !== URLENCODED) {
    throw invalidInput(`Send the CV as ${MULTIPART} or ${URLENCODED} with the field cv_file.`);
  }
  const length = Number(c.req.header('content-length') ?? NaN);
  if (Number.isFinite(length) && length > formBudget(maxBytes)) throw tooLarge(maxBytes);
  let form: Record<string, string | File | (string | File)[]>;
  try {
    form = await c.req.parseBody();
  } catch (e) {
    throw ApiError.of(400, 'parse_error', `Form parse error - ${(e as Error).message}`);
  }
  const value = form['cv_file'];
  if (value === undefined || value === '') throw required('cv_file');
  if (Array.isArray(value)) throw invalidInput('Send exactly one cv_file.', 'cv_file');
  if (typeof value !== 'string') {
    if (value.size > maxBytes) throw tooLarge(maxBytes);
    return { name: value.name === '' ? null : value.name, bytes: Buffer.from(await value.arrayBuffer()) };
  }
  if (type === MULTIPART) throw invalidInput('The submitted data was not a file. Check the encoding type on the form.', 'cv_file');
  const compact = value.replace(/\s+/g, '');
  if (!/^[A-Za-z0-9+/_-]*={0,2}$/.test(compact)) throw invalidInput('In form-urlencoded bodies cv_file is the file content in base64.', 'cv_file');
  const fileName = form['cv_file_name'];
  return { name: typeof fileName === 'string' && fileName !== '' ? fileName : null, bytes: Buffer.from(compact, 'base64') };
}

const tooLarge = (maxBytes: number): ApiError =>
  ApiError.of(413, 'file_too_large', `The CV file exceeds the upload limit of ${maxBytes} bytes.`, 'cv_file');

export function applicationsRoutes(ctx: SandboxContext): Hono<AuthEnv> {
  const app = new Hono<AuthEnv>();
  const { store, lifecycle } = ctx;

  // Assumption: create an application (emits application.created, spec 6.4); honors Idempotency-Key (4.6).
  app.post('/', async (c) => {
    const orgId = c.get('organizationId');
    const { body } = await readJsonObject(c);
    ctx.idempotency.precheck(c, orgId, body);
    const input = validate(createBody, body);
    if (!store.jobs.has(input.job_id) || store.jobs.get(input.job_id)?.organizationId !== orgId) {
      throw ApiError.of(400, 'does_not_exist', `Invalid pk "${input.job_id}" - object does not exist.`, 'job_id');
    }
    return ctx.idempotency.handle(c, orgId, body, () => {
      const { phone_number, ...person } = input.candidate;
      const created = lifecycle.createApplication({
        jobId: input.job_id,
        candidate: { ...person, phone_number: phone_number ?? '' },
        externalId: input.external_id ?? null,
      });
      return { status: 201, body: applicationView(created) };
    });
  });

  // Assumption: newest first; filters `job_id` and `status`.
  app.get('/', (c) => {
    const orgId = c.get('organizationId');
    const jobId = c.req.query('job_id');
    const status = c.req.query('status');
    if (status !== undefined && !(APPLICATION_STATUSES as readonly string[]).includes(status)) {
      throw invalidInput(`Unknown status; use one of ${APPLICATION_STATUSES.join(', ')}.`, 'status');
    }
    const apps = [...store.applications.values()]
      .filter((a) => a.organizationId === orgId && (jobId === undefined || a.jobId === jobId) && (status === undefined || a.status === status))
      .reverse();
    return c.json(paginate(c.req.url, apps.map(applicationView)));
  });

  app.get('/:id', (c) => c.json(applicationView(store.application(c.get('organizationId'), c.req.param('id')))));

  // Assumption: `status` (one application.status_changed per change, spec 3.4; the same status is a
  // no-op without an event) and `external_id` (no event).
  app.patch('/:id', async (c) => {
    const application = store.application(c.get('organizationId'), c.req.param('id'));
    const { body } = await readJsonObject(c);
    const input = validate(updateBody, body);
    if (input.external_id !== undefined) application.external_id = input.external_id;
    if (input.status !== undefined && input.status !== application.status) lifecycle.setApplicationStatus(application.id, input.status);
    return c.json(applicationView(application));
  });

  // Assumption: 204; emits job_application.deleted with the snapshot (spec 6.4); later reads are 404.
  app.delete('/:id', (c) => {
    const application = store.application(c.get('organizationId'), c.req.param('id'));
    lifecycle.deleteApplication(application.id);
    return c.body(null, 204);
  });

  // Spec 2.9 + 4.2: the CV upload. 202 (assumption: processing is asynchronous).
  app.post('/:id/cv', async (c) => {
    const application = store.application(c.get('organizationId'), c.req.param('id'));
    const file = await readCvFile(c, ctx.cvMaxBytes);
    if (file.bytes.length > ctx.cvMaxBytes) throw tooLarge(ctx.cvMaxBytes);
    const fileType = detectCvType(file.bytes);
    if (fileType === null) {
      throw ApiError.of(400, 'invalid_file_type', 'Upload a PDF or Word document (.pdf, .docx, .doc); the content was neither.', 'cv_file');
    }
    const upload: CvUpload = { id: newId(), file_name: file.name, file_type: fileType, size_bytes: file.bytes.length, uploaded_at: iso(ctx.clock.now()) };
    lifecycle.startCvProcessing(application.id, upload);
    return c.json({ job_application_id: application.id, cv_processing_started: true }, 202);
  });

  app.all('/', methodNotAllowed);
  app.all('/:id', methodNotAllowed);
  app.all('/:id/cv', methodNotAllowed);
  return app;
}
