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
