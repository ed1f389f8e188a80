import { describe, expect, it } from 'vitest';
import { decideOutcome, isRetryable } from '../../src/hiring/decideOutcome.js';
import {
  DecisionError,
  isDecisionError,
  PauseSourceError,
  PermanentError,
  RetryableError,
  RetryAfterError,
} from '../../src/hiring/errors.js';
import { describeOutcome, outcomeToError } from '../../src/hiring/outcomeToError.js';
import type { HiringOutcome } from '../../src/hiring/types.js';

const base = { resource: 'interview', elapsedMs: 5 } as const;
const noErrors = { errors: [], rawBody: null };

const cases: Array<[HiringOutcome, ReturnType<typeof decideOutcome>['action'], (new (...a: never[]) => DecisionError) | null]> = [
  [{ ...base, kind: 'ready', status: 200, data: {} }, 'result', null],
  [{ ...base, kind: 'processing', status: 200, reason: null }, 'result', null],
  [{ ...base, kind: 'unavailable', status: 200, reason: 'no_result' }, 'result', null],
  [{ ...base, ...noErrors, kind: 'unauthorized', status: 401 }, 'pause_source', PauseSourceError],
  [{ ...base, ...noErrors, kind: 'unauthorized', status: 403 }, 'pause_source', PauseSourceError],
  [{ ...base, ...noErrors, kind: 'not_found', status: 404 }, 'retry', RetryableError],
  [{ ...base, ...noErrors, kind: 'rate_limited', status: 429, retryAfterMs: null }, 'retry', RetryableError],
  [{ ...base, ...noErrors, kind: 'rate_limited', status: 429, retryAfterMs: 7000 }, 'retry_after', RetryAfterError],
  [{ ...base, ...noErrors, kind: 'server_error', status: 500, retryAfterMs: null }, 'retry', RetryableError],
  [{ ...base, ...noErrors, kind: 'server_error', status: 503, retryAfterMs: 0 }, 'retry_after', RetryAfterError],
  [{ ...base, ...noErrors, kind: 'client_error', status: 400 }, 'permanent', PermanentError],
  [{ ...base, ...noErrors, kind: 'client_error', status: 408 }, 'retry', RetryableError],
  // A proxy on the way refusing its credentials: mended in the proxy's settings, never a dead letter.
  [{ ...base, ...noErrors, kind: 'client_error', status: 407 }, 'retry', RetryableError],
  [{ ...base, kind: 'redirect', status: 302, location: 'https://x.example' }, 'pause_source', PauseSourceError],
  [{ ...base, kind: 'redirect', status: 301, location: null }, 'pause_source', PauseSourceError],
  [{ ...base, kind: 'network', message: 'fetch failed', timeout: false, code: 'ECONNRESET' }, 'retry', RetryableError],
  [{ ...base, kind: 'network', message: 'no response', timeout: true, code: null }, 'retry', RetryableError],
  [{ ...base, kind: 'invalid_response', status: 200, problem: 'not_json', message: 'x' }, 'retry', RetryableError],
  [{ ...base, kind: 'invalid_response', status: 200, problem: 'too_large', message: 'x' }, 'permanent', PermanentError],
];

describe('decideOutcome / isRetryable / outcomeToError', () => {
  it.each(cases)('%j → %s', (outcome, action, errorClass) => {
    expect(decideOutcome(outcome).action).toBe(action);
    expect(isRetryable(outcome)).toBe(action === 'retry' || action === 'retry_after');
    const error = outcomeToError(outcome);
    if (errorClass === null) {
      expect(error).toBeNull();
    } else {
      expect(error).toBeInstanceOf(errorClass);
      expect(error?.cause).toBe(outcome);
      expect(error?.message).toBe(describeOutcome(outcome));
    }
  });

  it('a pause carries the status the pause records, and a log line saying what to fix', () => {
    const redirect = outcomeToError({ ...base, kind: 'redirect', status: 301, location: 'https://api.example.com/' });
    expect(redirect).toMatchObject({ status: 301, summary: expect.stringMatching(/redirect.*paused until HIRING_API_URL/) });
    const refused = outcomeToError({ ...base, ...noErrors, kind: 'unauthorized', status: 403 });
    expect(refused).toMatchObject({ status: 403, summary: expect.stringMatching(/^API key refused/) });
  });

  it('passes the Retry-After wait into the decision and the error', () => {
    const outcome: HiringOutcome = { ...base, ...noErrors, kind: 'rate_limited', status: 429, retryAfterMs: 7000 };
    expect(decideOutcome(outcome)).toEqual({ action: 'retry_after', retryAfterMs: 7000 });
    const error = outcomeToError(outcome);
    expect(error instanceof RetryAfterError && error.retryAfterMs).toBe(7000);
  });
});

