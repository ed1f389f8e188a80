import type { Logger } from '../observability/logger.js';
import { LogThrottle } from '../observability/repeatedFailure.js';
import { systemClock } from '../util/clock.js';

/** Outage failures in a row of one source before its jobs are held (SourceHolds.holdForOutage). */
export const OUTAGE_HOLD_AFTER = 8;
/** The first hold; each 4 further failures double it, up to OUTAGE_HOLD_MAX_MS. */
export const OUTAGE_HOLD_FIRST_MS = 15_000;
export const OUTAGE_HOLD_MAX_MS = 5 * 60_000;

/** How long the breaker holds a source after its `failures`-th outage failure in a row (OUTAGE_HOLD_AFTER or more). */
export function outageHoldMs(failures: number): number {
  return Math.min(OUTAGE_HOLD_MAX_MS, OUTAGE_HOLD_FIRST_MS * 2 ** Math.floor((failures - OUTAGE_HOLD_AFTER) / 4));
}

/** Why a worker holds a whole source: the remote's Retry-After, or the outage breaker. */
export type HoldReason = 'retry_after' | 'outage';

/** One hold of a source at a moment: until when (the worker's clock), and why. */
export interface SourceHold {
  source: string;
  reason: HoldReason;
  untilMs: number;
}

/**
 * A worker's holds of whole sources, apart from the gate's pauses: a remote's Retry-After and
 * the outage breaker. None of a held source's jobs of a gated kind is claimed until its hold ends.
 */
export class SourceHolds {
  /**
   * Sources the remote asked to slow down (a 429, a 503 with Retry-After: the hiring service for
   * a source's reads, a consumer for a sink's deliveries, whose jobs' source is `sink:<name>`):
   * none of their jobs of a gated kind is claimed before this time (the worker's clock). In
   * memory: after a restart, the first job is told again.
   */
  private readonly throttledUntil = new Map<string, number>();
  /** Outage failures in a row per source since one of its jobs last went through (see holdForOutage). */
  private readonly outageFailures = new Map<string, number>();
  /** The breaker's holds, apart from the 429's (throttledUntil): a job that goes through ends them. */
  private readonly outageHoldUntil = new Map<string, number>();

  /**
   * When each (reason, source)'s hold was last said at warn, and the holds said at debug since. A
   * consumer or the service answering 429 with `Retry-After: 1` for hours starts a hold at every
   * job tried after the last one ends: one warn line a second, per source. Said when the first
   * starts, then once a minute with a count. Not started over when a job goes through: a rate
   * limit lets some jobs through between its 429s, and each hold after one was said at warn again.
   * Every note passes the worker's own `now`: the throttle's clock is never read.
   */
  private readonly holdsSaid = new LogThrottle(systemClock);

  constructor(private readonly logger: Logger) {}

  /** A new hold of `source` starts: said at warn (true), or at debug, counted for the next line. */
  private sayHold(reason: HoldReason, source: string, now: number): { loud: boolean; fields: Record<string, number> } {
    const said = this.holdsSaid.note(`${reason}\0${source}`, '', now);
    return { loud: said.loud, fields: said.loud && said.since > 0 ? { holds_since_last_line: said.since } : {} };
  }

  /** The remote said to wait `told` ms (a Retry-After that throttles the source). */
  throttle(source: string, now: number, told: number, log: Logger): void {
    if ((this.throttledUntil.get(source) ?? 0) < now) {
      const said = this.sayHold('retry_after', source, now);
      log[said.loud ? 'warn' : 'debug']({ source, wait_ms: told, ...said.fields }, 'asked to slow down (Retry-After): none of this source\'s jobs run until the wait has passed');
    }
    this.throttledUntil.set(source, Math.max(this.throttledUntil.get(source) ?? 0, now + told));
  }

  /** The wall clock stepped back by `stepMs`: each hold ends when it would have, not a step later. */
  moveBack(stepMs: number): void {
    for (const holds of [this.throttledUntil, this.outageHoldUntil]) for (const [source, until] of holds) holds.set(source, until - stepMs);
  }

  /**
   * Sources whose latest outcome was an outage failure (a run of them not ended by a job that went
   * through): the worker lets each have one job in flight at a time (Worker.claim), so a service
   * that hangs or fails slowly takes one slot, not all of them, from the other sources' work.
   */
  failing(): string[] {
    return [...this.outageFailures.keys()];
  }

  /** A job of the source went through: its run of outage failures, and the breaker's hold, end. */
  wentThrough(source: string): void {
    this.outageFailures.delete(source);
    this.outageHoldUntil.delete(source);
  }

  /**
   * Holds in memory: after a restart they are gone anyway, and the CLI, another process, can end
   * them only through the gate (HeldSources.released). Returns the sources still throttled.
   */
  release(sources: readonly string[], now: number): string[] {
    for (const source of sources) {
      const until = Math.max(this.throttledUntil.get(source) ?? 0, this.outageHoldUntil.get(source) ?? 0);
      this.throttledUntil.delete(source);
      this.outageHoldUntil.delete(source);
      this.outageFailures.delete(source);
      if (until > now) this.logger.info({ source, held_for_ms: until - now }, "an operator said the remote is back: this source's jobs run again now, not when its wait has passed");
    }
    return this.throttled(now);
  }

  /** Sources still throttled at `now`, by a Retry-After or the outage breaker (expired entries are dropped). */
  throttled(now: number): string[] {
    const out = new Set<string>();
    for (const holds of [this.throttledUntil, this.outageHoldUntil]) {
      for (const [source, until] of holds) {
        if (until > now) out.add(source);
        else holds.delete(source);
      }
    }
    return [...out];
  }

  /**
   * The holds still running at `now`, each reason apart (a source can be held by both), for the
   * metrics and /readyz: read at a scrape, so expired entries are left for the claim to drop.
   */
  held(now: number): SourceHold[] {
    const out: SourceHold[] = [];
    for (const [reason, holds] of [['retry_after', this.throttledUntil], ['outage', this.outageHoldUntil]] as const) {
      for (const [source, untilMs] of holds) if (untilMs > now) out.push({ source, reason, untilMs });
    }
    return out;
  }

  /**
   * A circuit breaker per source: each job backs off on its own, so with a large backlog an
   * outage still drew hundreds of failing requests a second from 4 workers (614/s on average
   * with 45,000 reads waiting, each on its own 30 s floor). After OUTAGE_HOLD_AFTER failures in a
   * row, none of the source's jobs run for a while (as for a 429's Retry-After), longer with each
   * further failure up to OUTAGE_HOLD_MAX_MS; the jobs that run after a hold are its probes, and
   * the first that goes through ends it.
   */
  holdForOutage(source: string, now: number, log: Logger): number {
    const failures = (this.outageFailures.get(source) ?? 0) + 1;
    this.outageFailures.set(source, failures);
    if (failures < OUTAGE_HOLD_AFTER) return failures;
    const holdMs = outageHoldMs(failures);
    if ((this.outageHoldUntil.get(source) ?? 0) < now) {
      const said = this.sayHold('outage', source, now);
      log[said.loud ? 'warn' : 'debug']({ source, failures, hold_ms: holdMs, ...said.fields }, 'the remote keeps failing: none of this source\'s jobs run until the hold has passed, then one tries again');
    }
    this.outageHoldUntil.set(source, Math.max(this.outageHoldUntil.get(source) ?? 0, now + holdMs));
    return failures;
  }
}
