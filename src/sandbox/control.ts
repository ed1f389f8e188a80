import { mergeChaos, type ChaosOptions } from './chaos.js';
import type { Clock } from './clock.js';
import type { DeliveryScheduler } from './delivery/scheduler.js';
import { ApiError, invalidInput, notFound } from './http/apiError.js';
import type { FaultInjector, FaultSpec } from './http/faults.js';
import type { ScoringReadCounts, ScoringReadGap, ScoringReads } from './http/scoringReads.js';
import { API_KEY_PATTERN, newApiKey } from './ids.js';
import type { JobInput } from './jobRecord.js';
import { addMember, compareMembersByName, memberView, type MemberInput } from './organization.js';
import type { CreateApplicationInput, Lifecycle } from './scenarios/lifecycle.js';
import { runScenario, type ScenarioName, type ScenarioOptions } from './scenarios/runScenario.js';
import type { CvEvaluationResult } from './scoring/cvAndInsights.js';
import type { InterviewOutcomeInput, InterviewResult } from './scoring/interviewResult.js';
import type { SandboxStore } from './store.js';
import type { ApplicationStatus, DeliveryRecord, ScoringResource, UnavailableReason } from './types.js';
import {
  applicationSummary,
  jobSummary,
  organizationSummaries,
  type ApplicationSummary,
  type JobSummary,
  type OrganizationSummary,
} from './views.js';

/** The programmatic control surface; the /_sandbox HTTP endpoints call the same functions. */
export interface SandboxControl {
  organizations(): OrganizationSummary[];
  addApiKey(organizationId: string, opts?: { name?: string; key?: string; expiresAt?: number }): string;
  revokeKey(key: string): void;
  restrictKey(key: string, restricted?: boolean): void;
  /** Spec 2.8 views of the organization's members, ordered by name. */
  members(organizationId: string): Record<string, unknown>[];
  /** A person joins the organization (spec 3.5): pending hiring-team rows with that email become matched. */
  addMember(organizationId: string, input: MemberInput): Record<string, unknown>;
  createJob(input?: Partial<JobInput> & { organizationId?: string; legacy?: boolean }): JobSummary;
  createApplication(input: CreateApplicationInput): ApplicationSummary;
  setApplicationStatus(applicationId: string, status: ApplicationStatus): ApplicationSummary;
  completeInterview(applicationId: string, input?: InterviewOutcomeInput): InterviewResult;
  optOut(applicationId: string, note?: string): void;
  markUnavailable(applicationId: string, resource: ScoringResource, reason: UnavailableReason): void;
  failScoring(applicationId: string, resource?: ScoringResource): void;
  completeCvEvaluation(applicationId: string, opts?: { overallScore?: number }): CvEvaluationResult;
  completeInsights(applicationId: string, opts?: { overallScore?: number }): Record<string, unknown>;
  deleteApplication(applicationId: string): void;
  runScenario(name: ScenarioName, opts?: ScenarioOptions): { job: JobSummary; application: ApplicationSummary };
  emitEvent(input: { organizationId?: string; eventType: string; payload: Record<string, unknown>; id?: string }): { id: string };
  injectFault(fault: FaultSpec): void;
  clearFaults(): void;
  chaos(): ChaosOptions;
  setChaos(patch: Partial<ChaosOptions>): ChaosOptions;
  setResultDelay(ms: number): void;
  /** Every later scoring read waits `ms` (nominal, divided by timeFactor) before it is answered. */
  setReadDelay(ms: number): void;
  /** Scoring reads waiting or being answered now, and answered so far. */
  reads(): ScoringReadCounts;
  /** Per (application, resource) read: how many reads, and the shortest gap between two (spec 8: 30 s). */
  readGaps(): ScoringReadGap[];
  deliveries(filter?: { webhookId?: string; eventId?: string }): DeliveryRecord[];
  pendingDeliveries(): number;
  idle(): Promise<void>;
  waitForDeliveries(opts?: { timeoutMs?: number }): Promise<void>;
  advance(ms: number): Promise<void>;
  now(): number;
}

export interface ControlDeps {
  store: SandboxStore;
  clock: Clock;
  lifecycle: Lifecycle;
  scheduler: DeliveryScheduler;
  faults: FaultInjector;
  reads: ScoringReads;
  settings: { chaos: ChaosOptions; resultDelayMs: number; readDelayMs: number };
  defaultOrganizationId: () => string;
}

