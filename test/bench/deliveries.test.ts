import { randomUUID } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { BODY_BYTES, bodyOf, makeTemplates, newSigningSecret, signDeliveries } from '../../bench/lib/deliveries.js';

describe('bench deliveries', () => {
  const secret = newSigningSecret();
  const templates = makeTemplates();

  it('name the given applications in order (the fan-out row sends one per sandbox application), signed and BODY_BYTES long', () => {
    const ids = Array.from({ length: 7 }, () => randomUUID());
    const ds = signDeliveries(secret, templates, 7, ids);
    const wh = new Webhook(secret.secret);
    // Seven deliveries, in the order of the ids: the loop below checks each one it meets.
    expect(ds.map((d) => d.applicationId)).toEqual(ids);
    ds.forEach((d, i) => {
      const body = bodyOf(templates, d);
      expect(Buffer.byteLength(body)).toBe(BODY_BYTES);
      const env = JSON.parse(body) as { id: string; payload: { application: { id: string } } };
      expect(env.payload.application.id).toBe(ids[i]);
      expect(env.id).toBe(d.eventId);
      const headers = { 'webhook-id': d.msgId, 'webhook-timestamp': d.timestamp, 'webhook-signature': `v1,${d.signature}` };
      expect(() => wh.verify(body, headers)).not.toThrow();
    });
  });

  it('refuse too few application ids, or ids of another length (the body would not be BODY_BYTES)', () => {
    expect(() => signDeliveries(secret, templates, 3, [randomUUID(), randomUUID()])).toThrow(/3 application ids needed, got 2/);
    expect(() => signDeliveries(secret, templates, 1, ['app_1'])).toThrow(/must be 36 characters .* got "app_1"/);
  });

  it('without ids, every delivery names a new random application', () => {
    const ds = signDeliveries(secret, templates, 50);
    expect(new Set(ds.map((d) => d.applicationId)).size).toBe(50);
  });
});
