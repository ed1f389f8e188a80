import { invalidInput } from './apiError.js';

/** Which read a fault applies to: the three v2 scoring reads, the v1 interview read, or all of them. */
export type FaultTarget = 'interview' | 'cv-evaluation' | 'insights' | 'v1-interview' | '*';

export interface FaultSpec {
  target: FaultTarget;
  /** Only this application; all applications when omitted. */
  applicationId?: string | undefined;
  /** HTTP status to answer, e.g. 500, 503, 429, 302. */
  status: number;
  /** How many matching reads get the fault (default 1). */
  times?: number | undefined;
  /** Extra response headers, e.g. `{ 'Retry-After': '30' }` or `{ Location: 'https://…' }`. */
  headers?: Record<string, string> | undefined;
  /** Response body; defaults to a spec 2.1 error array (or empty for 3xx). */
  body?: unknown;
}

interface ActiveFault extends FaultSpec {
  remaining: number;
}

/** Statuses a Response cannot carry a body with (Fetch standard: a null body status). */
const NO_BODY_STATUSES = new Set([204, 205, 304]);

/**
 * Spec 7 lists no code for a 429 and no Retry-After (8: rate limits "not shown"), so an injected
 * 429 uses the table's generic `error` and sends no Retry-After unless the test gives one: a
 * receiver must not come to need either.
 */
function defaultBody(status: number): unknown {
  if ((status >= 300 && status < 400) || NO_BODY_STATUSES.has(status)) return undefined;
  if (status === 429) return [{ code: 'error', detail: 'Request was throttled.', attr: null }];
  return [{ code: 'error', detail: 'A server error occurred.', attr: null }];
}

/**
 * Fault injection for the receiver's processing tests: a scoring read answers the given status a
 * given number of times, then behaves normally. Checked after authentication, before lookup.
 */
export class FaultInjector {
  private faults: ActiveFault[] = [];

  /**
   * Refuses, now, a fault no HTTP answer can carry: accepted, it failed the read it was meant for
   * (a 1xx dropped the connection, a header Node will not send answered 500 in plain text).
   */
  add(spec: FaultSpec): void {
    if (!Number.isInteger(spec.status) || spec.status < 200 || spec.status > 599) throw invalidInput('A status from 200 to 599: an answer cannot have another.', 'status');
    try {
      new Headers(spec.headers);
    } catch {
      throw invalidInput('Header names must be HTTP tokens and values must not hold line breaks.', 'headers');
    }
    if (spec.body !== undefined && NO_BODY_STATUSES.has(spec.status)) throw invalidInput(`A ${spec.status} answer has no body.`, 'body');
    this.faults.push({ ...spec, remaining: Math.max(1, spec.times ?? 1) });
  }

  clear(): void {
    this.faults = [];
  }

  /** Consumes one matching fault and builds its response, or returns undefined. */
  take(target: Exclude<FaultTarget, '*'>, applicationId: string): Response | undefined {
    const fault = this.faults.find(
      (f) => (f.target === '*' || f.target === target) && (f.applicationId === undefined || f.applicationId === applicationId),
    );
    if (fault === undefined) return undefined;
    fault.remaining -= 1;
    if (fault.remaining <= 0) this.faults = this.faults.filter((f) => f !== fault);
    const body = fault.body === undefined ? defaultBody(fault.status) : fault.body;
    const headers: Record<string, string> = { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...fault.headers };
    return new Response(body === undefined ? null : JSON.stringify(body), { status: fault.status, headers });
  }
}
