import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ACME_KEY } from '../helpers/pair.js';
import { cli } from './helpers.js';

/**
 * Spec 4.5 and 2.11 show `GET /webhooks/{id}/deliveries` with no query parameter and a record of
 * "status and response code" only: `status=` and `event_id=` filters are the sandbox's own. A
 * service that ignores them (as an API ignores a query parameter it does not take) answers every
 * attempt, so `--status failed` and `--event` must select the attempts themselves.
 */
const RECORDS = [
  { id: 'd3', event_id: 'evt_2', event_type: 'application.status_changed', attempt: 1, status: 'succeeded', response_code: 200, attempted_at: '2026-01-01T00:03:00Z' },
  { id: 'd2', event_id: 'evt_1', event_type: 'application.created', attempt: 2, status: 'succeeded', response_code: 204, attempted_at: '2026-01-01T00:02:00Z' },
  { id: 'd1', event_id: 'evt_1', event_type: 'application.created', attempt: 1, status: 'failed', response_code: 401, attempted_at: '2026-01-01T00:00:00Z' },
  { id: 'd0', event_id: 'evt_0', event_type: 'application.created', attempt: 1, status: 'failed', response_code: null, attempted_at: '2025-12-31T23:59:00Z' },
];

let api: Server;
let env: Record<string, string>;
const queries: string[] = [];

beforeAll(async () => {
  api = createServer((req, res) => {
    req.resume();
    const url = new URL(req.url ?? '/', 'http://x');
    if (req.method === 'GET' && url.pathname === '/api/v2/webhooks/wh_1/deliveries') {
      queries.push(url.search);
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ count: RECORDS.length, next: null, previous: null, results: RECORDS }));
      return;
    }
    res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify([{ code: 'not_found', detail: 'Not found.', attr: null }]));
  });
  await new Promise<void>((resolve) => api.listen(0, '127.0.0.1', resolve));
  env = { HIRING_API_URL: `http://127.0.0.1:${(api.address() as AddressInfo).port}`, HIRING_API_KEY: ACME_KEY };
});
afterAll(() => new Promise<void>((resolve) => api.close(() => resolve())));

describe('webhooks deliveries against a service that takes no filter (spec 4.5)', () => {
  it('--status failed lists only attempts not acknowledged with a 2xx (spec 6.3), --status succeeded only those, --event one event\'s', async () => {
    const [failed, succeeded, event, both, all] = await Promise.all([
      cli(['webhooks', 'deliveries', 'wh_1', '--status', 'failed', '--json'], env),
      cli(['webhooks', 'deliveries', 'wh_1', '--status', 'succeeded', '--json'], env),
      cli(['webhooks', 'deliveries', 'wh_1', '--event', 'evt_1', '--json'], env),
      cli(['webhooks', 'deliveries', 'wh_1', '--event', 'evt_1', '--status', 'failed'], env),
      cli(['webhooks', 'deliveries', 'wh_1', '--json'], env),
    ]);
    for (const r of [failed, succeeded, event, both, all]) expect(r.code, r.stderr).toBe(0);
    const ids = (r: { stdout: string }) => (JSON.parse(r.stdout) as { id: string }[]).map((d) => d.id);
    expect(ids(failed)).toEqual(['d1', 'd0']);
    expect(ids(succeeded)).toEqual(['d3', 'd2']);
    expect(ids(event)).toEqual(['d2', 'd1']);
    expect(ids(all)).toEqual(['d3', 'd2', 'd1', 'd0']);
    // The table: the one failed attempt of evt_1, nothing else.
    expect(both.stdout).toContain('401');
    expect(both.stdout).not.toMatch(/evt_0|evt_2|204/);
    // The filters still go to the service (the sandbox applies them), so a service that takes them pages less.
    expect(queries).toContain('?limit=200&status=failed');
  });
});

/**
 * Spec 2.11 names no field of a delivery record beyond "status and response code": a service that
 * applies the filters itself may answer records without `event_id`, or without a `response_code`
 * field (another name, or none), while its `status` says what became of the attempt.
 */
describe('webhooks deliveries against a service that applies the filters, with records of other fields (spec 2.11)', () => {
  let honouring: Server;
  let honouringEnv: Record<string, string>;
  const OTHER = [
    { id: 'e2', status: 'succeeded', attempted_at: '2026-01-01T00:02:00Z' },
    { id: 'e1', status: 'failed', attempted_at: '2026-01-01T00:01:00Z' },
  ];
  beforeAll(async () => {
    honouring = createServer((req, res) => {
      req.resume();
      const url = new URL(req.url ?? '/', 'http://x');
      const status = url.searchParams.get('status');
      const results = OTHER.filter((r) => status === null || r.status === status);
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ count: results.length, next: null, previous: null, results }));
    });
    await new Promise<void>((resolve) => honouring.listen(0, '127.0.0.1', resolve));
    honouringEnv = { HIRING_API_URL: `http://127.0.0.1:${(honouring.address() as AddressInfo).port}`, HIRING_API_KEY: ACME_KEY };
  });
  afterAll(() => new Promise<void>((resolve) => honouring.close(() => resolve())));

  it("--status succeeded keeps what the service's status says succeeded, and --event keeps what the service chose", async () => {
    const [succeeded, failed, event] = await Promise.all([
      cli(['webhooks', 'deliveries', 'wh_1', '--status', 'succeeded', '--json'], honouringEnv),
      cli(['webhooks', 'deliveries', 'wh_1', '--status', 'failed', '--json'], honouringEnv),
      cli(['webhooks', 'deliveries', 'wh_1', '--event', 'evt_1', '--json'], honouringEnv),
    ]);
    for (const r of [succeeded, failed, event]) expect(r.code, r.stderr).toBe(0);
    const ids = (r: { stdout: string }) => (JSON.parse(r.stdout) as { id: string }[]).map((d) => d.id);
    // Judged by a response_code it does not have: every success read as failed, so none listed.
    expect(ids(succeeded)).toEqual(['e2']);
    expect(ids(failed)).toEqual(['e1']);
    // Judged by an event_id it does not have: every attempt thrown away ("no delivery attempts").
    expect(ids(event)).toEqual(['e2', 'e1']);
  });
});
