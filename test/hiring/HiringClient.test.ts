import { inspect } from 'node:util';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { HttpClient } from '../../src/http/httpClient.js';
import { createHiringClient } from '../../src/hiring/HiringClient.js';
import type { HiringClientOptions } from '../../src/hiring/HiringClient.js';
import type { HiringOutcome, OutcomeOf } from '../../src/hiring/types.js';
import { closedPort, json, startServer } from './testServer.js';
import type { Handler, TestServer } from './testServer.js';

const API_KEY = 'sk-test1234abcd.SECRETsegment5678';
const APP_ID = '3f1c2a7e-9d4b-4c1e-8a2f-5b6d7e8f9a0b';

const servers: TestServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function serve(handler: Handler): Promise<TestServer> {
  const server = await startServer(handler);
  servers.push(server);
  return server;
}

function client(server: TestServer | string, options: Partial<HiringClientOptions> = {}) {
  return createHiringClient({
    baseUrl: typeof server === 'string' ? server : server.url,
    apiKey: API_KEY,
    ...options,
  });
}

/** Narrow and check the key never leaks into an outcome. */
function expectKind<K extends HiringOutcome['kind']>(outcome: HiringOutcome, kind: K): OutcomeOf<K> {
  expect(JSON.stringify(outcome)).not.toContain(API_KEY);
  expect(JSON.stringify(outcome)).not.toContain('SECRETsegment');
  expect(outcome.kind, JSON.stringify(outcome)).toBe(kind);
  return outcome as OutcomeOf<K>;
}

// A v2 interview result whose own status is a terminal non-success value.
const FAILED_INTERVIEW = {
  status: 'failed',
  overall_score: null,
  is_eligible: false,
  ineligibility_reasons: ['Work permit'],
  criteria_results: [{ name: 'Work permit', outcome: 'not_assessed' }],
};

describe('request', () => {
  it('sends GET with the bearer key, Accept and User-Agent to each resource path', async () => {
    const server = await serve((_req, res) => json(res, 200, { status: 'completed' }));
    const c = client(server, { userAgent: 'test-agent/1' });

    const outcomes = [
      await c.getInterview(APP_ID),
      await c.getCvEvaluation(APP_ID),
      await c.getInsights(APP_ID),
      await c.getLegacyInterview(APP_ID),
      await c.fetchResource('cv_evaluation', APP_ID),
    ];

    expect(outcomes.map((o) => [o.kind, o.resource])).toEqual([
      ['ready', 'interview'],
      ['ready', 'cv_evaluation'],
      ['ready', 'insights'],
      ['ready', 'legacy_interview'],
      ['ready', 'cv_evaluation'],
    ]);
    expect(server.requests.map((r) => `${r.method} ${r.url}`)).toEqual([
      `GET /api/v2/applications/${APP_ID}/interview`,
      `GET /api/v2/applications/${APP_ID}/cv-evaluation`,
      `GET /api/v2/applications/${APP_ID}/insights`,
      `GET /api/v1/applications/${APP_ID}/interview`,
      `GET /api/v2/applications/${APP_ID}/cv-evaluation`,
    ]);
    for (const request of server.requests) {
      expect(request.headers.authorization).toBe(`Bearer ${API_KEY}`);
      expect(request.headers.accept).toBe('application/json');
      expect(request.headers['user-agent']).toBe('test-agent/1');
    }
  });

  it('percent-encodes the application id as one path segment', async () => {
    const server = await serve((_req, res) => json(res, 200, { status: 'completed' }));
    await client(server).getInterview('a/b?c=1#d é');
    expect(server.requests[0]?.url).toBe('/api/v2/applications/a%2Fb%3Fc%3D1%23d%20%C3%A9/interview');
  });

  it('rejects dot-segment and empty ids without sending anything', async () => {
    const server = await serve((_req, res) => json(res, 200, {}));
    const c = client(server);
    await expect(c.getInterview('..')).rejects.toThrow(TypeError);
    await expect(c.getInterview('.')).rejects.toThrow(TypeError);
    await expect(c.getInterview('')).rejects.toThrow(TypeError);
    expect(server.requests).toHaveLength(0);
  });

  it('tolerates a trailing slash and keeps a path prefix of the base URL', async () => {
    const server = await serve((_req, res) => json(res, 200, {}));
    await client(`${server.url}/`).getInsights('x');
    await client(`${server.url}/hiring//`).getInsights('x');
    expect(server.requests.map((r) => r.url)).toEqual([
      '/api/v2/applications/x/insights',
      '/hiring/api/v2/applications/x/insights',
    ]);
  });

  it('uses an injected HTTP client', async () => {
    const calls: string[] = [];
    const http: HttpClient = {
      request: async (url, req) => {
        calls.push(`${req.method} ${url} max=${req.maxBodyBytes}`);
        return { status: 200, header: () => null, body: { kind: 'text', text: JSON.stringify({ status: 'completed' }) } };
      },
    };
    const outcome = await client('https://hiring.example', { http, maxBodyBytes: 1234 }).getInterview('id1');
    expectKind(outcome, 'ready');
    expect(calls).toEqual(['GET https://hiring.example/api/v2/applications/id1/interview max=1234']);
  });
});

