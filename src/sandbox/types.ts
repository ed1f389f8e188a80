/** Domain records the sandbox keeps in memory. Field names of API-visible shapes follow the spec. */

export interface ApiKeyRecord {
  key: string;
  organizationId: string;
  name: string;
  revoked: boolean;
  /** A valid key that the test has stripped of permission: answers 403 `permission_denied` (spec 5.5). */
  restricted: boolean;
  expiresAt: number | null;
}

export interface Organization {
  id: string;
  name: string;
}

export type ApplicationStatus = 'applied' | 'screened' | 'interviewed' | 'hired' | 'rejected';
export const APPLICATION_STATUSES: readonly ApplicationStatus[] = ['applied', 'screened', 'interviewed', 'hired', 'rejected'];

export type InterviewEngine = 'v3' | 'legacy';

export interface Salary {
  min: string;
  max: string;
  currency: string;
  frequency: string;
}

/** Spec 2.6 job, plus the organization and engine it belongs to (not exposed). */
export interface JobRecord {
  id: string;
  organizationId: string;
  engine: InterviewEngine;
  external_id: string;
  external_id_source: string;
  title: string;
  description: string;
  location: string;
  employment_type: string;
  status: string;
  is_public: boolean;
  language: string;
  is_multilingual: boolean;
  cv_requirement: string;
  additional_information: string;
  salary: Salary;
  interview_config_id: string;
  created_at: string;
  criteria: CriterionDefinition[];
}

/** A v3 criterion: a competency is scored 1-5, a qualification is pass/fail (spec 2.10). */
export interface CriterionDefinition {
  id: string;
  name: string;
  description: string;
  kind: 'competency' | 'qualification';
  /** A required qualification that fails makes the candidate ineligible. */
  required: boolean;
}

export interface Candidate {
  id: string;
  first_name: string;
  last_name: string;
  email: string;
  phone_number: string;
  created_at: string;
}

export type ScoringResource = 'interview' | 'cv-evaluation' | 'insights';
export const SCORING_RESOURCES: readonly ScoringResource[] = ['interview', 'cv-evaluation', 'insights'];

export type UnavailableReason = 'interview_not_available' | 'scoring_failed' | 'no_result';

/** Readiness of one scoring sub-resource (spec 3.6). */
export type ScoringState =
  | { kind: 'pending'; reason: string }
  | { kind: 'ready'; readyAt: number; result: Record<string, unknown> }
  | { kind: 'unavailable'; reason: UnavailableReason };

export type InterviewOutcome = 'completed' | 'unreachable' | 'failed' | 'opted_out';

/** The v1 interview call detail (spec 2.3), built once when the interview ends so reads are stable. */
export interface InterviewCall {
  status: InterviewOutcome;
  detail: Record<string, unknown>;
  /**
   * When a finished call's scores become readable (resultDelayMs after its completion, as the
   * v2 read's result): until then the v1 read shows the call still being evaluated.
   */
  readyAt?: number;
}

export interface ApplicationRecord {
  id: string;
  organizationId: string;
  jobId: string;
  external_id: string | null;
  status: ApplicationStatus;
  created_at: string;
  candidate: Candidate;
  scoring: Record<ScoringResource, ScoringState>;
  interviewCall: InterviewCall | null;
  /** The latest CV uploaded through `POST /api/v2/applications/{id}/cv` (spec 2.9), null before any. */
  cv: CvUpload | null;
}

/** Content types the CV upload accepts (spec 4.2: PDF or Word), detected from the bytes. */
export type CvFileType = 'pdf' | 'docx' | 'doc';

export interface CvUpload {
  /** Identifies this upload; a newer upload supersedes the processing of an older one. */
  id: string;
  file_name: string | null;
  file_type: CvFileType;
  size_bytes: number;
  uploaded_at: string;
}

/** Spec 2.4: organization interview defaults, one per organization. */
export interface InterviewDefaults {
  id: string;
  organizationId: string;
  prompt_intro: string;
  prompt_outro: string;
  prompt_additional_instructions: string;
  interviewer_name_override: string;
  organization_name_override: string;
  created_at: string;
  updated_at: string;
}

export const WEEKDAYS = ['monday', 'tuesday', 'wednesday', 'thursday', 'friday', 'saturday', 'sunday'] as const;
export type Weekday = (typeof WEEKDAYS)[number];

/** Spec 2.5: the phone-interview call policy, one per organization. */
export interface CallPolicy {
  id: string;
  organizationId: string;
  retries_enabled: boolean;
  /** Deprecated (spec 2.5, 9): returned, never written. */
  max_retries: number;
  /** Deprecated (spec 2.5, 9): returned, never written. */
  retry_window_days: number;
  start_time: string;
  end_time: string;
  weekdays: Weekday[];
  retry_delay_sequence: string[];
  created_at: string;
  updated_at: string;
}

export type MemberRole = 'owner' | 'admin' | 'editor' | 'viewer';
export const MEMBER_ROLES: readonly MemberRole[] = ['owner', 'admin', 'editor', 'viewer'];

/** Spec 2.8: a membership of a person in an organization. */
export interface OrganizationMember {
  id: string;
  organizationId: string;
  role: MemberRole;
  user: { first_name: string; last_name: string; email: string };
  joined_at: string;
}

export const JOB_ROLES = ['HIRING_MANAGER', 'RECRUITER', 'COORDINATOR', 'SOURCER', 'INTERVIEWER', 'ADMIN'] as const;
export type JobRole = (typeof JOB_ROLES)[number];

/** Spec 2.7 + 3.5: a row of a job's hiring team, matched (organization_member set) or pending. */
export interface HiringTeamMember {
  id: string;
  organizationId: string;
  jobId: string;
  email: string;
  organization_member: string | null;
  job_roles: JobRole[];
  created_at: string;
}

export interface WebhookEndpoint {
  id: string;
  organizationId: string;
  url: string;
  enabled: boolean;
  event_types: string[];
  secret: string;
  description: string;
  created_at: string;
  updated_at: string;
}

/** One attempt of one delivery (spec 2.11, 6.3): every attempt is recorded. */
export interface DeliveryRecord {
  id: string;
  webhook_id: string;
  event_id: string;
  event_type: string;
  message_id: string;
  attempt: number;
  status: 'succeeded' | 'failed';
  response_code: number | null;
  error: 'timeout' | 'network_error' | null;
  attempted_at: string;
  duration_ms: number;
  /** Nominal delay before the next attempt per the spec schedule; null when none follows. */
  retry_delay_ms: number | null;
  /** When, on the sandbox clock, the next attempt is due (schedule divided by timeFactor). */
  next_attempt_at: string | null;
  /**
   * Set when the retry this record announced was dropped because its endpoint was paused or
   * deleted when it fell due (then `retry_delay_ms` and `next_attempt_at` are null: none follows).
   */
  retry_dropped: { reason: 'endpoint_paused' | 'endpoint_deleted'; at: string } | null;
}

/** An event as emitted (spec 6.1) before it is addressed to an endpoint. */
export interface SandboxEvent {
  id: string;
  organizationId: string;
  event_type: string;
  created_at: string;
  payload: Record<string, unknown>;
}

export const EVENT_TYPES = [
  'application.created',
  'application.status_changed',
  'interview.completed',
  'cv_evaluation.completed',
  'insights.completed',
  'job_application.deleted',
  'interview_v2.completed',
] as const;
