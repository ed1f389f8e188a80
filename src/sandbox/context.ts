import type { Clock } from './clock.js';
import type { FaultInjector } from './http/faults.js';
import type { IdempotencyStore } from './http/idempotency.js';
import type { ScoringReads } from './http/scoringReads.js';
import type { Lifecycle } from './scenarios/lifecycle.js';
import type { SandboxStore } from './store.js';

/** What the route modules share; built once by createSandbox. */
export interface SandboxContext {
  store: SandboxStore;
  clock: Clock;
  idempotency: IdempotencyStore;
  faults: FaultInjector;
  lifecycle: Lifecycle;
  /** Latency and counts of the scoring reads. */
  reads: ScoringReads;
  /** Largest CV upload accepted, in bytes. */
  cvMaxBytes: number;
}