describe('readiness', () => {
  it('classifies a result whose own status is "failed" as ready, data as received', async () => {
    const server = await serve((_req, res) => json(res, 200, FAILED_INTERVIEW));
    const outcome = expectKind(await client(server).getInterview(APP_ID), 'ready');
    expect(outcome.status).toBe(200);
    expect(outcome.data).toEqual(FAILED_INTERVIEW);
    expect(outcome.elapsedMs).toBeGreaterThanOrEqual(0);
  });

  it('keeps unknown extra fields, top-level and nested', async () => {
    const body = {
      ...FAILED_INTERVIEW,
      status: 'completed',
      brand_new_field: { nested: [1, 2, { deeper: true }] },
      criteria_results: [{ name: 'SQL', outcome: 'scored', score: 4, future_field: 'x' }],
    };
    const server = await serve((_req, res) => json(res, 200, body));
    const outcome = expectKind(await client(server).getInsights(APP_ID), 'ready');
    expect(outcome.data).toEqual(body);
  });

  it('treats {status: "processing", result: {...}} as ready data, not an envelope', async () => {
    const body = { status: 'processing', result: { overall_score: 3 } };
    const server = await serve((_req, res) => json(res, 200, body));
    expect(expectKind(await client(server).getInterview(APP_ID), 'ready').data).toEqual(body);
  });

  it('classifies the processing envelope', async () => {
    const server = await serve((_req, res) => json(res, 200, { status: 'processing', reason: null, result: null }));
    const outcome = expectKind(await client(server).getCvEvaluation(APP_ID), 'processing');
    expect(outcome).toMatchObject({ status: 200, reason: null, resource: 'cv_evaluation' });
  });

  it.each(['interview_not_available', 'scoring_failed', 'no_result'])(
    'classifies the unavailable envelope with reason %s',
    async (reason) => {
      const server = await serve((_req, res) => json(res, 200, { status: 'unavailable', reason, result: null }));
      const outcome = expectKind(await client(server).getInterview(APP_ID), 'unavailable');
      expect(outcome).toMatchObject({ status: 200, reason });
    },
  );

  it('reads the v1 interview as ready even when the call status is "processing" (no envelope in v1)', async () => {
    const detail = {
      id: APP_ID,
      status: 'processing',
      job_application_id: APP_ID,
      attempt_number: 1,
      output: null,
      result: null, // even an envelope look-alike is call detail in v1
    };
    const server = await serve((_req, res) => json(res, 200, detail));
    expect(expectKind(await client(server).getLegacyInterview(APP_ID), 'ready').data).toEqual(detail);
  });
});

