import { iso } from '../clock.js';
import type { Random } from '../fakeData.js';
import { invalidInput } from '../http/apiError.js';
import { newId } from '../ids.js';
import type { CriterionDefinition, InterviewOutcome, JobRecord } from '../types.js';

/** How a test wants an interview to end. Everything is optional; the default is a good, eligible candidate. */
export interface InterviewOutcomeInput {
  outcome?: InterviewOutcome;
  /** false alone fails the first assessed required qualification; with `failedQualifications`, it must name one. */
  eligible?: boolean;
  /** Names of the job's qualifications judged failed (case-insensitive). */
  failedQualifications?: string[];
  /** Names of the job's criteria with insufficient evidence (`outcome: not_assessed`). */
  notAssessed?: string[];
  /** Integer competency scores 1-5 in criterion order, at most one per competency; missing ones are drawn at random (2-5). */
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

/** A test's instructions, checked against the job's criteria: names as the job spells them. */
interface Resolved {
  failed: Set<string>;
  notAssessed: Set<string>;
  scores: number[];
}

/** The control API's name of each instruction, used as the error's `attr`. */
const FIELD = { eligible: 'eligible', failedQualifications: 'failed_qualifications', notAssessed: 'not_assessed', competencyScores: 'competency_scores' } as const;

/** Names matched case-insensitively; one the job does not have is refused, never ignored. */
function criterionNames(criteria: CriterionDefinition[], names: string[], field: string, kind?: CriterionDefinition['kind']): Set<string> {
  const pool = criteria.filter((c) => kind === undefined || c.kind === kind);
  return new Set(
    names.map((name) => {
      const found = pool.find((c) => c.name.toLowerCase() === name.toLowerCase());
      if (found === undefined) throw invalidInput(`${JSON.stringify(name)} is not a ${kind ?? 'criterion'} of this job; it has ${pool.map((c) => JSON.stringify(c.name)).join(', ')}.`, field);
      return found.name;
    }),
  );
}

/**
 * Applies a test's instructions to the job's criteria, or refuses with 400 `invalid_input` (attr:
 * the control API's field) any it cannot apply: a name the job does not have, more scores than
 * competencies, an `eligible` the failures contradict, anything but `outcome` for an interview that
 * did not complete. A silently dropped instruction would let a test pass on a result it never asked for.
 */
export function resolveInterviewInput(criteria: CriterionDefinition[], input: InterviewOutcomeInput): Resolved {
  const status = input.outcome ?? 'completed';
  if (status !== 'completed') {
    const given = (Object.keys(FIELD) as (keyof typeof FIELD)[]).find((k) => input[k] !== undefined);
    if (given !== undefined) throw invalidInput(`An interview that ended ${status} assessed nothing, so ${FIELD[given]} cannot apply.`, FIELD[given]);
    // No conversation took place: nothing was assessed, which is "unknown", not failure (spec 2.10).
    return { failed: new Set(), notAssessed: new Set(criteria.map((c) => c.name)), scores: [] };
  }
  const notAssessed = criterionNames(criteria, input.notAssessed ?? [], FIELD.notAssessed);
  const competencies = criteria.filter((c) => c.kind === 'competency');
  const scores = input.competencyScores ?? [];
  if (scores.length > competencies.length) {
    throw invalidInput(`${scores.length} competency scores for ${competencies.length} competencies (${competencies.map((c) => c.name).join(', ')}).`, FIELD.competencyScores);
  }
  const badScore = scores.find((v) => !Number.isInteger(v) || v < 1 || v > 5);
  if (badScore !== undefined) throw invalidInput(`Competency scores are integers 1-5; got ${badScore}.`, FIELD.competencyScores);
  const required = criteria.filter((c) => c.kind === 'qualification' && c.required && !notAssessed.has(c.name));
  let failed: Set<string>;
  if (input.failedQualifications !== undefined) failed = criterionNames(criteria, input.failedQualifications, FIELD.failedQualifications, 'qualification');
  // `eligible: false` alone fails the first required qualification that is assessed.
  else failed = new Set(input.eligible === false && required[0] !== undefined ? [required[0].name] : []);
  const both = [...failed].find((name) => notAssessed.has(name));
  if (both !== undefined) throw invalidInput(`${JSON.stringify(both)} cannot be both failed and not assessed.`, FIELD.failedQualifications);
  const ineligible = required.some((c) => failed.has(c.name));
  if (input.eligible === false && !ineligible) {
    throw invalidInput('eligible: false needs a failed required qualification (failed_qualifications names none, or none is left to fail).', input.failedQualifications === undefined ? FIELD.eligible : FIELD.failedQualifications);
  }
  if (input.eligible === true && ineligible) throw invalidInput('eligible: true, but failed_qualifications names a required qualification.', FIELD.eligible);
  return { failed, notAssessed, scores };
}

function judge(criterion: CriterionDefinition, index: number, resolved: Resolved, random: Random): CriterionResult {
  const base = { criterion_id: criterion.id, name: criterion.name, type: criterion.kind, is_required: criterion.required };
  if (resolved.notAssessed.has(criterion.name)) {
    return { ...base, outcome: 'not_assessed', score: null, passed: null, reasoning: 'The candidate did not give enough evidence to assess this.' };
  }
  if (criterion.kind === 'qualification') {
    const passed = !resolved.failed.has(criterion.name);
    return { ...base, outcome: 'scored', score: null, passed, reasoning: passed ? 'Confirmed during the interview.' : 'The candidate stated this requirement is not met.' };
  }
  const score = resolved.scores[index] ?? random.int(2, 5);
  return { ...base, outcome: 'scored', score, passed: null, reasoning: `Gave concrete examples; rated ${score} of 5 against the rubric.` };
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
  const resolved = resolveInterviewInput(job.criteria, input);
  let competencyIndex = 0;
  const criteria_results = job.criteria.map((c) => judge(c, c.kind === 'competency' ? competencyIndex++ : 0, resolved, random));
  if (status !== 'completed') {
    const summary = { unreachable: 'The candidate could not be reached.', failed: 'The interview call failed.', opted_out: 'The candidate opted out of the interview.' }[status];
    return { ...common, overall_score: null, is_eligible: true, ineligibility_reasons: [], summary, strengths: [], weaknesses: [], red_flags: [], duration_seconds: null, criteria_results };
  }
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
