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
const { dir, cleanup } = tempDir('failure-lines-source-');
afterAll(async () => {
  await r?.close();
  for (const s of servers) s.close();
  cleanup();
});

/** A hiring API that answers every read 503 (an outage). */
async function failingApi(): Promise<string> {
  const s = createServer((req, res) => {
    req.resume();
    res.writeHead(503, { 'content-type': 'application/json' }).end('[{"code":"error","detail":"down","attr":null}]');
  });
  servers.push(s);
  await new Promise<void>((ok) => s.listen(0, '127.0.0.1', () => ok()));
  return `http://127.0.0.1:${(s.address() as AddressInfo).port}`;
}

describe('job failure lines with several sources', () => {
  // Each source's failures are throttled apart (one line a minute each, with a count), but the
  // lines named no source: two organizations failing alike gave two `failed_since_last_line`
  // counts a minute that could not be told apart, nor a dead-lettered read told from another's.
  it("name the source of the failed read or dead letter, as the hold and pause lines do", async () => {
    const secrets = { acme: newSecret(), globex: newSecret() };
    const cfg = join(dir, 'sources.json');
    writeFileSync(
      cfg,
      JSON.stringify({
        sources: [
          { name: 'acme', secrets: [secrets.acme], api_url: await failingApi(), api_key: 'sk-acme.key' },
          { name: 'globex', secrets: [secrets.globex], api_url: await failingApi(), api_key: 'sk-globex.key' },
        ],
      }),
    );
    const clock = new ManualClock(Date.now());
    r = await startReceiver({ CONFIG_FILE: cfg, WORKER_CONCURRENCY: '0' }, { clock });
    for (const source of ['acme', 'globex'] as const) {
      const res = await postSigned(r.url, secrets[source], JSON.stringify(envelope({ event_type: 'interview.completed' })));
      expect(res.status).toBe(200);
    }
    // An application id no request can name: its read is dead-lettered before any request.
    const dot = envelope({ event_type: 'interview.completed' }) as { payload: { application: { id: string } } };
    dot.payload.application.id = '..';
    expect((await postSigned(r.url, secrets.globex, JSON.stringify(dot))).status).toBe(200);
    await r.app.worker.runUntilIdle(100);

    const lines = r.logs.lines.filter((l) => l.kind === 'fetch_result');
    const failed = lines.filter((l) => l.msg === 'job failed; will retry');
    // One line at warn per source: each source's first failure.
    expect(failed.filter((l) => l.level === 40).map((l) => l.source).sort()).toEqual(['acme', 'globex']);
    const dead = lines.filter((l) => l.msg === 'job dead-lettered');
    expect(dead).toHaveLength(1);
    expect(dead[0]).toMatchObject({ source: 'globex', level: 50 });
    // The key is named once per line, not twice (a JSON object with a duplicate key).
    for (const raw of r.logs.raw.filter((l) => l.includes('"kind":"fetch_result"'))) expect(raw.match(/"source":/g)?.length ?? 0).toBeLessThanOrEqual(1);
  }, 30_000);
});
