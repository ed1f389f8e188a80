import { randomUUID } from 'node:crypto';
import { Agent, request } from 'node:http';
import { signDelivery } from '../../helpers/signing.js';

export type EventKind = 'application.created' | 'application.status_changed' | 'interview.completed';

/**
 * An envelope like the service sends (spec 6.4). The candidate's email
 * (`@example.org`) and phone (`+44 7700 9xxxxx`) are what the log-hygiene
 * test looks for: personal data must never show up in a log. The application id is random
 * unless given (one the sandbox knows, for a test that reads its results).
 */
export function makeEvent(kind: EventKind, n: number, tag: string, applicationId: string = randomUUID()): Record<string, unknown> {
  const now = new Date().toISOString();
  const candidate = {
    id: randomUUID(),
    first_name: 'Grace',
    last_name: `Hopper${n}`,
    email: `cand-${tag}-${n}@example.org`,
    phone_number: `+44 7700 9${String(n % 100000).padStart(5, '0')}`,
  };
  const application = { id: applicationId, external_id: `ext-${tag}-${n}`, status: kind === 'interview.completed' ? 'interviewed' : 'applied', created_at: now };
  const payload: Record<string, unknown> = { application, candidate, job: { id: randomUUID(), title: 'Warehouse associate' } };
  if (kind === 'application.status_changed') {
    application.status = 'screened';
    payload.previous_status = 'applied';
  }
  if (kind === 'interview.completed') {
    payload.interview = { id: randomUUID(), completed_at: now, result: { overall_score: 3.67, is_eligible: true, summary: 's', strengths: [], weaknesses: [], red_flags: [] } };
  }
  return { id: `evt_${randomUUID()}`, created_at: now, webhook_id: 'wh_reliability', event_type: kind, payload };
}

/** A keep-alive HTTP client for the senders (node:http; undici is not a dependency of ours). */
export function makeClient(maxSockets = 64): Agent {
  return new Agent({ keepAlive: true, maxSockets });
}

export interface Answer {
  status: number;
  body: string;
  ms: number;
}

/** POST over node:http; network errors and the timeout reject. */
export function post(agent: Agent, url: string, path: string, headers: Record<string, string>, body: string | Buffer, timeoutMs = 15_000): Promise<Answer> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = request(`${url}${path}`, { method: 'POST', agent, headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) } }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (c: Buffer) => parts.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts).toString('utf8'), ms: performance.now() - started }));
      res.on('error', reject);
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end(body);
  });
}

/**
 * One signed delivery, as the service sends it: a fresh webhook-id every time
 * (retries of the same event included). Network errors throw.
 */
export async function deliver(agent: Agent, url: string, secret: string, env: Record<string, unknown>, timeoutMs = 15_000): Promise<Answer> {
  const body = JSON.stringify(env);
  const d = signDelivery(secret, body);
  return post(agent, url, '/webhooks', d.headers, body, timeoutMs);
}