describe('error statuses', () => {
  it('parses the error array of a 404', async () => {
    const server = await serve((_req, res) =>
      json(res, 404, [{ code: 'not_found', detail: 'Not found.', attr: null }]),
    );
    const outcome = expectKind(await client(server).getInterview(APP_ID), 'not_found');
    expect(outcome).toMatchObject({
      status: 404,
      errors: [{ code: 'not_found', detail: 'Not found.', attr: null }],
      rawBody: null,
    });
  });

  it.each([
    [401, 'authentication_failed'],
    [403, 'permission_denied'],
  ] as const)('classifies %i as unauthorized', async (status, code) => {
    const server = await serve((_req, res) => json(res, status, [{ code, detail: 'No.', attr: null }]));
    const outcome = expectKind(await client(server).getInterview(APP_ID), 'unauthorized');
    expect(outcome.status).toBe(status);
    expect(outcome.errors).toEqual([{ code, detail: 'No.', attr: null }]);
  });

  it('reads Retry-After in seconds on a 429', async () => {
    const server = await serve((_req, res) => json(res, 429, [], { 'retry-after': '7' }));
    const outcome = expectKind(await client(server).getInterview(APP_ID), 'rate_limited');
    expect(outcome).toMatchObject({ status: 429, retryAfterMs: 7000, errors: [] });
  });

  it('reads Retry-After as an HTTP-date on a 429, against the injected clock', async () => {
    const now = Date.UTC(2030, 0, 2, 3, 4, 5);
    const server = await serve((_req, res) =>
      json(res, 429, [], { 'retry-after': new Date(now + 90_000).toUTCString() }),
    );
    const outcome = expectKind(await client(server, { now: () => now }).getInterview(APP_ID), 'rate_limited');
    expect(outcome.retryAfterMs).toBe(90_000);
  });

  it('gives retryAfterMs null on a 429 without a usable Retry-After', async () => {
    const server = await serve((_req, res) => json(res, 429, [], { 'retry-after': 'soon' }));
    expect(expectKind(await client(server).getInterview(APP_ID), 'rate_limited').retryAfterMs).toBeNull();
  });

  it.each([500, 503])('classifies %i as server_error', async (status) => {
    const server = await serve((_req, res) =>
      json(res, status, [{ code: 'error', detail: 'Boom.', attr: null }], status === 503 ? { 'retry-after': '120' } : {}),
    );
    const outcome = expectKind(await client(server).getInterview(APP_ID), 'server_error');
    expect(outcome).toMatchObject({
      status,
      retryAfterMs: status === 503 ? 120_000 : null,
      errors: [{ code: 'error', detail: 'Boom.', attr: null }],
    });
  });

  it('classifies another 4xx as client_error with the field error', async () => {
    const server = await serve((_req, res) =>
      json(res, 400, [{ code: 'invalid_input', detail: 'Bad id.', attr: 'application_id' }]),
    );
    const outcome = expectKind(await client(server).getInterview(APP_ID), 'client_error');
    expect(outcome).toMatchObject({ status: 400, errors: [{ attr: 'application_id', code: 'invalid_input' }] });
  });

  it('keeps a non-JSON error body as raw text truncated to 500 characters', async () => {
    const html = `<html>${'x'.repeat(2000)}</html>`;
    const server = await serve((_req, res) => {
      res.writeHead(502, { 'content-type': 'text/html' });
      res.end(html);
    });
    const outcome = expectKind(await client(server).getInterview(APP_ID), 'server_error');
    expect(outcome.errors).toEqual([]);
    expect(outcome.rawBody).toBe(html.slice(0, 500));
  });

  it('still classifies by status when the error body is over the cap', async () => {
    const server = await serve((_req, res) => {
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end(JSON.stringify([{ code: 'error', detail: 'y'.repeat(5000), attr: null }]));
    });
    const outcome = expectKind(await client(server, { maxBodyBytes: 1024 }).getInterview(APP_ID), 'server_error');
    expect(outcome).toMatchObject({ status: 500, errors: [], rawBody: null });
  });
});

