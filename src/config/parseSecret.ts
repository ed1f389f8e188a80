/**
 * A Standard Webhooks signing secret is `whsec_` followed by base64 of the key.
 * Keys shorter than 24 bytes are refused: the service issues 24-byte or longer
 * keys, and a shorter value is almost always a truncated copy-paste. The
 * Standard Webhooks spec recommends 24 to 64 bytes; longer keys are accepted.
 */
export const MIN_SECRET_BYTES = 24;
const PREFIX = 'whsec_';
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

export type SecretParse = { ok: true; key: Buffer } | { ok: false; problem: string };

/** docker --env-file and `fly secrets set` take a value as written, quotes included: said as such. */
export function quotedProblem(value: string): string | null {
  return /^["']/.test(value) || /["']$/.test(value) ? 'is wrapped in quote characters: set the value without them' : null;
}

const tooShort = (bytes: number) => `decodes to ${bytes} bytes; at least ${MIN_SECRET_BYTES} are required`;

export function parseSecret(value: string): SecretParse {
  if (value.length === 0) return { ok: false, problem: 'is empty' };
  const quoted = quotedProblem(value);
  if (quoted) return { ok: false, problem: quoted };
  if (!value.startsWith(PREFIX)) return { ok: false, problem: 'must start with "whsec_"' };
  const encoded = value.slice(PREFIX.length);
  if (encoded.length === 0 || !BASE64.test(encoded)) {
    // A double-click selects a secret without its trailing "=": said as such, since the value
    // then looks like the base64 it is meant to be.
    const padding = '='.repeat((4 - (encoded.length % 4)) % 4);
    if (padding.length > 0 && padding.length < 3 && BASE64.test(encoded + padding)) {
      const bytes = Buffer.from(encoded, 'base64').length;
      if (bytes < MIN_SECRET_BYTES) return { ok: false, problem: tooShort(bytes) };
      return { ok: false, problem: `is missing the "${padding}" at its end (copied without it?): copy the whole secret` };
    }
    return { ok: false, problem: 'is not "whsec_" followed by valid base64' };
  }
  const key = Buffer.from(encoded, 'base64');
  if (key.length < MIN_SECRET_BYTES) return { ok: false, problem: tooShort(key.length) };
  return { ok: true, key };
}

/** Several secrets at once during a rotation: separated by commas and/or whitespace. */
export function splitSecrets(value: string): string[] {
  return value.split(/[\s,]+/).filter((s) => s.length > 0);
}
