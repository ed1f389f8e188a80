import { isSqliteBusy } from '../db/sqliteHelpers.js';
import type { Clock } from '../util/clock.js';
import type { Logger } from './logger.js';

/** How often a failure that keeps repeating is logged again at its level (in between: at debug). */
export const REPEATED_FAILURE_LOG_MS = 60_000;

/**
 * A failure a loop meets at each of its turns (a job claim refused while another process holds
 * the write lock for minutes, a full disk): four times a second per worker, identical, for as
 * long as it lasts. Logged at its level when it starts or its error changes, then at most once
 * a minute with `failed_since_last_line` (each failure in between at debug); the first success
 * after a repeated one is logged at info, so the log says when it ended.
 */
export class RepeatedFailureLog {
  private last: { key: string; atMs: number; since: number; total: number } | null = null;

  constructor(private readonly o: { logger: Logger; clock: Clock; level: 'warn' | 'error'; msg: string; recovered: string }) {}

  failed(err: unknown): void {
    const message = (err as Error)?.message ?? String(err);
    const code = (err as { code?: unknown })?.code;
    const key = typeof code === 'string' ? code : message;
    const now = this.o.clock.now();
    const fields = {
      err: message,
      ...(typeof code === 'string' ? { code } : {}),
      ...(isSqliteBusy(err) ? { hint: 'another process holds the database write lock (a CLI command such as replay or dead-letters retry, a `work` process, a tool with a write transaction open); the work waits until it is released' } : {}),
    };
    const last = this.last;
    if (last !== null && last.key === key && now - last.atMs < REPEATED_FAILURE_LOG_MS) {
      last.since++;
      last.total++;
      this.o.logger.debug(fields, this.o.msg);
      return;
    }
    this.o.logger[this.o.level]({ ...fields, ...(last !== null && last.since > 0 ? { failed_since_last_line: last.since } : {}) }, this.o.msg);
    this.last = { key, atMs: now, since: 0, total: (last?.total ?? 0) + 1 };
  }

  /** The loop's turn went through: a failure that repeated ends here (said at info; a single one needs no second line). */
  succeeded(): void {
    if (this.last === null) return;
    if (this.last.total > 1) this.o.logger.info({ failures: this.last.total }, this.o.recovered);
    this.last = null;
  }
}
