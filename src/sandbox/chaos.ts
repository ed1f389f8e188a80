/** Fault knobs on outgoing deliveries (issue 3: all off by default). */
export interface ChaosOptions {
  /** Probability 0..1 that a delivery is sent a second time as a new message: same event `id`, fresh `webhook-id`. */
  duplicateRate: number;
  /** Deliveries that fall due together go out newest event first (spec 6.1: deliveries are unordered). */
  reorder: boolean;
  /**
   * Deliveries to one endpoint that fall due together go out at once instead of one after
   * another (spec 6.1: nothing promises a receiver one request at a time), so a duplicate sent
   * with its original overlaps it and the answers can come back in any order.
   */
  parallel: boolean;
  /** Extra delay (ms, nominal; divided by timeFactor) before the first attempt of every delivery. */
  delayMs: number;
  /** Added to the `webhook-timestamp` header (ms) to exercise the receiver's 5-minute tolerance (spec 6.2). */
  timestampOffsetMs: number;
}

export const NO_CHAOS: ChaosOptions = Object.freeze({ duplicateRate: 0, reorder: false, parallel: false, delayMs: 0, timestampOffsetMs: 0 });

export function mergeChaos(current: ChaosOptions, patch: Partial<ChaosOptions>): ChaosOptions {
  const next = { ...current };
  if (patch.duplicateRate !== undefined) next.duplicateRate = Math.min(1, Math.max(0, patch.duplicateRate));
  if (patch.reorder !== undefined) next.reorder = patch.reorder;
  if (patch.parallel !== undefined) next.parallel = patch.parallel;
  if (patch.delayMs !== undefined) next.delayMs = Math.max(0, patch.delayMs);
  if (patch.timestampOffsetMs !== undefined) next.timestampOffsetMs = patch.timestampOffsetMs;
  return next;
}
