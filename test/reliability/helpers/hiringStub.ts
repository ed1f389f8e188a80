import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A stand-in of the hiring service's scoring GETs on 127.0.0.1: every known
 * path answers a complete result for any application id, after `delayMs`
 * (the slow-upstream test sets 8 s). Counts requests and how many are open.
 */
export async function startHiringStub(opts: { delayMs?: number; extra?: Record<string, unknown> } = {}) {
  let delayMs = opts.delayMs ?? 0;
  const calls: { path: string; at: number }[] = [];
  let open = 0;
  let firstAnsweredAt: number | null = null;
  const pending = new Set<ServerResponse>();
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
    open++;
    pending.add(res);
    setTimeout(() => {
      open--;
      pending.delete(res);
      firstAnsweredAt ??= Date.now();
      if (!res.destroyed) res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    }, delayMs);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    calls,
    get open() {
      return open;
    },
    get firstAnsweredAt() {
      return firstAnsweredAt;
    },
    setDelay(ms: number) {
      delayMs = ms;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const res of pending) res.destroy();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
export type HiringStub = Awaited<ReturnType<typeof startHiringStub>>;
