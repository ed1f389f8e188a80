import { describe, expect, it } from 'vitest';
import { classifyResponse } from '../../src/hiring/classifyResponse.js';
import type { ResponseSnapshot } from '../../src/hiring/classifyResponse.js';

const NOW = Date.UTC(2025, 10, 21, 12, 0, 0);

function snapshot(status: number, text: string | null, extra: Partial<ResponseSnapshot> = {}): ResponseSnapshot {
  return {
    resource: 'interview',
    status,
    location: null,
    retryAfter: null,
    body: text === null ? null : { kind: 'text', text },
    elapsedMs: 12,
    now: NOW,
    ...extra,
  };
}

describe('classifyResponse', () => {
  it('carries resource, status and elapsed time', () => {
    expect(classifyResponse(snapshot(200, '{"status":"completed"}'))).toEqual({
      kind: 'ready',
      resource: 'interview',
      status: 200,
      elapsedMs: 12,
      data: { status: 'completed' },
    });
  });

  it('applies envelope detection to every v2 resource but not to the v1 read', () => {
    const envelope = '{"status":"processing","reason":null,"result":null}';
    for (const resource of ['interview', 'cv_evaluation', 'insights'] as const) {
      expect(classifyResponse(snapshot(200, envelope, { resource })).kind).toBe('processing');
    }
    expect(classifyResponse(snapshot(200, envelope, { resource: 'legacy_interview' })).kind).toBe('ready');
  });

  it('reports an oversized success body', () => {
    const outcome = classifyResponse({ ...snapshot(200, null), body: { kind: 'too_large', limit: 1024 } });
    expect(outcome).toMatchObject({ kind: 'invalid_response', problem: 'too_large', status: 200 });
    expect(outcome.kind === 'invalid_response' && outcome.message).toContain('1024');
  });

  it('reports a 204 as an unexpected status, not as data', () => {
    expect(classifyResponse(snapshot(204, ''))).toMatchObject({ kind: 'invalid_response', problem: 'unexpected_status' });
  });

  it.each([100, 199, 600, 999])('reports status %i as unexpected', (status) => {
    expect(classifyResponse(snapshot(status, ''))).toMatchObject({
      kind: 'invalid_response',
      problem: 'unexpected_status',
      status,
    });
  });

  it('reads the Location of a redirect even without a body', () => {
    expect(classifyResponse(snapshot(307, null, { location: 'https://elsewhere.example/x' }))).toMatchObject({
      kind: 'redirect',
      status: 307,
      location: 'https://elsewhere.example/x',
    });
  });

  it.each([
    [401, 'unauthorized'],
    [403, 'unauthorized'],
    [404, 'not_found'],
    [429, 'rate_limited'],
    [400, 'client_error'],
    [409, 'client_error'],
    [410, 'client_error'],
    [500, 'server_error'],
    [502, 'server_error'],
    [599, 'server_error'],
  ])('maps %i to %s', (status, kind) => {
    expect(classifyResponse(snapshot(status, '[]')).kind).toBe(kind);
  });

  it('parses Retry-After for 429 and 5xx only', () => {
    const retryAfter = 'Fri, 21 Nov 2025 12:00:42 GMT';
    expect(classifyResponse(snapshot(429, '[]', { retryAfter }))).toMatchObject({ retryAfterMs: 42_000 });
    expect(classifyResponse(snapshot(503, '[]', { retryAfter: '3' }))).toMatchObject({ retryAfterMs: 3000 });
    expect(classifyResponse(snapshot(404, '[]', { retryAfter: '3' }))).not.toHaveProperty('retryAfterMs');
  });
});
