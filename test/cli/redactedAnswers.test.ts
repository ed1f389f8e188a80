import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { cli } from './helpers.js';

describe("the service's error text, as the CLI prints it", () => {
  it('takes out a phone number written as a plain run of digits led by 0, with no word saying it is one', async () => {
    const api = createServer((req, res) => {
      req.resume();
      req.on('end', () =>
        res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify([{ code: 'invalid_input', detail: 'Candidate 07700900123 already applied; request 1234567 refused', attr: 'url' }])),
      );
    });
    await new Promise<void>((resolve) => api.listen(0, '127.0.0.1', resolve));
    try {
      const r = await cli(['webhooks', 'register', '--url', 'https://receiver.example.com/webhooks'], {
        HIRING_API_URL: `http://127.0.0.1:${(api.address() as AddressInfo).port}`,
        HIRING_API_KEY: 'sk-test.unused',
      });
      expect(r.code).toBe(1);
      // The number led by 0 is a phone number; an id without a leading 0 is kept.
      expect(r.stderr).toBe('error: the service answered 400: invalid_input (url): Candidate [phone] already applied; request 1234567 refused\n');
    } finally {
      api.close();
    }
  }, 30_000);
});
