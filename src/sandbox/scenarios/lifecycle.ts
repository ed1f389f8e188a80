import { iso, type Clock } from '../clock.js';
import type { Dispatcher } from '../delivery/dispatcher.js';
import { fakeJobTitle, fakePerson, type FakePerson, type Random } from '../fakeData.js';
import { ApiError, invalidInput } from '../http/apiError.js';
import { newId } from '../ids.js';
import { createJobRecord, type JobInput } from '../jobRecord.js';
import { buildCvEvaluation, buildInsights, type CvEvaluationResult } from '../scoring/cvAndInsights.js';
import { buildInterviewResult, interviewEventResult, type InterviewOutcomeInput, type InterviewResult } from '../scoring/interviewResult.js';
import { buildV1InterviewDetail } from '../scoring/v1InterviewDetail.js';
import type { SandboxStore } from '../store.js';
import type { ApplicationRecord, ApplicationStatus, CvUpload, JobRecord, SandboxEvent, ScoringResource, UnavailableReason } from '../types.js';
import { applicationPayload, deletedSnapshot } from './eventPayloads.js';

export interface LifecycleDeps {
  store: SandboxStore;
  clock: Clock;
  dispatcher: Dispatcher;
  random: Random;
  /** Nominal delay between a *.completed event and its result becoming readable. */
  resultDelayMs: () => number;
  timeFactor: number;
  defaultOrganizationId: () => string;
  /** Runs `run` after the nominal `delayMs` on the sandbox's scheduler (divided by the time factor). */
  schedule: (lane: string, delayMs: number, run: () => Promise<void>) => void;
}

export interface CreateApplicationInput {
  jobId: string;
  candidate?: Partial<FakePerson>;
  externalId?: string | null;
  status?: ApplicationStatus;
}

/**
 * Moves jobs and applications through their life and emits the events of spec 6.4, one per
 * change. Shared by the programmatic control API and the /_sandbox HTTP endpoints.
 */
export class Lifecycle {
  constructor(private readonly deps: LifecycleDeps) {}

  createJob(input: Partial<JobInput> & { organizationId?: string; legacy?: boolean } = {}): JobRecord {
    const organizationId = input.organizationId ?? this.deps.defaultOrganizationId();
    this.deps.store.organization(organizationId);
    const fake = fakeJobTitle(this.deps.random);
    const job = createJobRecord(organizationId, { ...fake, ...input, title: input.title ?? fake.title }, input.legacy === true ? 'legacy' : 'v3', this.deps.clock.now());
    this.deps.store.jobs.set(job.id, job);
    return job;
  }

  createApplication(input: CreateApplicationInput): ApplicationRecord {
    const job = this.deps.store.anyJob(input.jobId);
    const person = { ...fakePerson(this.deps.random), ...input.candidate };
    // Spec 8: candidate name fields max 150 characters, email max 254.
    if (person.first_name.length > 150) throw invalidInput('At most 150 characters.', 'candidate.first_name');
    if (person.last_name.length > 150) throw invalidInput('At most 150 characters.', 'candidate.last_name');
    if (person.email.length > 254) throw invalidInput('At most 254 characters.', 'candidate.email');
    const now = iso(this.deps.clock.now());
    const legacy = job.engine === 'legacy';
    const app: ApplicationRecord = {
      id: newId(),
      organizationId: job.organizationId,
      jobId: job.id,
      external_id: input.externalId ?? null,
      status: input.status ?? 'applied',
      created_at: now,
      candidate: { id: newId(), created_at: now, ...person },
      scoring: {
        // Spec 3.6: a job not on the v3 engine never gets a v2 interview result.
        interview: legacy ? { kind: 'unavailable', reason: 'interview_not_available' } : { kind: 'pending', reason: 'interview_not_completed' },
        'cv-evaluation': { kind: 'pending', reason: 'cv_evaluation_pending' },
        insights: { kind: 'pending', reason: 'insights_pending' },
      },
      interviewCall: null,
      cv: null,
    };
    this.deps.store.applications.set(app.id, app);
    this.emit(app.organizationId, 'application.created', applicationPayload(app, job));
    return app;
  }

  /** Spec 3.4: one `application.status_changed` per transition, with `previous_status`. */
  setApplicationStatus(applicationId: string, status: ApplicationStatus): ApplicationRecord {
    const app = this.deps.store.anyApplication(applicationId);
    if (app.status === status) throw invalidInput(`Application is already ${status}.`, 'status');
    const previous = app.status;
    app.status = status;
    this.emit(app.organizationId, 'application.status_changed', { ...applicationPayload(app, this.job(app)), previous_status: previous });
    return app;
  }

