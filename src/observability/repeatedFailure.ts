import { isSqliteBusy, primarySqliteCode } from '../db/sqliteHelpers.js';
import type { Clock } from '../util/clock.js';
import type { Logger } from './logger.js';

/** What an operator does about SQLITE_FULL: the same words wherever a loop meets it. */
export const FULL_DISK_HINT = 'the disk that holds DATABASE_PATH is full: free space on it (or grow the volume); nothing is lost meanwhile, deliveries are answered 503 and the service retries them';

const isSqliteFull = (err: unknown): boolean => {
  const code = (err as { code?: unknown })?.code;
  return typeof code === 'string' && primarySqliteCode(code) === 'SQLITE_FULL';
};

/** How often a failure that keeps repeating is logged again at its level (in between: at debug). */
export const REPEATED_FAILURE_LOG_MS = 60_000;

/**
 * Which failures to log at their level: per group (a loop, a source, a sink), the first one, one
 * whose key (its error) differs from the last, and then one a minute; the others at debug.
 * `linesPerWindow` (1 unless said): the lines said at their level in each such minute, from its
 * first (refused requests, RefusalLog: a few with their ids, then a count).
 */
export class LogThrottle {
  private readonly groups = new Map<string, { key: string; atMs: number; lines: number; since: number; total: number }>();

  constructor(
    private readonly clock: Clock,
    private readonly linesPerWindow = 1,
  ) {}

  /**
   * `loud`: log this one at its level, with `since` (the failures of this key logged at debug
   * since its last such line) and, when the key changed, `previous` (those of the key before it,
   * which no line will count now). `now`: a caller that reads its own clock (SourceHolds) passes it.
   */
  note(group: string, key: string, now = this.clock.now()): { loud: boolean; since: number; previous: number } {
    const last = this.groups.get(group);
    const sameKey = last !== undefined && last.key === key;
    // A last line "after now": the wall clock went back since, and how long ago it was cannot be
    // told. Said now, or the failure stayed at debug until the clock was past that line again.
    if (sameKey && now >= last.atMs && now - last.atMs < REPEATED_FAILURE_LOG_MS) {
      last.total++;
      // Within the minute's lines, none was at debug yet (since is 0): see unsaid.
      if (last.lines < this.linesPerWindow) {
        last.lines++;
        return { loud: true, since: 0, previous: 0 };
      }
      last.since++;
      return { loud: false, since: last.since, previous: 0 };
    }
    this.groups.set(group, { key, atMs: now, lines: 1, since: 0, total: (last?.total ?? 0) + 1 });
    return { loud: true, since: sameKey ? last.since : 0, previous: sameKey ? 0 : (last?.since ?? 0) };
  }

  /**
   * The failures noted at debug since their group's last loud line, in groups whose last line is
   * at least `minAgeMs` old (`group`: that group only): each count is returned once, and counts as
   * a line said now. A burst that stops leaves no later failure to carry its count (see note):
   * this is how its count is said at all.
   */
  unsaid(minAgeMs: number, group?: string): { group: string; key: string; since: number; total: number }[] {
    const now = this.clock.now();
    const out: { group: string; key: string; since: number; total: number }[] = [];
    for (const [name, g] of this.groups) {
      // A last line after now (the clock went back): its age cannot be told, so its count is said.
      if ((group !== undefined && name !== group) || g.since === 0 || (now >= g.atMs && now - g.atMs < minAgeMs)) continue;
      out.push({ group: name, key: g.key, since: g.since, total: g.total });
      g.since = 0;
      g.atMs = now;
      g.lines = 1;
    }
    return out;
  }

  /** The group works again: returns how many failures its run had (0: none). */
  clear(group: string): number {
    const total = this.groups.get(group)?.total ?? 0;
    this.groups.delete(group);
    return total;
  }
}

/** The counts a loud line carries (see LogThrottle.note), only those above 0. */
export function throttleCounts(n: { since: number; previous: number }): Record<string, number> {
  return { ...(n.since > 0 ? { failed_since_last_line: n.since } : {}), ...(n.previous > 0 ? { previous_error_failed_since_last_line: n.previous } : {}) };
}

/**
 * What makes two job failures "alike" for the log throttle: the error's text without what each
 * request says of itself. A redirect's Location digest (`(url sha256 …)`: each read's own path) and
 * a Retry-After's wait counted from that request's clock (`retry after 29123 ms`, an HTTP-date)
 * differ at every request of one failure: keyed on them, every failing read was a new error at
 * warn. So does the resource a result read asks for (`interview: `, `insights: `): an outage of the
 * service fails an application's interview, CV evaluation and insights reads in turn, and keyed on
 * it each one changed the error, every failure at warn. The full text is still each job's
 * `last_error`, and every line's `err`.
 */
export function failureKey(message: string): string {
  return message
    .replace(/^(?:interview|cv_evaluation|insights|legacy_interview): /, '')
    .replace(/\((?:url )?sha256 [0-9a-f]+\)/g, '(sha256 …)')
    .replace(/(retry after )\d+( ms)/gi, '$1…$2')
    .replace(/(Retry-After )\d+( s)/g, '$1…$2');
}

/**
 * A failure a loop meets at each of its turns (a job claim refused while another process holds
 * the write lock for minutes, a full disk): four times a second per worker, identical, for as
 * long as it lasts. Logged at its level when it starts or its error (code or message) changes,
 * then at most once a minute with `failed_since_last_line` (each failure in between at debug;
 * when the error changes, the previous one's such failures are `previous_error_failed_since_last_line`); the first success
 * after a repeated one is logged at info, so the log says when it ended.
 */
export class RepeatedFailureLog {
  private readonly throttle: LogThrottle;

  constructor(private readonly o: { logger: Logger; clock: Clock; level: 'warn' | 'error'; msg: string; recovered: string }) {
    this.throttle = new LogThrottle(o.clock);
  }

  failed(err: unknown, extra: Record<string, unknown> = {}): void {
    const message = (err as Error)?.message ?? String(err);
    const code = (err as { code?: unknown })?.code;
    const fields = {
      err: message,
      ...(typeof code === 'string' ? { code } : {}),
      ...(isSqliteBusy(err) ? { hint: 'another process holds the database write lock (a CLI command such as replay or dead-letters retry, a `work` process, a tool with a write transaction open); the work waits until it is released' } : {}),
      ...(isSqliteFull(err) ? { hint: FULL_DISK_HINT } : {}),
      ...extra,
    };
    // Code and message: two failures with one code (SQLITE_ERROR) about different things are two errors.
    const noted = this.throttle.note('', `${typeof code === 'string' ? code : ''}\n${message}`);
    if (!noted.loud) return void this.o.logger.debug(fields, this.o.msg);
    this.o.logger[this.o.level]({ ...fields, ...throttleCounts(noted) }, this.o.msg);
  }

  /** The loop's turn went through: a failure that repeated ends here (said at info; a single one needs no second line). */
  succeeded(): void {
    const total = this.throttle.clear('');
    if (total > 1) this.o.logger.info({ failures: total }, this.o.recovered);
  }
}
