/**
 * The project's sandbox of the hiring service (`dist/sandbox/main.js`) as the fan-out row's
 * upstream: its own process on 127.0.0.1, with applications whose interview and CV evaluation are
 * complete before the load starts, so every scoring read is answered at once with the sandbox's
 * own result (result delay 0, its default), under its own API key.
 */
import { freePort, startServer, type Server } from './processes.js';

export interface BenchSandbox {
  server: Server;
  url: string;
  apiKey: string;
  /** `n` applications of one job, each with a completed interview and CV evaluation; ids in creation order. */
  readyApplications(n: number): Promise<string[]>;
  stop(): Promise<void>;
}

async function post<T>(url: string, body: unknown): Promise<T> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const text = await res.text();
  if (!res.ok) throw new Error(`sandbox: POST ${new URL(url).pathname} answered ${res.status}: ${text.slice(0, 300)}`);
  return JSON.parse(text) as T;
}

export async function startBenchSandbox(root: string): Promise<BenchSandbox> {
  const port = await freePort();
  const server = await startServer({
    name: 'sandbox',
    args: ['dist/sandbox/main.js'],
    cwd: root,
    port,
    healthPath: '/_sandbox/organizations',
    stdout: 'ignore',
    env: { SANDBOX_HOST: '127.0.0.1', SANDBOX_PORT: String(port) },
  });
  const url = server.url;
  try {
    const orgs = (await (await fetch(`${url}/_sandbox/organizations`)).json()) as { id: string; api_keys: { key: string; revoked: boolean }[] }[];
    const org = orgs[0];
    const apiKey = org?.api_keys.find((k) => !k.revoked)?.key;
    if (!org || !apiKey) throw new Error('sandbox: no organization with an API key');
    return {
      server,
      url,
      apiKey,
      async readyApplications(n) {
        const job = await post<{ id: string }>(`${url}/_sandbox/jobs`, { organization_id: org.id });
        const ids: string[] = new Array(n);
        let next = 0;
        // A few requests at a time: the sandbox is one process, and this is set-up, not measured.
        const lane = async () => {
          for (let i = next++; i < n; i = next++) {
            const app = await post<{ id: string }>(`${url}/_sandbox/applications`, { job_id: job.id });
            await post(`${url}/_sandbox/applications/${app.id}/interview`, {});
            await post(`${url}/_sandbox/applications/${app.id}/cv-evaluation`, {});
            ids[i] = app.id;
          }
        };
        await Promise.all(Array.from({ length: 8 }, lane));
        return ids;
      },
      async stop() {
        await server.stop(5_000);
      },
    };
  } catch (err) {
    await server.stop(2_000).catch(() => undefined);
    throw err;
  }
}
