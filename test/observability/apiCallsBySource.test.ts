import { writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/util/clock.js';
import { startReceiver, tempDir, type TestReceiver } from '../helpers/receiver.js';
import { envelope, newSecret, postSigned } from '../helpers/signing.js';

const servers: Server[] = [];
let r: TestReceiver | undefined;
const { dir, cleanup } = tempDir('api-by-source-');
afterAll(async () => {
  await r?.close();
  for (const s of servers) s.close();
  cleanup();
});

/** A hiring API answering every read with `status`. */
async function api(status: number): Promise<string> {
  const s = createServer((req, res) => {
    req.resume();
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(status === 200 ? JSON.stringify({ status: 'completed', overall_score: 3, is_eligible: true, ineligibility_reasons: [] }) : '{"error":"boom"}');
  });
  servers.push(s);
  await new Promise<void>((ok) => s.listen(0, '127.0.0.1', () => ok()));
  return `http://127.0.0.1:${(s.address() as AddressInfo).port}`;
}

describe('receiver_hiring_api_calls_total', () => {
  // The "hiring API down" alert is written `by (source)`: without the label, the reads of a source
  // that works hid the outage of another (and muted the "processing stalled" alert with it).
  it('counts each source apart: one organization\'s API down while another\'s works shows which', async () => {
    const clock = new ManualClock(Date.parse('2026-11-01T09:00:00Z'));
    const acmeSecret = newSecret();
    const globexSecret = newSecret();
    const cfg = join(dir, 'sources.json');
    writeFileSync(
      cfg,
      JSON.stringify({
        sources: [
          { name: 'acme', secrets: [acmeSecret], api_url: await api(500), api_key: 'sk-acme.key' },
          { name: 'globex', secrets: [globexSecret], api_url: await api(200), api_key: 'sk-globex.key' },
        ],
      }),
    );
    r = await startReceiver({ CONFIG_FILE: cfg }, { clock });
    await r.app.worker.stop();
    for (const secret of [acmeSecret, globexSecret]) {
      const body = JSON.stringify(envelope({ event_type: 'interview.completed', created_at: new Date(clock.now()).toISOString() }));
      expect((await postSigned(r.url, secret, body, { timestampSeconds: Math.floor(clock.now() / 1000) })).status).toBe(200);
    }
    await r.app.worker.runUntilIdle();

    const text = await (await fetch(`${r.url}/metrics`)).text();
    expect(text).toMatch(/^receiver_hiring_api_calls_total\{source="acme",resource="interview",outcome="server_error"\} 1$/m);
    expect(text).toMatch(/^receiver_hiring_api_calls_total\{source="globex",resource="interview",outcome="ready"\} 1$/m);
    expect(text).not.toMatch(/^receiver_hiring_api_calls_total\{source="acme",[^}]*outcome="ready"/m);
    expect(text).not.toMatch(/^receiver_hiring_api_calls_total\{source="globex",[^}]*outcome="server_error"/m);
  });
});