describe('redirects', () => {
  it.each([301, 302, 303, 307, 308])('does not follow a %i, so the other host receives nothing', async (status) => {
    const elsewhere = await serve((_req, res) => json(res, 200, { status: 'completed' }));
    const location = `${elsewhere.url}/api/v2/applications/${APP_ID}/interview`;
    const server = await serve((_req, res) => {
      res.writeHead(status, { location });
      res.end('moved');
    });
    const outcome = expectKind(await client(server).getInterview(APP_ID), 'redirect');
    expect(outcome).toMatchObject({ status, location });
    expect(server.requests).toHaveLength(1);
    expect(elsewhere.requests).toHaveLength(0);
  });

  it('resolves a relative Location against the request URL (it names the same host)', async () => {
    const server = await serve((_req, res) => {
      res.writeHead(308, { location: '../v3/interview?token=x' });
      res.end();
    });
    const outcome = expectKind(await client(server).getInterview(APP_ID), 'redirect');
    expect(outcome.location).toBe(`${server.url}/api/v2/applications/v3/interview?token=x`);
  });
});

describe('network and timeouts', () => {
  it('times out against a server that never answers', async () => {
    const server = await serve(() => undefined);
    const outcome = expectKind(await client(server, { timeoutMs: 200 }).getInterview(APP_ID), 'network');
    expect(outcome.timeout).toBe(true);
    expect(outcome.elapsedMs).toBeGreaterThanOrEqual(150);
    expect(outcome.elapsedMs).toBeLessThan(3000);
    expect(server.requests).toHaveLength(1);
  });

  it('without a timeoutMs, a read the service never answers ends at 10 s (README: a read times out at 10 s), not later', async () => {
    const server = await serve(() => undefined);
    // Only the timers are faked (the sockets stay real): the 10 s pass without being waited for.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      let outcome: HiringOutcome | undefined;
      void client(server).getInterview(APP_ID).then((o) => (outcome = o));
      // Bounded waits on real events (setImmediate is not faked).
      const until = async (done: () => boolean) => {
        const deadline = Date.now() + 5_000;
        while (!done() && Date.now() < deadline) await new Promise((r) => setImmediate(r));
      };
      await until(() => server.requests.length > 0);
      expect(server.requests).toHaveLength(1);
      await vi.advanceTimersByTimeAsync(9_999);
      expect(outcome).toBeUndefined();
      await vi.advanceTimersByTimeAsync(1);
      await until(() => outcome !== undefined);
      expect(outcome, 'the read did not end 10 s after it was sent').toBeDefined();
      expect(expectKind(outcome!, 'network')).toMatchObject({ timeout: true, message: 'no complete response within 10000 ms' });
    } finally {
      vi.useRealTimers();
    }
  });

  it('times out when the body stalls after the headers', async () => {
    const server = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"status": "comp');
    });
    const outcome = expectKind(await client(server, { timeoutMs: 200 }).getInterview(APP_ID), 'network');
    expect(outcome.timeout).toBe(true);
  });

  it('reports a refused connection', async () => {
    const port = await closedPort();
    const outcome = expectKind(await client(`http://127.0.0.1:${port}`).getInterview(APP_ID), 'network');
    expect(outcome).toMatchObject({ timeout: false, code: 'ECONNREFUSED' });
    expect(outcome.message).toContain('ECONNREFUSED');
  });

  it('ends as a network outcome when the caller aborts', async () => {
    const server = await serve(() => undefined);
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 50);
    const outcome = expectKind(
      await client(server, { timeoutMs: 5000 }).getInterview(APP_ID, { signal: controller.signal }),
      'network',
    );
    expect(outcome).toMatchObject({ timeout: false, message: 'aborted by caller' });
    expect(outcome.elapsedMs).toBeLessThan(2000);
  });
});