export function createControl(deps: ControlDeps): SandboxControl {
  const { store, lifecycle, scheduler, faults, settings } = deps;
  const keyRecord = (key: string) => {
    const record = store.keys.get(key);
    if (record === undefined) throw notFound('Unknown API key.');
    return record;
  };
  const control: SandboxControl = {
    organizations: () => organizationSummaries(store),
    addApiKey: (organizationId, opts = {}) => {
      store.organization(organizationId);
      const key = opts.key ?? newApiKey();
      if (!API_KEY_PATTERN.test(key)) throw invalidInput('Keys have the form sk-<segment>.<segment>.', 'key');
      // A key belongs to one user of one organization (spec 5.3): setting it again would move it to
      // this organization and undo a revocation or restriction.
      if (store.keys.has(key)) throw ApiError.of(409, 'already_exists', 'This API key already exists; a key belongs to one organization.', 'key');
      store.keys.set(key, { key, organizationId, name: opts.name ?? 'sandbox key', revoked: false, restricted: false, expiresAt: opts.expiresAt ?? null });
      return key;
    },
    // Spec 5.3: revoked immediately, no grace period.
    revokeKey: (key) => {
      keyRecord(key).revoked = true;
    },
    restrictKey: (key, restricted = true) => {
      keyRecord(key).restricted = restricted;
    },
    members: (organizationId) => {
      store.organization(organizationId);
      return store.membersOf(organizationId).sort(compareMembersByName).map(memberView);
    },
    addMember: (organizationId, input) => memberView(addMember(store, organizationId, input, deps.clock.now())),
    createJob: (input) => jobSummary(lifecycle.createJob(input)),
    createApplication: (input) => applicationSummary(lifecycle.createApplication(input)),
    setApplicationStatus: (id, status) => applicationSummary(lifecycle.setApplicationStatus(id, status)),
    completeInterview: (id, input) => lifecycle.completeInterview(id, input),
    optOut: (id, note) => lifecycle.optOut(id, note),
    markUnavailable: (id, resource, reason) => lifecycle.markUnavailable(id, resource, reason),
    failScoring: (id, resource = 'interview') => lifecycle.markUnavailable(id, resource, 'scoring_failed'),
    completeCvEvaluation: (id, opts) => lifecycle.completeCvEvaluation(id, opts),
    completeInsights: (id, opts) => lifecycle.completeInsights(id, opts),
    deleteApplication: (id) => lifecycle.deleteApplication(id),
    runScenario: (name, opts) => {
      const { job, application } = runScenario(lifecycle, name, opts);
      return { job: jobSummary(job), application: applicationSummary(application) };
    },
    emitEvent: ({ organizationId, eventType, payload, id }) => ({
      id: lifecycle.emit(organizationId ?? deps.defaultOrganizationId(), eventType, payload, id).id,
    }),
    injectFault: (fault) => faults.add(fault),
    clearFaults: () => faults.clear(),
    chaos: () => ({ ...settings.chaos }),
    setChaos: (patch) => {
      settings.chaos = mergeChaos(settings.chaos, patch);
      return { ...settings.chaos };
    },
    setResultDelay: (ms) => {
      settings.resultDelayMs = Math.max(0, ms);
    },
    setReadDelay: (ms) => {
      settings.readDelayMs = Math.max(0, ms);
    },
    reads: () => deps.reads.counts(),
    readGaps: () => deps.reads.readGaps(),
    deliveries: (filter = {}) =>
      store
        .allDeliveries()
        .filter((d) => (filter.webhookId === undefined || d.webhook_id === filter.webhookId) && (filter.eventId === undefined || d.event_id === filter.eventId))
        .sort((a, b) => a.attempted_at.localeCompare(b.attempted_at) || a.attempt - b.attempt),
    pendingDeliveries: () => scheduler.pending(),
    idle: () => scheduler.runDue(),
    waitForDeliveries: (opts = {}) => scheduler.drain(opts.timeoutMs ?? 30_000),
    advance: (ms) => scheduler.advance(ms),
    now: () => deps.clock.now(),
  };
  return control;
}
