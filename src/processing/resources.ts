import type { HiringResource } from '../hiring/types.js';

/**
 * A lookup table keyed by what a delivery says (its event_type), with no prototype: an unknown
 * type named `constructor`, `toString` or `__proto__` must find nothing, not Object.prototype's
 * member (processing then failed on it at every attempt, and the event never reached a sink).
 */
export const byEventType = <V>(entries: Record<string, V>): Readonly<Record<string, V | undefined>> =>
  Object.freeze(Object.assign(Object.create(null) as Record<string, V>, entries));

/** Which scoring read completes each event (spec 6.4, 4.1, 4.2); events not listed need none. */
export const RESOURCE_OF_EVENT = byEventType<HiringResource>({
  'interview.completed': 'interview',
  'cv_evaluation.completed': 'cv_evaluation',
  'insights.completed': 'insights',
  'interview_v2.completed': 'legacy_interview',
});

export const RESULT_TABLE = {
  interview: 'interview_results',
  cv_evaluation: 'cv_evaluation_results',
  insights: 'insights_results',
  legacy_interview: 'legacy_interview_results',
} as const satisfies Record<HiringResource, string>;

export type ResultTable = (typeof RESULT_TABLE)[HiringResource];

const num = (v: unknown): number | null => {
  // A decimal string (spec: "decimal string, nullable"); a blank one is no score, not Number('') = 0.
  const n = typeof v === 'string' ? (v.trim() === '' ? null : Number(v)) : v;
  return typeof n === 'number' && Number.isFinite(n) ? n : null;
};
const bool = (v: unknown): number | null => (typeof v === 'boolean' ? (v ? 1 : 0) : null);
const list = (v: unknown): string | null => (Array.isArray(v) ? JSON.stringify(v) : null);
const text = (v: unknown): string | null => (typeof v === 'string' ? v : null);

/** The headline columns of each result table, read from the full object as fetched. */
export function headlineOf(resource: HiringResource, data: Record<string, unknown>): Record<string, string | number | null> {
  switch (resource) {
    case 'interview':
      return {
        outcome: text(data.status),
        overall_score: num(data.overall_score),
        is_eligible: bool(data.is_eligible),
        ineligibility_reasons: list(data.ineligibility_reasons),
      };
    case 'cv_evaluation':
      return { overall_score: num(data.overall_score) };
    case 'insights':
      return {
        overall_score: num(data.overall_score),
        hiring_recommendation: text(data.hiring_recommendation),
        is_eligible: bool(data.is_eligible),
        ineligibility_reasons: list(data.ineligibility_reasons),
      };
    case 'legacy_interview': {
      const output = data.output as Record<string, unknown> | null | undefined;
      return { outcome: text(data.status), overall_score: num(output?.overall_score) };
    }
  }
}

/** The headline columns of a resource, all null: for a result that has none (unavailable). */
export function nullHeadline(resource: HiringResource): Record<string, null> {
  return Object.fromEntries(Object.keys(headlineOf(resource, {})).map((k) => [k, null]));
}