  /**
   * Spec 3.6: `unavailable` is terminal ("no result will ever come"), and a result, once ready,
   * does not turn unavailable. The sandbox refuses those moves (409), so that no test passes on a
   * sequence the service never produces; a result that changes (ready, then ready again with other
   * data) is allowed. `injectFault` still serves any body a test needs.
   */
  private refuseTerminal(app: { id: string; scoring: ApplicationRecord['scoring'] }, resource: ScoringResource, to: 'ready' | 'unavailable'): void {
    const state = app.scoring[resource];
    if (to === 'ready' && state.kind === 'unavailable') {
      throw ApiError.of(409, 'conflict', `The ${resource} of application ${app.id} is unavailable (${state.reason}): that is terminal, no result will come (spec 3.6).`);
    }
    if (to === 'unavailable' && state.kind === 'ready') {
      throw ApiError.of(409, 'conflict', `The ${resource} of application ${app.id} is ready: it cannot become unavailable (spec 3.6).`);
    }
  }

  /**
   * Ends the interview. v3 job: `interview.completed`, and the v2 read turns into the result after
   * the result delay. Legacy job: `interview_v2.completed`; the v2 read stays unavailable and the
   * v1 read has the data (spec 3.6, 9).
   */
  completeInterview(applicationId: string, input: InterviewOutcomeInput = {}): InterviewResult {
    const app = this.deps.store.anyApplication(applicationId);
    const job = this.job(app);
    // A legacy job's v2 read is unavailable by design (its result is the v1 read's); an opted-out call is over.
    if (job.engine !== 'legacy') this.refuseTerminal(app, 'interview', 'ready');
    else if (app.interviewCall?.status === 'opted_out') throw ApiError.of(409, 'conflict', `The interview call of application ${app.id} ended: the candidate opted out.`);
    const now = this.deps.clock.now();
    const result = buildInterviewResult(job, app.id, input, now, this.deps.random);
    // One ready time for both reads: the v1 record is evaluated as long as the v2 read says processing.
    const readyAt = this.readyAt();
    app.interviewCall = {
      status: result.status,
      detail: buildV1InterviewDetail({ job, application: app, status: result.status, result, completedAt: now, lastActivityNote: null, random: this.deps.random }),
      readyAt,
    };
    const interview = { id: result.id, completed_at: result.completed_at };
    if (job.engine === 'legacy') {
      // Body of interview_v2.completed is "not shown" (6.4): the sandbox's choice, see docs/sandbox.md.
      this.emit(app.organizationId, 'interview_v2.completed', { ...applicationPayload(app, job), interview: { ...interview, status: result.status, overall_score: result.overall_score } });
    } else {
      app.scoring.interview = { kind: 'ready', readyAt, result };
      this.emit(app.organizationId, 'interview.completed', { ...applicationPayload(app, job), interview: { ...interview, result: interviewEventResult(result) } });
    }
    return result;
  }

  /** Opted out before any interview: v2 read unavailable/`interview_not_available` (3.6), v1 read `opted_out`, no event. */
  optOut(applicationId: string, note = 'Candidate opted out by replying STOP to the scheduling SMS.'): void {
    const app = this.deps.store.anyApplication(applicationId);
    const job = this.job(app);
    this.refuseTerminal(app, 'interview', 'unavailable');
    app.scoring.interview = { kind: 'unavailable', reason: 'interview_not_available' };
    app.interviewCall = {
      status: 'opted_out',
      detail: buildV1InterviewDetail({ job, application: app, status: 'opted_out', result: null, completedAt: this.deps.clock.now(), lastActivityNote: note, random: this.deps.random }),
    };
  }

  /**
   * Terminal `unavailable` with `reason` for one scoring read (3.6). Emits nothing: scoring never
   * became ready. An interview whose scoring failed took place, so the v1 read (2.3, which keeps no
   * readiness envelope, 9) shows its call, ended `failed` (3.1, 3.2): transcript, no scores.
   */
  markUnavailable(applicationId: string, resource: ScoringResource, reason: UnavailableReason): void {
    const app = this.deps.store.anyApplication(applicationId);
    this.refuseTerminal(app, resource, 'unavailable');
    app.scoring[resource] = { kind: 'unavailable', reason };
    if (resource !== 'interview' || reason !== 'scoring_failed' || app.interviewCall !== null) return;
    const detail = buildV1InterviewDetail({
      job: this.job(app),
      application: app,
      status: 'failed',
      result: null,
      scoringFailed: true,
      completedAt: this.deps.clock.now(),
      lastActivityNote: 'The interview took place but its scoring failed.',
      random: this.deps.random,
    });
    app.interviewCall = { status: 'failed', detail };
  }