describe('invalid responses', () => {
  it('stops reading an endless body past maxBodyBytes and drops the connection', async () => {
    let connectionClosed!: () => void;
    const closed = new Promise<void>((resolve) => (connectionClosed = resolve));
    const server = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"pad":"');
      const chunk = 'x'.repeat(1024);
      const timer = setInterval(() => res.write(chunk), 1);
      res.on('close', () => {
        clearInterval(timer);
        connectionClosed();
      });
    });
    const outcome = expectKind(
      await client(server, { maxBodyBytes: 4096, timeoutMs: 5000 }).getInterview(APP_ID),
      'invalid_response',
    );
    expect(outcome).toMatchObject({ status: 200, problem: 'too_large' });
    expect(outcome.elapsedMs).toBeLessThan(4000);
    await closed;
  });

  it('refuses a declared Content-Length over the cap without waiting for the body', async () => {
    const server = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100000' });
      res.write('{"pad":"'); // then stalls: only the header can tell
    });
    const outcome = expectKind(
      await client(server, { maxBodyBytes: 1000, timeoutMs: 3000 }).getInterview(APP_ID),
      'invalid_response',
    );
    expect(outcome.problem).toBe('too_large');
    expect(outcome.elapsedMs).toBeLessThan(2000);
  });

  it('accepts a body exactly at the cap', async () => {
    const body = JSON.stringify({ pad: 'a'.repeat(100) });
    const server = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(body);
    });
    const outcome = await client(server, { maxBodyBytes: Buffer.byteLength(body) }).getInterview(APP_ID);
    expectKind(outcome, 'ready');
  });

  it('classifies a non-JSON 200', async () => {
    const server = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<html>maintenance</html>');
    });
    const outcome = expectKind(await client(server).getInterview(APP_ID), 'invalid_response');
    expect(outcome).toMatchObject({ status: 200, problem: 'not_json' });
  });

  it.each([
    ['an array', '[1,2]'],
    ['null', 'null'],
    ['a string', '"ok"'],
  ])('classifies a 200 whose JSON is %s', async (_label, text) => {
    const server = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(text);
    });
    expect(expectKind(await client(server).getInterview(APP_ID), 'invalid_response').problem).toBe('not_object');
  });

  it('classifies an empty 200', async () => {
    const server = await serve((_req, res) => {
      res.writeHead(200);
      res.end();
    });
    expect(expectKind(await client(server).getInterview(APP_ID), 'invalid_response').problem).toBe('not_json');
  });
});

