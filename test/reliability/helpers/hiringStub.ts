import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A stand-in of the hiring service's scoring GETs on 127.0.0.1: every known
 * path answers a complete result at once for any application id, so the
 * tests that send thousands of random events need no set-up upstream; `extra`
 * adds fields to every result. Counts requests. (The slow-upstream test uses
 * the project's sandbox, with its read delay.)
 */
export async function startHiringStub(opts: { extra?: Record<string, unknown> } = {}) {
  const calls: { path: string; at: number }[] = [];
  const server = createServer((req, res) => {
    const path = req.url ?? '';
    calls.push({ path, at: Date.now() });
    const m = /^\/api\/v[12]\/applications\/([^/]+)\/(interview|cv-evaluation|insights)$/.exec(path);
    if (!m) {
      res.writeHead(404, { 'content-type': 'application/json' }).end('[{"code":"not_found","detail":"Not found.","attr":null}]');
      return;
    }
    const [, applicationId, resource] = m;
    const body = {
      id: `res-${applicationId}`,
      application_id: applicationId,
      status: 'completed',
      overall_score: resource === 'insights' ? 4 : 3.67,
      is_eligible: true,
      ineligibility_reasons: [],
      summary: 'stub result',
      ...(resource === 'insights' ? { hiring_recommendation: 'yes' } : {}),
      ...opts.extra,
    };
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    calls,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
export type HiringStub = Awaited<ReturnType<typeof startHiringStub>>;
