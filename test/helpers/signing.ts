import { randomBytes, randomUUID } from 'node:crypto';
import { Webhook } from 'standardwebhooks';

/** A fresh whsec_ secret like the service issues (24 random bytes). */
export const newSecret = (): string => `whsec_${randomBytes(24).toString('base64')}`;

export interface SignedDelivery {
  body: string;
  headers: Record<string, string>;
}

/** Signs as the sender does, with the standardwebhooks package (the reference, not our code). */
export function signDelivery(secret: string, body: string, opts: { msgId?: string; timestampSeconds?: number } = {}): SignedDelivery {
  const msgId = opts.msgId ?? `msg_${randomUUID()}`;
  const ts = opts.timestampSeconds ?? Math.floor(Date.now() / 1000);
  const signature = new Webhook(secret).sign(msgId, new Date(ts * 1000), body);
  return {
    body,
    headers: {
      'content-type': 'application/json',
      'webhook-id': msgId,
      'webhook-timestamp': String(ts),
      'webhook-signature': signature,
    },
  };
}

export function envelope(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  const appId = randomUUID();
  return {
    id: `evt_${randomUUID()}`,
    created_at: new Date().toISOString(),
    webhook_id: 'wh_test',
    event_type: 'application.created',
    payload: {
      application: { id: appId, external_id: 'ext-1', status: 'applied', created_at: new Date().toISOString() },
      candidate: { first_name: 'Ada', last_name: 'Lovelace', email: 'ada@example.com' },
      job: { id: randomUUID(), title: 'Engineer' },
    },
    ...overrides,
  };
}

/** POSTs `body` to the receiver at `url` (its `/webhooks`), signed with `secret` as the sender does. */
export function postSigned(url: string, secret: string, body: string, opts: { msgId?: string; timestampSeconds?: number } = {}): Promise<Response> {
  return fetch(`${url}/webhooks`, { method: 'POST', ...signDelivery(secret, body, opts) });
}