  /**
   * A CV was uploaded (spec 2.9, 4.2): the CV evaluation read says processing (`cv_processing`)
   * until the result delay has passed; then the evaluation completes, is readable at once and
   * `cv_evaluation.completed` is emitted. A newer upload supersedes an older one still processing;
   * a manual `completeCvEvaluation` in between wins (no second event).
   */
  startCvProcessing(applicationId: string, upload: CvUpload): void {
    const app = this.deps.store.anyApplication(applicationId);
    this.refuseTerminal(app, 'cv-evaluation', 'ready');
    app.cv = upload;
    app.scoring['cv-evaluation'] = { kind: 'pending', reason: 'cv_processing' };
    this.deps.schedule(`cv:${app.id}`, this.deps.resultDelayMs(), async () => {
      const current = this.deps.store.applications.get(app.id);
      const state = current?.scoring['cv-evaluation'];
      if (current?.cv?.id !== upload.id || state?.kind !== 'pending' || state.reason !== 'cv_processing') return;
      this.completeCvEvaluation(app.id, { readyNow: true });
    });
  }

  completeCvEvaluation(applicationId: string, opts: { overallScore?: number; readyNow?: boolean } = {}): CvEvaluationResult {
    const app = this.deps.store.anyApplication(applicationId);
    this.refuseTerminal(app, 'cv-evaluation', 'ready');
    const result = buildCvEvaluation(app.id, this.deps.clock.now(), this.deps.random, opts.overallScore);
    app.scoring['cv-evaluation'] = { kind: 'ready', readyAt: opts.readyNow === true ? this.deps.clock.now() : this.readyAt(), result };
    this.emit(app.organizationId, 'cv_evaluation.completed', {
      application: applicationPayload(app, this.job(app))['application'],
      cv_evaluation: { id: result.id, overall_score: result.overall_score },
    });
    return result;
  }

  completeInsights(applicationId: string, opts: { overallScore?: number } = {}): Record<string, unknown> {
    const app = this.deps.store.anyApplication(applicationId);
    this.refuseTerminal(app, 'insights', 'ready');
    const interview = app.scoring.interview.kind === 'ready' ? (app.scoring.interview.result as InterviewResult) : null;
    const cv = app.scoring['cv-evaluation'].kind === 'ready' ? (app.scoring['cv-evaluation'].result as CvEvaluationResult) : null;
    // Insights combine the two scores (spec 2.10, 6.4). With neither (no CV evaluation, no graded
    // interview) the mean of nothing would be a made-up 0 and a "no": refused unless the test gives one.
    if (opts.overallScore === undefined && (interview?.overall_score ?? null) === null && cv === null) {
      throw ApiError.of(409, 'conflict', `The insights of application ${app.id} have nothing to combine: no CV evaluation and no scored interview yet; complete one first, or give overall_score.`);
    }
    const result = buildInsights(app.id, this.deps.clock.now(), interview, cv, opts.overallScore);
    app.scoring.insights = { kind: 'ready', readyAt: this.readyAt(), result };
    this.emit(app.organizationId, 'insights.completed', {
      application: applicationPayload(app, this.job(app))['application'],
      insights: { overall_score: result.overall_score, hiring_recommendation: result.hiring_recommendation, is_eligible: result.is_eligible },
    });
    return result;
  }

  /** `job_application.deleted` with the snapshot taken just before; afterwards every read is 404. */
  deleteApplication(applicationId: string): void {
    const app = this.deps.store.anyApplication(applicationId);
    const snapshot = deletedSnapshot(app, this.job(app));
    this.deps.store.applications.delete(app.id);
    this.emit(app.organizationId, 'job_application.deleted', snapshot);
  }

  /** Any event type, any payload (for receiver tests: unknown types, odd payloads). */
  emit(organizationId: string, eventType: string, payload: Record<string, unknown>, id: string = newId()): SandboxEvent {
    this.deps.store.organization(organizationId);
    const event: SandboxEvent = { id, organizationId, event_type: eventType, created_at: iso(this.deps.clock.now()), payload };
    this.deps.dispatcher.emit(event);
    return event;
  }

  private job(app: ApplicationRecord): JobRecord {
    return this.deps.store.anyJob(app.jobId);
  }

  private readyAt(): number {
    return this.deps.clock.now() + this.deps.resultDelayMs() / this.deps.timeFactor;
  }
}
