import type { ScoringState } from '../types.js';

/** Spec 3.6: what a scoring GET answers for a sub-resource in a given state at a given instant. */
export type ScoringReadBody =
  | { status: 'processing'; reason: string; result: null }
  | { status: 'unavailable'; reason: string; result: null }
  | Record<string, unknown>;

export function readScoring(state: ScoringState, now: number): ScoringReadBody {
  switch (state.kind) {
    case 'pending':
      return { status: 'processing', reason: state.reason, result: null };
    case 'ready':
      // The event may arrive before the result is readable (issue 3: configurable delay); until
      // then the read keeps saying processing, never 404 (spec 4.2).
      return state.readyAt > now ? { status: 'processing', reason: 'scoring_in_progress', result: null } : state.result;
    case 'unavailable':
      return { status: 'unavailable', reason: state.reason, result: null };
  }
}
