import type { ApplicationRecord, JobRecord } from '../types.js';

/**
 * Payload blocks of spec 6.4. Every `application` block carries `external_id` (null when unset).
 * The `candidate` block is the same in every event: the fields 6.4 lists for `interview.completed`,
 * exactly (assumption: 6.4 does not show them for the other events). No `id`: the spec promises
 * none, so a receiver built against the sandbox must not come to depend on one.
 */
export function applicationBlock(app: ApplicationRecord): Record<string, unknown> {
  return { id: app.id, external_id: app.external_id, status: app.status, created_at: app.created_at };
}

export function candidateBlock(app: ApplicationRecord): Record<string, unknown> {
  const { first_name, last_name, email, phone_number } = app.candidate;
  return { first_name, last_name, email, phone_number };
}

export function jobBlock(job: JobRecord): Record<string, unknown> {
  return { id: job.id, title: job.title };
}

export function applicationPayload(app: ApplicationRecord, job: JobRecord): Record<string, unknown> {
  return { application: applicationBlock(app), candidate: candidateBlock(app), job: jobBlock(job) };
}

/**
 * `job_application.deleted`: the spec's snapshot (`id`, `status`, `created_at`, `candidate`, `job`)
 * taken just before deletion, and nothing more (spec 6.4 lists no `external_id`: a receiver has to
 * correlate it from what it stored before).
 */
export function deletedSnapshot(app: ApplicationRecord, job: JobRecord): Record<string, unknown> {
  return {
    id: app.id,
    status: app.status,
    created_at: app.created_at,
    candidate: candidateBlock(app),
    job: jobBlock(job),
  };
}