describe('describeOutcome', () => {
  it('names the resource, status and first API error', () => {
    const outcome: HiringOutcome = {
      ...base,
      kind: 'not_found',
      status: 404,
      errors: [
        { code: 'not_found', detail: 'Not found.', attr: null },
        { code: 'other', detail: 'x', attr: 'id' },
      ],
      rawBody: null,
    };
    expect(describeOutcome(outcome)).toBe('interview: HTTP 404 not_found (not_found: Not found. +1 more)');
  });

  it('falls back to the raw body and mentions the wait', () => {
    const outcome: HiringOutcome = {
      ...base,
      kind: 'server_error',
      status: 502,
      errors: [],
      rawBody: 'Bad gateway',
      retryAfterMs: 3000,
    };
    expect(describeOutcome(outcome)).toBe('interview: HTTP 502 server_error (Bad gateway), retry after 3000 ms');
  });

  const clientError = (errors: { code: string; detail: string; attr: string | null }[]): HiringOutcome => ({ ...base, kind: 'client_error', status: 400, errors, rawBody: null });

  it("withholds the detail of an error about a candidate's field: it may quote the value", () => {
    expect(describeOutcome(clientError([{ code: 'invalid', detail: 'Value 442079460958 is invalid', attr: 'phone_number' }]))).toBe(
      "interview: HTTP 400 client_error (invalid [phone_number]: detail withheld, it is about a candidate's field)",
    );
    expect(describeOutcome(clientError([{ code: 'invalid', detail: 'Siobhan Quarrington is too long', attr: 'candidate.last_name' }]))).not.toContain('Siobhan');
    expect(describeOutcome(clientError([{ code: 'invalid', detail: 'jane&#64;example.com bounced', attr: 'email' }]))).not.toContain('jane');
    // Other fields keep their detail, redacted.
    expect(describeOutcome(clientError([{ code: 'required', detail: 'This field is required.', attr: 'job_id' }]))).toBe(
      'interview: HTTP 400 client_error (required [job_id]: This field is required.)',
    );
  });

  it('says a redirect by its origin and a digest: a sign-in redirect carries tokens and addresses in its query', () => {
    const redirect = (location: string): HiringOutcome => ({ ...base, kind: 'redirect', status: 302, location });
    const said = describeOutcome(redirect('https://sso.example.com/authorize?login_hint=jane%40example.io&access_token=eyJ.SECRET'));
    expect(said).toMatch(/^interview: HTTP 302 redirect not followed \(to https:\/\/sso\.example\.com\/… \(url sha256 [0-9a-f]{12}\)\)$/);
    expect(describeOutcome(redirect('https://sso.example.com/'))).toBe('interview: HTTP 302 redirect not followed (to https://sso.example.com)');
    expect(describeOutcome(redirect('/login?token=SECRET'))).toMatch(/^interview: HTTP 302 redirect not followed \(to a relative Location \(sha256 [0-9a-f]{12}\)\)$/);
  });
});

describe('decision errors', () => {
  it('carry their decision and name', () => {
    const errors = [
      new PermanentError('p'),
      new RetryableError('r'),
      new RetryAfterError('ra', 1500),
      new PauseSourceError('ps', { cause: 'revoked' }),
    ];
    expect(errors.map((e) => [e.name, e.decision, e.message])).toEqual([
      ['PermanentError', 'permanent', 'p'],
      ['RetryableError', 'retry', 'r'],
      ['RetryAfterError', 'retry_after', 'ra'],
      ['PauseSourceError', 'pause_source', 'ps'],
    ]);
    expect(errors.every(isDecisionError)).toBe(true);
    expect(errors.every((e) => e instanceof Error)).toBe(true);
    expect(errors[3]?.cause).toBe('revoked');
    expect(String(errors[2])).toBe('RetryAfterError: ra');
  });

  it('rejects a negative or non-finite wait', () => {
    expect(() => new RetryAfterError('x', -1)).toThrow(RangeError);
    expect(() => new RetryAfterError('x', Number.NaN)).toThrow(RangeError);
    expect(() => new RetryAfterError('x', Number.POSITIVE_INFINITY)).toThrow(RangeError);
  });

  it('does not mistake a plain error for a decision error', () => {
    expect(isDecisionError(new Error('x'))).toBe(false);
    expect(isDecisionError('x')).toBe(false);
  });
});
