import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import { Webhook } from 'standardwebhooks';

/**
 * Pre-signed benchmark deliveries: 2 KB JSON envelopes (spec 6.1) with unique
 * event ids, signed per Standard Webhooks (spec 6.2) with node:crypto's HMAC.
 * The first one is cross-checked against the standardwebhooks package's sign().
 *
 * A body is a template split around two markers (event id, application id) so
 * the wrk Lua script can rebuild it from a short line per delivery instead of
 * holding hundreds of MB of bodies.
 */

export const BODY_BYTES = 2048;
const EVT = '@@EVT@@';
const APP = '@@APP@@';
/** `evt_` + UUID and a UUID: fixed lengths, so every body is exactly BODY_BYTES. */
const EVT_LEN = 4 + 36;
const APP_LEN = 36;

/** Mostly ingest-only events, some that make the worker GET a result from the stub. */
export const EVENT_MIX = [
  'application.created',
  'application.status_changed',
  'application.status_changed',
  'interview.completed',
  'application.created',
  'cv_evaluation.completed',
] as const;

export interface Template {
  eventType: string;
  /** body = parts[0] + eventId + parts[1] + applicationId + parts[2] */
  parts: [string, string, string];
}

function envelopeFor(eventType: string, createdAt: string, notes: string): Record<string, unknown> {
  const payload: Record<string, unknown> = {
    application: { id: APP, external_id: 'ext-bench-0001', status: 'interviewing', created_at: createdAt },
    candidate: { first_name: 'Ada', last_name: 'Lovelace', email: 'ada@example.com', phone: '+44 20 7946 0000' },
    job: { id: '8b7f5d1e-5c43-4a4e-9a0e-0d6f3c1b2a90', title: 'Senior Platform Engineer', department: 'Platform', location: 'Remote (EU)' },
  };
  if (eventType === 'application.status_changed') payload.previous_status = 'applied';
  payload.notes = notes;
  return { id: EVT, created_at: createdAt, webhook_id: 'wh_bench', event_type: eventType, payload };
}

export function makeTemplates(createdAt = new Date().toISOString()): Template[] {
  const unique = [...new Set<string>(EVENT_MIX)];
  const byType = new Map<string, Template>();
  for (const eventType of unique) {
    const bare = JSON.stringify(envelopeFor(eventType, createdAt, ''));
    const len = Buffer.byteLength(bare) - EVT.length - APP.length + EVT_LEN + APP_LEN;
    const notes = 'Lorem ipsum dolor sit amet, consectetur adipiscing elit. '.repeat(40).slice(0, BODY_BYTES - len);
    const text = JSON.stringify(envelopeFor(eventType, createdAt, notes));
    const [a, rest] = text.split(EVT) as [string, string];
    const [b, c] = rest.split(APP) as [string, string];
    byType.set(eventType, { eventType, parts: [a, b, c] });
  }
  return EVENT_MIX.map((t) => byType.get(t)!);
}

export interface SigningSecret {
  secret: string;
  key: Buffer;
}

export function newSigningSecret(): SigningSecret {
  const key = randomBytes(24);
  return { secret: `whsec_${key.toString('base64')}`, key };
}

export interface Delivery {
  msgId: string;
  timestamp: string;
  /** base64 of the v1 HMAC, without the `v1,` prefix */
  signature: string;
  eventId: string;
  applicationId: string;
  /** index into the templates array */
  type: number;
}

export function bodyOf(templates: Template[], d: Delivery): string {
  const p = templates[d.type]!.parts;
  return p[0] + d.eventId + p[1] + d.applicationId + p[2];
}

/**
 * Signs `count` fresh deliveries now (the receiver accepts timestamps within 5 minutes). Each names
 * a new random application, or `applicationIds[i]` when given (applications the sandbox holds:
 * UUIDs, the same length as the template expects).
 */
export function signDeliveries(secret: SigningSecret, templates: Template[], count: number, applicationIds?: readonly string[]): Delivery[] {
  if (applicationIds && applicationIds.length < count) throw new Error(`signDeliveries: ${count} application ids needed, got ${applicationIds.length}`);
  const odd = applicationIds?.slice(0, count).find((id) => id.length !== APP_LEN);
  if (odd !== undefined) throw new Error(`signDeliveries: application ids must be ${APP_LEN} characters (a UUID), got ${JSON.stringify(odd)}`);
  const ts = String(Math.floor(Date.now() / 1000));
  const out: Delivery[] = new Array(count);
  for (let i = 0; i < count; i++) {
    const d: Delivery = {
      msgId: `msg_${randomUUID()}`,
      timestamp: ts,
      signature: '',
      eventId: `evt_${randomUUID()}`,
      applicationId: applicationIds ? applicationIds[i]! : randomUUID(),
      type: i % templates.length,
    };
    d.signature = createHmac('sha256', secret.key).update(`${d.msgId}.${ts}.`).update(bodyOf(templates, d)).digest('base64');
    out[i] = d;
  }
  if (count > 0) {
    const d = out[0]!;
    const reference = new Webhook(secret.secret).sign(d.msgId, new Date(Number(ts) * 1000), bodyOf(templates, d));
    if (reference !== `v1,${d.signature}`) throw new Error('bench signing disagrees with the standardwebhooks package');
    if (Buffer.byteLength(bodyOf(templates, d)) !== BODY_BYTES) throw new Error('bench body is not BODY_BYTES long');
  }
  return out;
}

/** One delivery as a tab-separated line (no newline), as wrk/deliveries.lua and opengen/opengen.c read it. */
export function deliveryLine(d: Delivery): string {
  return `${d.msgId}\t${d.timestamp}\t${d.signature}\t${d.eventId}\t${d.applicationId}\t${d.type + 1}`;
}

export function headersOf(d: Delivery): Record<string, string> {
  return {
    'content-type': 'application/json',
    'webhook-id': d.msgId,
    'webhook-timestamp': d.timestamp,
    'webhook-signature': `v1,${d.signature}`,
  };
}
