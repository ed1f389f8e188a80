import { asObject } from '../util/json.js';

/**
 * The block of an event payload that carries `is_eligible` (spec 6.4):
 * interview.completed → interview.result, insights.completed → insights.
 */
export function eligibilityVerdict(eventType: string, payload: unknown): Record<string, unknown> | null {
  const p = asObject(payload);
  if (eventType === 'interview.completed') return asObject(asObject(p?.interview)?.result);
  if (eventType === 'insights.completed') return asObject(p?.insights);
  return null;
}

/** `is_eligible: false` in the event: surface it to a recruiter, never auto-reject (spec 6.4). */
export const eventSaysIneligible = (eventType: string, payload: unknown): boolean =>
  eligibilityVerdict(eventType, payload)?.is_eligible === false;

/**
 * The knockouts of a legacy (v1) interview call (spec 2.3), as review reasons: the v1 read has no
 * `is_eligible`, but a knockout is the same verdict (a required criterion failed), so it is
 * surfaced the same way, never used to reject. From the questions judged failed
 * (`is_knocked_out`), the knockout criteria scored below their `knockout_threshold`, and the
 * pipeline phase `knocked_out` (3.1) when neither names one. Empty when none.
 */
export function legacyKnockoutReasons(data: unknown): string[] {
  const call = asObject(data);
  const output = asObject(call?.output);
  const reasons: string[] = [];
  for (const q of Array.isArray(output?.questions) ? output.questions : []) {
    const question = asObject(q);
    if (question?.is_knocked_out === true) reasons.push(`knocked out: ${typeof question.question === 'string' ? question.question : 'a knockout question'}`);
  }
  for (const s of Array.isArray(output?.criteria_scores) ? output.criteria_scores : []) {
    const score = asObject(s);
    const criterion = asObject(score?.criteria);
    const threshold = criterion?.knockout_threshold;
    if ((score?.is_knockout === true || criterion?.is_knockout === true) && typeof score?.score === 'number' && typeof threshold === 'number' && score.score < threshold) {
      reasons.push(`knockout criterion failed: ${typeof criterion?.criteria === 'string' ? criterion.criteria : 'unnamed'}`);
    }
  }
  if (reasons.length === 0 && call?.pipeline_phase === 'knocked_out') reasons.push('knocked out (pipeline_phase knocked_out)');
  return reasons;
}
