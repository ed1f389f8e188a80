import type { Clock } from '../util/clock.js';
import type { Logger } from './logger.js';
import { LogThrottle, REPEATED_FAILURE_LOG_MS } from './repeatedFailure.js';

/** The refusals of one kind logged at warn each minute (REPEATED_FAILURE_LOG_MS), a count line included. */
export const REFUSALS_LOGGED_PER_MINUTE = 5;

/**
 * Requests refused before anything is trusted (a delivery whose signature, headers or body fail,
 * a request that makes no URL): anyone can send those, without the secret, as fast as the
 * receiver answers. One warn line each was one client's 11,600 lines (2.5 MB) a second on
 * 127.0.0.1, all kept by Docker's json-file log driver. Per kind (a reason, and a source where
 * one is known: never an attacker's value, so the kinds are a fixed few), the first
 * REFUSALS_LOGGED_PER_MINUTE of a minute at warn as before, the rest at debug; their count is
 * said at warn as `refused_since_last_line`, on the first line of the next minute, or on a line
 * of its own (`more requests refused alike`) a minute after, when none comes (sayUnsaid). Each
 * refused delivery is still counted in the metrics.
 */
export class RefusalLog {
  private readonly throttle: LogThrottle;
  /** What each kind's count line names: one entry per kind, as bounded as the kinds. */
  private readonly kinds = new Map<string, Record<string, unknown>>();
  /** Set by end(): no count line comes after it. */
  private ended = false;

  constructor(
    private readonly logger: Logger,
    clock: Clock,
  ) {
    this.throttle = new LogThrottle(clock, REFUSALS_LOGGED_PER_MINUTE);
  }

  /**
   * A refusal of `kind` (`names`: the fields that say which kind, for its count line): null to
   * log it at debug, or the counts its warn line carries (`refused_since_last_line`, when some
   * were at debug since the kind's last warn line).
   */
  refused(kind: string, names: Record<string, unknown>): Record<string, number> | null {
    // After the stop's count lines: no later line would say this one's count. A few only (the
    // handlers of the connections the stop cut at SHUTDOWN_GRACE_MS): each at warn.
    if (this.ended) return {};
    const noted = this.throttle.note(kind, '');
    if (!noted.loud) return null;
    if (!this.kinds.has(kind)) this.kinds.set(kind, names);
    return noted.since > 0 ? { refused_since_last_line: noted.since } : {};
  }

  /**
   * The refusals logged at debug since their kind's last warn line, one warn line per kind, of
   * kinds whose last line is `minAgeMs` old or more (0: every kind, at a stop). A flood that
   * stops leaves no later refusal to carry its count: this says it.
   */
  sayUnsaid(minAgeMs = REPEATED_FAILURE_LOG_MS): void {
    for (const k of this.throttle.unsaid(minAgeMs)) {
      this.logger.warn({ ...this.kinds.get(k.group), refused_since_last_line: k.since }, 'more requests refused alike, logged at debug only');
    }
  }

  /**
   * At the stop, once the servers are closed: every count not said yet, and each refusal after
   * this at warn. A connection the stop cuts when SHUTDOWN_GRACE_MS passes ends its request's
   * handler after the server's close, so its refusal (`body_unreadable`) can come after these
   * counts: at debug, it was on no line at info or above.
   */
  end(): void {
    this.ended = true;
    this.sayUnsaid(0);
  }
}
