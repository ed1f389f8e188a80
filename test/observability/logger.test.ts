import { describe, expect, it } from 'vitest';
import { createLogger, deliveryLogger } from '../../src/observability/logger.js';
import { LogCapture } from '../helpers/receiver.js';

describe('deliveryLogger (the one line per delivery)', () => {
  it('writes to the parent destination at the parent level and redacts sensitive names at the top level', () => {
    const logs = new LogCapture();
    const log = deliveryLogger(createLogger('info', logs));
    log.debug({ outcome: 'accepted' }, 'not at info');
    log.info(
      {
        outcome: 'accepted',
        event_id: 'evt_1',
        apiKey: 'sk_live_top',
        secret: 'whsec_top',
        signingKeys: ['k'],
        candidate: { email: 'ada@example.com' },
        headers: { 'webhook-signature': 'v1,sig', authorization: 'Bearer x' },
      },
      'webhook delivery',
    );
    expect(logs.lines).toHaveLength(1);
    const [line] = logs.lines;
    expect(line).toMatchObject({ outcome: 'accepted', event_id: 'evt_1', service: 'hiring-webhook-receiver', msg: 'webhook delivery' });
    for (const key of ['apiKey', 'secret', 'signingKeys', 'candidate', 'headers']) expect(line![key]).toBe('[redacted]');
    expect(logs.raw.join('\n')).not.toMatch(/sk_live_top|whsec_top|ada@example|v1,sig|Bearer/);
  });

  it('leaves the parent logger with its nested (wildcard) redaction', () => {
    const logs = new LogCapture();
    const parent = createLogger('info', logs);
    deliveryLogger(parent);
    parent.info({ source: { apiKey: 'sk_nested' }, req: { headers: { authorization: 'Bearer y', 'webhook-signature': 'v1,nestedsig' } } }, 'config');
    expect(logs.raw.join('\n')).not.toMatch(/sk_nested|Bearer y|nestedsig/);
    expect(logs.lines[0]).toMatchObject({ req: { headers: { authorization: '[redacted]', 'webhook-signature': '[redacted]' } } });
    // And at the top level.
    parent.info({ headers: { authorization: 'Bearer top', 'webhook-signature': 'v1,topsig' } }, 'request');
    expect(logs.lines[1]).toMatchObject({ headers: { authorization: '[redacted]', 'webhook-signature': '[redacted]' } });
  });
});
