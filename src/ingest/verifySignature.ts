import { createHmac, createSecretKey, timingSafeEqual, type KeyObject } from 'node:crypto';
import type { Clock } from '../util/clock.js';

/** Spec 6.2 / 8: receivers reject timestamps more than 5 minutes away, in either direction. */
export const TOLERANCE_SECONDS = 5 * 60;

export interface SigningSource {
  readonly name: string;
  readonly signingKeys: readonly Buffer[];
}

export interface SignatureHeaders {
  id: string | undefined;
  timestamp: string | undefined;
  signature: string | undefined;
}

export type VerifyFailure = {
  ok: false;
  status: 400 | 401;
  reason: 'missing_header' | 'malformed_header' | 'timestamp_out_of_tolerance' | 'no_valid_signature';
  message: string;
  /** For the delivery's log line: what an operator needs to tell the cause (a clock off by how much). */
  fields?: Record<string, number>;
};
export type VerifyResult = { ok: true; source: string; timestamp: number } | VerifyFailure;

const TIMESTAMP = /^\d{1,15}$/;
// 32 bytes of HMAC-SHA256 in padded base64 are exactly 44 characters.
const V1_SIGNATURE = /^[A-Za-z0-9+/]{43}=$/;
const MAX_ID_LENGTH = 256;

const fail = (status: 400 | 401, reason: VerifyFailure['reason'], message: string): VerifyFailure => ({
  ok: false,
  status,
  reason,
  message,
});

/**
 * Standard Webhooks verification over the raw body bytes, against every secret
 * of every source; the first source whose key matches owns the delivery.
 *
 * We compute the HMAC with node:crypto rather than calling the standardwebhooks
 * package's verify(), which the tests keep as the reference implementation:
 * - it decodes a Buffer body as UTF-8 before signing, so bytes that are not
 *   valid UTF-8 are replaced and the HMAC is no longer over the raw bytes;
 * - it reads Date.now() itself, so the clock cannot be injected;
 * - it parses the timestamp with parseInt, accepting "1614265330abc".
 * node:crypto's HMAC is also native rather than pure JavaScript.
 */
/** Headers that passed the structural and clock checks; the HMAC still has to match. */
export interface CheckedHeaders {
  ok: true;
  prefix: string;
  timestamp: number;
  candidates: Buffer[];
}

export function createVerifier(sources: readonly SigningSource[], clock: Clock, toleranceSeconds = TOLERANCE_SECONDS) {
  // Each secret as a KeyObject, made once. Given a Buffer, Node.js 24's createHmac makes a
  // KeyObject of it for every call: 12-14 µs per HMAC of a 2 KB delivery against 3.5 µs with a
  // KeyObject (scratch script, 100,000 HMACs; Node.js 20 takes 3.5 µs either way). In the ingest
  // profile under wrk on Node.js 24 that was 8.8% of the samples, the largest part of a delivery
  // costing 134 µs instead of 99 µs (bench/README.md, twenty-fifth round).
  const keyed = sources.map((s) => ({ name: s.name, keys: s.signingKeys.map((k): KeyObject => createSecretKey(k)) }));

  /** Everything that can be decided before reading the body. */
  function check(headers: SignatureHeaders): CheckedHeaders | VerifyFailure {
    const { id, timestamp, signature } = headers;
    for (const [name, value] of [
      ['webhook-id', id],
      ['webhook-timestamp', timestamp],
      ['webhook-signature', signature],
    ] as const) {
      if (value === undefined || value.trim() === '') return fail(400, 'missing_header', `${name} header is missing`);
    }
    if (id!.length > MAX_ID_LENGTH) {
      return fail(400, 'malformed_header', `webhook-id header is longer than ${MAX_ID_LENGTH} characters`);
    }
    if (!TIMESTAMP.test(timestamp!)) {
      return fail(400, 'malformed_header', 'webhook-timestamp header must be a non-negative integer number of Unix seconds');
    }
    // Space-separated; a header sent on several lines reaches us joined with ", " (node:http and
    // the Fetch API alike), which leaves a comma at the end of each line's last entry.
    const entries = signature!
      .split(' ')
      .filter((e) => e.length > 0)
      .map((e) => (/^v[0-9a-z]+,.+,$/.test(e) ? e.slice(0, -1) : e));
    if (!entries.some((e) => /^v[0-9a-z]+,/.test(e))) {
      return fail(400, 'malformed_header', 'webhook-signature header must be a space-separated list of "<version>,<signature>"');
    }
    const ts = Number(timestamp);
    // In milliseconds: with the clock cut to whole seconds first (as the standardwebhooks package
    // does), a timestamp up to 300.999 s in the past passed, although it is more than 5 minutes away.
    const aheadMs = clock.now() - ts * 1000;
    if (Math.abs(aheadMs) > toleranceSeconds * 1000) {
      // How far off, in the log: every delivery off by about the same (a clock more than 5 minutes
      // wrong, here or at the service) reads apart from scattered ones (old deliveries replayed).
      // To the millisecond: cut to whole seconds, one refused 300.5 s ahead read 300, inside the tolerance.
      return { ...fail(401, 'timestamp_out_of_tolerance', `webhook-timestamp is more than ${toleranceSeconds} seconds from the receiver's clock`), fields: { receiver_clock_ahead_seconds: aheadMs / 1000 } };
    }
    const candidates = entries
      .filter((e) => e.startsWith('v1,') && V1_SIGNATURE.test(e.slice(3)))
      .flatMap((e) => {
        // Canonical base64 only. The 43rd character carries 2 bits of the digest and 4 unused
        // ones, which Buffer.from ignores: "…AB=" and "…AC=" decode alike. The reference
        // (standardwebhooks) compares the strings, so an altered signature must not pass here
        // either (found by the header property test).
        const b64 = e.slice(3);
        const bytes = Buffer.from(b64, 'base64');
        return bytes.toString('base64') === b64 ? [bytes] : [];
      });
    return { ok: true, prefix: `${id}.${timestamp}.`, timestamp: ts, candidates };
  }

  /** HMAC-SHA256 of `{id}.{timestamp}.{raw body}` under every key of every source. */
  function match(checked: CheckedHeaders, body: Buffer): VerifyResult {
    if (checked.candidates.length > 0) {
      for (const source of keyed) {
        for (const key of source.keys) {
          const expected = createHmac('sha256', key).update(checked.prefix).update(body).digest();
          // Lengths are equal by construction (32 bytes), as timingSafeEqual requires.
          if (checked.candidates.some((c) => timingSafeEqual(c, expected))) {
            return { ok: true, source: source.name, timestamp: checked.timestamp };
          }
        }
      }
    }
    return fail(401, 'no_valid_signature', 'no v1 signature in webhook-signature matches a configured secret');
  }

  function verify(headers: SignatureHeaders, body: Buffer): VerifyResult {
    const checked = check(headers);
    return checked.ok ? match(checked, body) : checked;
  }

  return { check, match, verify };
}

export type Verifier = ReturnType<typeof createVerifier>;
