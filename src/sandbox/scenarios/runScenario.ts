import type { ApplicationRecord, JobRecord } from '../types.js';
import type { Lifecycle } from './lifecycle.js';

export const SCENARIOS = ['lifecycle', 'legacy', 'opted_out', 'scoring_failed', 'ineligible'] as const;
export type ScenarioName = (typeof SCENARIOS)[number];

export interface ScenarioOptions {
  organizationId?: string;
  externalId?: string | null;
  /** `lifecycle` only: also delete the application at the end (`job_application.deleted`). */
  deleteAtEnd?: boolean;
}

export interface ScenarioResult {
  job: JobRecord;
  application: ApplicationRecord;
}

/**
 * Named stories from issue 3, each a short script of lifecycle steps. Events are emitted in
 * the order listed. With chaos off, each is delivered once, one at a time per endpoint, in that
 * order; the real service is at-least-once and unordered (spec 6.1), which the chaos knobs
 * (`duplicateRate`, `reorder`, `parallel`, `delayMs`) approximate (docs/sandbox.md).
 */
export function runScenario(lifecycle: Lifecycle, name: ScenarioName, opts: ScenarioOptions = {}): ScenarioResult {
  const base = opts.organizationId === undefined ? {} : { organizationId: opts.organizationId };
  const job = lifecycle.createJob({ ...base, legacy: name === 'legacy' });
  const application = lifecycle.createApplication({ jobId: job.id, externalId: opts.externalId ?? null });
  const id = application.id;
  switch (name) {
    case 'lifecycle':
      lifecycle.setApplicationStatus(id, 'screened');
      lifecycle.completeInterview(id);
      lifecycle.setApplicationStatus(id, 'interviewed');
      lifecycle.completeCvEvaluation(id);
      lifecycle.completeInsights(id);
      lifecycle.setApplicationStatus(id, 'hired');
      if (opts.deleteAtEnd === true) lifecycle.deleteApplication(id);
      break;
    case 'legacy':
      lifecycle.setApplicationStatus(id, 'screened');
      lifecycle.completeInterview(id);
      break;
    case 'opted_out':
      lifecycle.optOut(id);
      break;
    case 'scoring_failed':
      lifecycle.setApplicationStatus(id, 'screened');
      lifecycle.markUnavailable(id, 'interview', 'scoring_failed');
      break;
    case 'ineligible':
      lifecycle.setApplicationStatus(id, 'screened');
      lifecycle.completeInterview(id, { eligible: false });
      lifecycle.completeInsights(id);
      break;
  }
  return { job, application };
}
