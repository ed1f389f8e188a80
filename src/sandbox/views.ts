import { jobView } from './jobRecord.js';
import type { SandboxStore } from './store.js';
import type { ApplicationRecord, JobRecord } from './types.js';

/** Shapes returned by the control API (programmatic and HTTP alike). */
export interface OrganizationSummary {
  id: string;
  name: string;
  api_keys: { key: string; name: string; revoked: boolean; restricted: boolean; expires_at: string | null }[];
}

export function organizationSummaries(store: SandboxStore): OrganizationSummary[] {
  return [...store.organizations.values()].map((org) => ({
    id: org.id,
    name: org.name,
    api_keys: store.keysOf(org.id).map((k) => ({
      key: k.key,
      name: k.name,
      revoked: k.revoked,
      restricted: k.restricted,
      expires_at: k.expiresAt === null ? null : new Date(k.expiresAt).toISOString(),
    })),
  }));
}

export type JobSummary = Record<string, unknown> & { id: string; title: string; organization_id: string; engine: 'v3' | 'legacy' };

export function jobSummary(job: JobRecord): JobSummary {
  return { ...jobView(job), id: job.id, title: job.title, organization_id: job.organizationId, engine: job.engine };
}

export interface ApplicationSummary {
  id: string;
  organization_id: string;
  job_id: string;
  external_id: string | null;
  status: string;
  created_at: string;
  candidate: ApplicationRecord['candidate'];
}

export function applicationSummary(app: ApplicationRecord): ApplicationSummary {
  return {
    id: app.id,
    organization_id: app.organizationId,
    job_id: app.jobId,
    external_id: app.external_id,
    status: app.status,
    created_at: app.created_at,
    candidate: { ...app.candidate },
  };
}
