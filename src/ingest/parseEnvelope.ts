import { asObject as obj } from '../util/json.js';

/** The fields of the envelope (spec 6.1) we index; everything else stays in the stored text. */
export interface Envelope {
  id: string;
  eventType: string;
  webhookId: string | null;
  createdAt: string | null;
  applicationId: string | null;
}

export type EnvelopeParse = { ok: true; envelope: Envelope; text: string } | { ok: false; reason: string };

const MAX_ID_LENGTH = 255;
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** A non-empty string, or null: an empty id or type is as good as none. */
const str = (v: unknown): string | null => (typeof v === 'string' && v.length > 0 ? v : null);

/**
 * The application an event is about. Spec 6.4: most payloads carry an
 * `application` block; `job_application.deleted` is a snapshot whose own `id`
 * is the application's; `interview_v2.completed`'s body is not shown, so the
 * likely spellings are tried.
 */
export function applicationIdOf(eventType: string, payload: Record<string, unknown> | null): string | null {
  if (!payload) return null;
  const fromBlock = str(obj(payload.application)?.id);
  if (fromBlock) return fromBlock;
  if (eventType === 'job_application.deleted') return str(payload.id);
  return str(payload.application_id) ?? str(payload.job_application_id);
}

/**
 * Lenient parse: only `id` and `event_type` are required; unknown event types
 * and extra fields are fine. A failure reason is shown to the operator in the
 * quarantine table, so it names the problem.
 */
export function parseEnvelope(body: Buffer): EnvelopeParse {
  if (body.length === 0) return { ok: false, reason: 'body is empty' };
  // Kept in the text (ignoreBOM) so the stored body is the bytes as received, and named: JSON.parse
  // refuses it, and "not valid JSON" would send an operator looking for a syntax error.
  if (body.length >= 3 && body[0] === 0xef && body[1] === 0xbb && body[2] === 0xbf) {
    return { ok: false, reason: 'body starts with a UTF-8 byte order mark (U+FEFF), which JSON sent over a network must not have (RFC 8259, 8.1)' };
  }
  let text: string;
  try {
    text = utf8.decode(body);
  } catch {
    return { ok: false, reason: 'body is not valid UTF-8' };
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return { ok: false, reason: 'body is not valid JSON' };
  }
  const root = obj(json);
  if (!root) return { ok: false, reason: 'body is not a JSON object' };
  const id = str(root.id);
  if (!id) return { ok: false, reason: 'envelope has no "id" string' };
  if (id.length > MAX_ID_LENGTH) return { ok: false, reason: `envelope "id" is longer than ${MAX_ID_LENGTH} characters` };
  const eventType = str(root.event_type);
  if (!eventType) return { ok: false, reason: 'envelope has no "event_type" string' };
  return {
    ok: true,
    text,
    envelope: {
      id,
      eventType,
      webhookId: str(root.webhook_id),
      createdAt: str(root.created_at),
      applicationId: applicationIdOf(eventType, obj(root.payload)),
    },
  };
}
