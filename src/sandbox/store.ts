import { notFound } from './http/apiError.js';
import type {
  ApiKeyRecord,
  ApplicationRecord,
  CallPolicy,
  DeliveryRecord,
  HiringTeamMember,
  InterviewDefaults,
  JobRecord,
  Organization,
  OrganizationMember,
  WebhookEndpoint,
} from './types.js';

/**
 * All sandbox state, in memory. Lookups that take an organization id answer 404 `not_found` for
 * another organization's record exactly as for an unknown one (spec 4.2), so nothing leaks.
 */
export class SandboxStore {
  readonly organizations = new Map<string, Organization>();
  readonly keys = new Map<string, ApiKeyRecord>();
  readonly jobs = new Map<string, JobRecord>();
  readonly applications = new Map<string, ApplicationRecord>();
  readonly webhooks = new Map<string, WebhookEndpoint>();
  /** Per webhook id, every attempt in the order made. */
  readonly deliveries = new Map<string, DeliveryRecord[]>();
  /** Spec 2.4 and 2.5 singletons, keyed by organization id. */
  readonly interviewDefaults = new Map<string, InterviewDefaults>();
  readonly callPolicies = new Map<string, CallPolicy>();
  /** Spec 2.8, keyed by membership id. */
  readonly members = new Map<string, OrganizationMember>();
  /** Spec 2.7, keyed by member row id; insertion order is creation order. */
  readonly hiringTeam = new Map<string, HiringTeamMember>();

  organization(id: string): Organization {
    const org = this.organizations.get(id);
    if (org === undefined) throw notFound(`Organization ${id} not found.`);
    return org;
  }

  job(organizationId: string, id: string): JobRecord {
    const job = this.jobs.get(id);
    if (job === undefined || job.organizationId !== organizationId) throw notFound('Job not found.');
    return job;
  }

  application(organizationId: string, id: string): ApplicationRecord {
    const app = this.applications.get(id);
    if (app === undefined || app.organizationId !== organizationId) throw notFound('Application not found.');
    return app;
  }

  /** For the control API, which is not scoped to an organization. */
  anyApplication(id: string): ApplicationRecord {
    const app = this.applications.get(id);
    if (app === undefined) throw notFound(`Application ${id} not found.`);
    return app;
  }

  anyJob(id: string): JobRecord {
    const job = this.jobs.get(id);
    if (job === undefined) throw notFound(`Job ${id} not found.`);
    return job;
  }

  webhook(organizationId: string, id: string): WebhookEndpoint {
    const hook = this.webhooks.get(id);
    if (hook === undefined || hook.organizationId !== organizationId) throw notFound('Webhook not found.');
    return hook;
  }

  webhooksOf(organizationId: string): WebhookEndpoint[] {
    return [...this.webhooks.values()].filter((w) => w.organizationId === organizationId);
  }

  keysOf(organizationId: string): ApiKeyRecord[] {
    return [...this.keys.values()].filter((k) => k.organizationId === organizationId);
  }

  interviewDefaultsOf(organizationId: string): InterviewDefaults {
    const record = this.interviewDefaults.get(organizationId);
    if (record === undefined) throw notFound('Interview defaults not found.');
    return record;
  }

  callPolicyOf(organizationId: string): CallPolicy {
    const record = this.callPolicies.get(organizationId);
    if (record === undefined) throw notFound('Call policy not found.');
    return record;
  }

  membersOf(organizationId: string): OrganizationMember[] {
    return [...this.members.values()].filter((m) => m.organizationId === organizationId);
  }

  hiringTeamOf(jobId: string): HiringTeamMember[] {
    return [...this.hiringTeam.values()].filter((m) => m.jobId === jobId);
  }

  hiringTeamMember(jobId: string, id: string): HiringTeamMember {
    const row = this.hiringTeam.get(id);
    if (row === undefined || row.jobId !== jobId) throw notFound('Hiring team member not found.');
    return row;
  }

  recordDelivery(record: DeliveryRecord): void {
    const list = this.deliveries.get(record.webhook_id) ?? [];
    list.push(record);
    this.deliveries.set(record.webhook_id, list);
  }

  allDeliveries(): DeliveryRecord[] {
    return [...this.deliveries.values()].flat();
  }
}
