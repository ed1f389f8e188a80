import { iso } from './clock.js';
import { newId } from './ids.js';
import { defaultCriteria } from './scoring/interviewResult.js';
import type { InterviewEngine, JobRecord, Salary } from './types.js';

/** Settable job fields (spec 2.6; the request body of POST /jobs is "not shown", this is the sandbox's choice). */
export interface JobInput {
  title: string;
  description?: string | undefined;
  location?: string | undefined;
  external_id?: string | undefined;
  employment_type?: string | undefined;
  status?: string | undefined;
  is_public?: boolean | undefined;
  language?: string | undefined;
  is_multilingual?: boolean | undefined;
  cv_requirement?: string | undefined;
  additional_information?: string | undefined;
  salary?: Salary | undefined;
}

/** Enumerations the spec shows one value of ("value seen"); the rest are the sandbox's assumption. */
export const JOB_ENUMS = {
  employment_type: ['full_time', 'part_time', 'contract', 'temporary', 'internship'],
  status: ['active', 'draft', 'paused', 'closed', 'archived'],
  language: ['en-US', 'de-DE'],
  cv_requirement: ['required', 'optional', 'not_required'],
  salary_frequency: ['per_hour', 'per_day', 'per_week', 'per_month', 'per_year'],
} as const;

/** Jobs created through v2 run on the v3 engine (spec 9); legacy ones only come from the control API. */
export function createJobRecord(organizationId: string, input: JobInput, engine: InterviewEngine, now: number): JobRecord {
  return {
    id: newId(),
    organizationId,
    engine,
    external_id: input.external_id ?? '',
    external_id_source: 'api',
    title: input.title,
    description: input.description ?? '',
    location: input.location ?? 'Berlin, Germany',
    employment_type: input.employment_type ?? 'full_time',
    status: input.status ?? 'active',
    is_public: input.is_public ?? true,
    language: input.language ?? 'en-US',
    is_multilingual: input.is_multilingual ?? false,
    cv_requirement: input.cv_requirement ?? 'required',
    additional_information: input.additional_information ?? '',
    salary: input.salary ?? { min: '15.00', max: '19.50', currency: 'EUR', frequency: 'per_hour' },
    interview_config_id: newId(),
    created_at: iso(now),
    criteria: defaultCriteria(),
  };
}

/** Spec 2.6: the API view of a job (internal fields dropped). */
export function jobView(job: JobRecord): Record<string, unknown> {
  const { organizationId: _org, engine: _engine, criteria: _criteria, ...view } = job;
  return view;
}