describe('the key stays secret', () => {
  it('redacts the key when a server echoes the request headers into an error body', async () => {
    const server = await serve((req, res) => {
      res.writeHead(400, { 'content-type': 'text/plain' });
      res.end(`you sent: ${req.headers.authorization ?? ''}`);
    });
    const outcome = expectKind(await client(server).getInterview(APP_ID), 'client_error');
    expect(outcome.rawBody).toBe('you sent: Bearer [redacted]');
  });

  it("a long error detail of many `sk-` words is redacted in one pass, not in time that grows with its square", async () => {
    // Each `sk-` began a match attempt that ran to the end of the word looking for the dot:
    // 300 KB of them took 30 s of the event loop (1 MB, the body limit allows 5, some 6 minutes).
    const detail = 'sk-'.repeat(100_000);
    const server = await serve((_req, res) => json(res, 400, [{ code: 'invalid_input', detail, attr: null }]));
    const c = client(server);
    const started = performance.now();
    const outcome = expectKind(await c.getInterview(APP_ID), 'client_error');
    expect(performance.now() - started).toBeLessThan(3000);
    expect(outcome.errors[0]?.detail).toBe(detail);
  }, 60_000);

  it('text that only looks like a key keeps its words: a locale, a version, a URL; another key is still redacted', async () => {
    const kept = ['unsupported locale sk-SK.UTF-8', 'runs on sk-1.2', 'see https://docs.example/keys/sk-format.html', 'moved to https://sk-eu.hiring.example/v2', 'task-3.1 and desk-2.0'];
    const server = await serve((_req, res) =>
      json(res, 400, [...kept.map((detail) => ({ code: 'invalid_input', detail, attr: null })), { code: 'invalid_input', detail: "key 'sk-other01.AnotherSecretValue99' was revoked", attr: null }]),
    );
    const outcome = expectKind(await client(server).getInterview(APP_ID), 'client_error');
    expect(outcome.errors.map((e) => e.detail)).toEqual([...kept, "key '[redacted]' was revoked"]);
  });

  it('a key the kept 500 characters of a body would cut is redacted whole first, not left with its name and a few secret characters', async () => {
    // The body is cut to RAW_BODY_LIMIT (and an unknown readiness reason to 300) before the
    // outcome was redacted: a key cut with fewer than 8 characters after its dot no longer looked
    // like one, and `sk-test1234abcd.SECRETs` went to the log and last_error.
    const echo = `api_key=${API_KEY} (echoed by the proxy)`;
    const html = `${'x'.repeat(500 - 'api_key=sk-test1234abcd.SECRETs'.length)}${echo}`;
    const said = 'readiness status "queued", not one the spec lists (reason: ';
    const envelope = JSON.stringify({ status: 'queued', reason: `${'y'.repeat(300 - said.length - 'key sk-test1234abcd.SECRETs'.length)}key ${API_KEY}`, result: null });
    const server = await serve((req, res) => {
      if (req.url?.includes('interview')) {
        res.writeHead(502, { 'content-type': 'text/html' });
        res.end(html);
      } else json(res, 200, JSON.parse(envelope));
    });
    const c = client(server);
    const failed = expectKind(await c.getInterview(APP_ID), 'server_error');
    const unknown = expectKind(await c.getInsights(APP_ID), 'processing');
    for (const text of [failed.rawBody, unknown.reason]) {
      expect(text).not.toContain('sk-test1234abcd');
      expect(text).not.toContain('SECRET');
      expect(text).toContain('[redacted]');
    }
  });

  it("a redirect to a host whose name begins with sk- says that host, not [redacted]", async () => {
    const location = 'https://sk-eu.hiring.example/api/v2/applications/x/interview';
    const server = await serve((_req, res) => {
      res.writeHead(308, { location });
      res.end();
    });
    expect(expectKind(await client(server).getInterview(APP_ID), 'redirect').location).toBe(location);
  });

  it('never shows the key when the client is printed or serialized', () => {
    const c = client('https://hiring.example/');
    expect(String(c)).toBe('HiringClient(https://hiring.example)');
    expect(JSON.stringify(c)).not.toContain(API_KEY);
    expect(inspect(c, { showHidden: true, depth: 5 })).not.toContain(API_KEY);
    expect(c.baseUrl).toBe('https://hiring.example');
  });

  it('rejects a key that is not a valid header value without quoting it', () => {
    const bad = 'sk-abc.def\nX-Injected: 1';
    expect(() => createHiringClient({ baseUrl: 'https://h.example', apiKey: bad })).toThrow(TypeError);
    try {
      createHiringClient({ baseUrl: 'https://h.example', apiKey: bad });
    } catch (error) {
      expect(String(error)).not.toContain('sk-abc');
    }
  });

  it('validates its options', () => {
    const ok = { baseUrl: 'https://h.example', apiKey: API_KEY };
    expect(() => createHiringClient({ ...ok, baseUrl: 'ftp://h.example' })).toThrow(/http/);
    expect(() => createHiringClient({ ...ok, baseUrl: 'not a url' })).toThrow(TypeError);
    expect(() => createHiringClient({ ...ok, baseUrl: 'https://u:p@h.example' })).toThrow(/credentials/);
    expect(() => createHiringClient({ ...ok, timeoutMs: 0 })).toThrow(RangeError);
    expect(() => createHiringClient({ ...ok, maxBodyBytes: Number.NaN })).toThrow(RangeError);
  });
});
