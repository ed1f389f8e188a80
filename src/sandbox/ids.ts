import { randomBytes, randomUUID } from 'node:crypto';

export function newId(): string {
  return randomUUID();
}

/** Spec 5.2: keys have the form `sk-<segment>.<segment>`. */
export function newApiKey(): string {
  return `sk-${randomBytes(6).toString('hex')}.${randomBytes(24).toString('base64url')}`;
}

export const API_KEY_PATTERN = /^sk-[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

/** Spec 2.11: secrets begin with `whsec_`; 24 random bytes, base64, as Standard Webhooks expects. */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(24).toString('base64')}`;
}

/** Spec 2.11: masked on reads. Keeps the prefix and the last 4 characters so a human can tell secrets apart. */
export function maskSecret(secret: string): string {
  return `whsec_********${secret.slice(-4)}`;
}

/** Standard Webhooks message id, one per delivery (constant across that delivery's retries). */
export function newMessageId(): string {
  return `msg_${randomBytes(12).toString('hex')}`;
}
