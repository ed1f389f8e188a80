import { iso } from '../clock.js';
import type { Random } from '../fakeData.js';
import { newId } from '../ids.js';
import type { CriterionDefinition, InterviewOutcome, JobRecord } from '../types.js';

/** How a test wants an interview to end. Everything is optional; the default is a good, eligible candidate. */
export interface InterviewOutcomeInput {
  outcome?: InterviewOutcome;
  /** false fails the first required qualification unless `failedQualifications` names others. */
  eligible?: boolean;
  /** Names of qualifications judged failed. */
  failedQualifications?: string[];
  /** Names of criteria with insufficient evidence (`outcome: not_assessed`). */
  notAssessed?: string[];
  /** Competency scores 1-5 in criterion order; missing ones are drawn at random (2-5). */
  competencyScores?: number[];
}

/** v2 interview result, per criterion (spec 2.10; fields beyond those stated are the sandbox's choice). */
export interface CriterionResult {
  criterion_id: string;
  name: string;
  type: 'competency' | 'qualification';
  is_required: boolean;
  outcome: 'scored' | 'not_assessed';
  score: number | null;
  passed: boolean | null;
  reasoning: string;
}

export interface InterviewResult {
  id: string;
  application_id: string;
  job_id: string;
  status: InterviewOutcome;
  overall_score: number | null;
  is_eligible: boolean;
  ineligibility_reasons: string[];
  summary: string | null;
  strengths: string[];
  weaknesses: string[];
  red_flags: string[];
  duration_seconds: number | null;
  completed_at: string;
  criteria_results: CriterionResult[];
  [key: string]: unknown;
}

export function defaultCriteria(): CriterionDefinition[] {
  const c = (name: string, description: string, kind: CriterionDefinition['kind'], required: boolean): CriterionDefinition => ({
    id: newId(),
    name,
    description,
    kind,
    required,
  });
  return [
    c('Customer focus', 'Puts the customer first and handles difficult situations calmly.', 'competency', false),
    c('Communication', 'Explains clearly and listens actively.', 'competency', false),
    c('Reliability', 'Shows up on time and follows through on commitments.', 'competency', false),
    c('Right to work', 'Holds the right to work in the country of the job.', 'qualification', true),
    c('Weekend availability', 'Can work at least two weekend shifts per month.', 'qualification', true),
  ];
}

function judge(criterion: CriterionDefinition, index: number, input: InterviewOutcomeInput, failed: Set<string>, random: Random): CriterionResult {
  const base = { criterion_id: criterion.id, name: criterion.name, type: criterion.kind, is_required: criterion.required };
  if (input.notAssessed?.includes(criterion.name)) {
    return { ...base, outcome: 'not_assessed', score: null, passed: null, reasoning: 'The candidate did not give enough evidence to assess this.' };
  }
  if (criterion.kind === 'qualification') {
    const passed = !failed.has(criterion.name);
    return { ...base, outcome: 'scored', score: null, passed, reasoning: passed ? 'Confirmed during the interview.' : 'The candidate stated this requirement is not met.' };
  }
  const given = input.competencyScores?.[index];
  const score = Math.min(5, Math.max(1, Math.round(given ?? random.int(2, 5))));
  return { ...base, outcome: 'scored', score, passed: null, reasoning: `Gave concrete examples; rated ${score} of 5 against the rubric.` };
}

function failedQualificationNames(criteria: CriterionDefinition[], input: InterviewOutcomeInput): Set<string> {
  if (input.failedQualifications !== undefined) return new Set(input.failedQualifications);
  if (input.eligible === false) {
    const first = criteria.find((c) => c.kind === 'qualification' && c.required);
    return new Set(first === undefined ? [] : [first.name]);
  }
  return new Set();
}

export function buildInterviewResult(
  job: JobRecord,
  applicationId: string,
  input: InterviewOutcomeInput,
  completedAt: number,
  random: Random,
): InterviewResult {
  const status = input.outcome ?? 'completed';
  const common = { id: newId(), application_id: applicationId, job_id: job.id, status, completed_at: iso(completedAt) };
  if (status !== 'completed') {
    // No conversation took place: nothing was assessed, which is "unknown", not failure (spec 2.10).
    const criteria_results = job.criteria.map((c) => judge(c, 0, { notAssessed: [c.name] }, new Set(), random));
    const summary = { unreachable: 'The candidate could not be reached.', failed: 'The interview call failed.', opted_out: 'The candidate opted out of the interview.' }[status];
    return { ...common, overall_score: null, is_eligible: true, ineligibility_reasons: [], summary, strengths: [], weaknesses: [], red_flags: [], duration_seconds: null, criteria_results };
  }
  const failed = failedQualificationNames(job.criteria, input);
  let competencyIndex = 0;
  const criteria_results = job.criteria.map((c) => judge(c, c.kind === 'competency' ? competencyIndex++ : 0, input, failed, random));
  const scores = criteria_results.flatMap((r) => (r.type === 'competency' && r.score !== null ? [r.score] : []));
  const overall = scores.length === 0 ? null : Math.round((scores.reduce((a, b) => a + b, 0) / scores.length) * 100) / 100;
  const ineligibility_reasons = criteria_results.filter((r) => r.is_required && r.passed === false).map((r) => r.name);
  return {
    ...common,
    overall_score: overall,
    is_eligible: ineligibility_reasons.length === 0,
    ineligibility_reasons,
    summary: 'Friendly and well-prepared candidate with relevant front-line experience.',
    strengths: ['Clear, structured answers', 'Relevant customer-facing experience'],
    weaknesses: ['Limited experience with inventory systems', 'Prefers fixed schedules'],
    red_flags: ineligibility_reasons.length > 0 ? [`Does not meet: ${ineligibility_reasons.join(', ')}`] : [],
    duration_seconds: random.int(420, 900),
    criteria_results,
  };
}

/** The `interview.result` block of the `interview.completed` event (spec 6.4). */
export function interviewEventResult(result: InterviewResult): Record<string, unknown> {
  const { overall_score, is_eligible, summary, strengths, weaknesses, red_flags } = result;
  return { overall_score, is_eligible, summary, strengths, weaknesses, red_flags };
}
