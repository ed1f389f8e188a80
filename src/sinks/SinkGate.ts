import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.js';
import type { HeldSources, SourceGate } from '../queue/Worker.js';
import type { Clock } from '../util/clock.js';
import { disableSink, sinkDisabled } from './deliveryRecords.js';
import { sinkJobKind } from './enqueueDeliveries.js';

/**
 * The gate of one sink's worker. Delivery jobs carry `source = sink:<name>`,
 * so while the sink is disabled (sink_state) the worker claims none of them:
 * they stay pending, untouched, until it is enabled again. Read from the
 * database on every claim, so an operator enabling it from the CLI (another
 * process), or saying its consumer is back (`sinks send-now`), takes effect
 * without a restart. Success never re-enables it.
 */
export class SinkGate implements SourceGate {
  private readonly domain: string;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly clock: Clock,
    private readonly sink: string,
    private readonly target: string,
  ) {
    this.domain = sinkJobKind(sink);
  }

  /**
   * The sink's sink_state.updated_at as last read: undefined before the first read, null while it
   * has no row. An operator's enable or `sinks send-now` stamps it: the consumer is back, and
   * the worker's hold of the sink (a Retry-After's wait, in its memory) ends.
   */
  private stamp: string | null | undefined;

  async blockedSources(): Promise<HeldSources> {
    const row = await this.db.selectFrom('sink_state').select(['disabled_at', 'updated_at']).where('sink', '=', this.sink).executeTakeFirst();
    const stamp = row?.updated_at ?? null;
    const released = this.stamp !== undefined && stamp !== this.stamp && !row?.disabled_at;
    this.stamp = stamp;
    return { blocked: row?.disabled_at ? [this.domain] : [], probes: [], ...(released ? { released: [this.domain] } : {}) };
  }

  /** `sentAt`: when the attempt answered 410 was sent; an enable since then wins (disableSink). */
  async pause(_source: string, status: number, detail: string, sentAt?: number): Promise<boolean> {
    const now = this.clock.now();
    return disableSink(this.db, this.sink, { reason: detail, status, target: this.target }, now, sentAt ?? now);
  }

  /** Whether the sink is disabled now. */
  async disabled(): Promise<boolean> {
    return (await sinkDisabled(this.db, this.sink)) !== undefined;
  }

  async resume(): Promise<void> {}
}
