/**
 * Paces a worker: `turn` resolves when it may claim again, `charge` books the time its work took.
 * `turn` resolves to true while processing is held back: the worker then keeps one job group
 * (one job, or one batch) in flight at most, so its completions do not run back to back.
 */
export interface Pacer {
  turn(): Promise<boolean>;
  charge(ms: number): void;
}
