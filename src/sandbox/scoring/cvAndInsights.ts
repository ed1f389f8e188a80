import { iso } from '../clock.js';
import type { Random } from '../fakeData.js';
import { newId } from '../ids.js';
import type { InterviewResult } from './interviewResult.js';

/**
 * Spec 2.10 states no fields for these two results beyond the event payloads of 6.4
 * (`cv_evaluation.overall_score`; `insights.overall_score`, `hiring_recommendation`, `is_eligible`).
 * The rest of each shape is the sandbox's choice, listed in docs/sandbox.md. Scores are 0-5 like
 * every other v2 aggregate (spec 9).
 */
export interface CvEvaluationResult {
  id: string;
  application_id: string;
  status: 'completed';
  overall_score: number;
  summary: string;
  strengths: string[];
  weaknesses: string[];
  criteria_results: { name: string; outcome: 'scored' | 'not_assessed'; score: number | null }[];
  completed_at: string;
  [key: string]: unknown;
}

export type HiringRecommendation = 'strong_yes' | 'yes' | 'maybe' | 'no';

export interface InsightsResult {
  id: string;
  application_id: string;
  status: 'completed';
  overall_score: number;
  hiring_recommendation: HiringRecommendation;
  is_eligible: boolean;
  ineligibility_reasons: string[];
  interview_overall_score: number | null;
  cv_overall_score: number | null;
  summary: string;
  completed_at: string;
  [key: string]: unknown;
}

const round2 = (n: number): number => Math.round(n * 100) / 100;

export function buildCvEvaluation(applicationId: string, completedAt: number, random: Random, overallScore?: number): CvEvaluationResult {
  const criteria_results = [
    { name: 'Relevant experience', outcome: 'scored' as const, score: random.int(2, 5) },
    { name: 'Education and certificates', outcome: 'scored' as const, score: random.int(1, 5) },
    { name: 'Language skills', outcome: 'not_assessed' as const, score: null },
  ];
  const scored = criteria_results.flatMap((c) => (c.score === null ? [] : [c.score]));
  return {
    id: newId(),
    application_id: applicationId,
    status: 'completed',
    overall_score: round2(overallScore ?? scored.reduce((a, b) => a + b, 0) / scored.length),
    summary: 'Three years of relevant experience; certificates listed without dates.',
    strengths: ['Steady employment history', 'Relevant certificates'],
    weaknesses: ['No language skills stated'],
    criteria_results,
    completed_at: iso(completedAt),
  };
}

export function recommendationFor(score: number): HiringRecommendation {
  if (score >= 4.25) return 'strong_yes';
  if (score >= 3.5) return 'yes';
  if (score >= 2.5) return 'maybe';
  return 'no';
}

/**
 * Combined insights. `is_eligible` mirrors the interview's eligibility; the recommendation is
 * derived from the score alone, because spec 6.4 forbids using ineligibility to auto-reject.
 */
export function buildInsights(
  applicationId: string,
  completedAt: number,
  interview: InterviewResult | null,
  cv: CvEvaluationResult | null,
  overallScore?: number,
): InsightsResult {
  const parts = [interview?.overall_score ?? null, cv?.overall_score ?? null].filter((s): s is number => s !== null);
  // The lifecycle refuses insights with no part and no score given; 0 is only a type-level fallback.
  const score = round2(overallScore ?? (parts.length === 0 ? 0 : parts.reduce((a, b) => a + b, 0) / parts.length));
  return {
    id: newId(),
    application_id: applicationId,
    status: 'completed',
    overall_score: score,
    hiring_recommendation: recommendationFor(score),
    is_eligible: interview?.is_eligible ?? true,
    ineligibility_reasons: interview?.ineligibility_reasons ?? [],
    interview_overall_score: interview?.overall_score ?? null,
    cv_overall_score: cv?.overall_score ?? null,
    summary: 'Interview and CV agree on solid customer-facing experience.',
    completed_at: iso(completedAt),
  };
}
