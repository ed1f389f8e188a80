import { writeFileSync } from 'node:fs';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cli, until } from '../cli/helpers.js';
import { envelope, newSecret } from '../helpers/signing.js';
import { startHarness, type Harness } from './helpers.js';

// An operator enables a sink (the CLI, another process) while an attempt sent before the enable,
// to the consumer as it was, is still waiting for its 410: that answer must not disable the sink
// again. The enable wins over what was decided from before it.

const SECRET = newSecret();
let h: Harness | undefined;
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0)) await c();
  await h?.close();
  h = undefined;
});

/** A consumer that answers 410 at once to the first request, and holds the others until told; then answers `from then on`. */
async function goneConsumer() {
  const held: ServerResponse[] = [];
  let requests = 0;
  let fromThenOn: number | null = null;
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      requests++;
      if (requests === 1) res.writeHead(410).end();
      else if (fromThenOn !== null) res.writeHead(fromThenOn).end();
      else held.push(res);
    });
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  closers.push(
    () =>
      new Promise<void>((ok) => {
        server.closeAllConnections();
        server.close(() => ok());
      }),
  );
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/a`,
    held: () => held.length,
    requests: () => requests,
    answerHeld: (status: number) => held.splice(0).forEach((res) => res.writeHead(status).end()),
    answerAll: (status: number) => {
      fromThenOn = status;
      held.splice(0).forEach((res) => res.writeHead(status).end());
    },
  };
}

const sinkState = (hh: Harness) =>
  hh.r.app.database.ingestSqlite.prepare('SELECT disabled_at, disabled_reason FROM sink_state WHERE sink = ?').get('a') as { disabled_at: string | null; disabled_reason: string | null } | undefined;

describe('sinks enable while an attempt from before it is answered 410', () => {
  it('the sink stays enabled, and the attempt is sent again', async () => {
    const consumer = await goneConsumer();
    h = await startHarness({ sinks: [{ name: 'a', type: 'http', url: consumer.url, secret: SECRET, concurrency: 2 }] });
    const hh = h;
    await hh.post(envelope());
    await hh.post(envelope());
    await hh.r.app.worker.runUntilIdle();
    // Two attempts at once: the first is answered 410 and disables the sink, the second waits.
    const sending = hh.r.app.fanOut.runUntilIdle();
    await until(() => consumer.held() === 1 && sinkState(hh)?.disabled_at, 'the sink disabled with an attempt in flight');

    const env = { DATABASE_PATH: hh.r.dbPath, CONFIG_FILE: join(hh.dir, 'config.json') };
    const enabled = await cli(['sinks', 'enable', 'a'], env);
    expect(enabled.stdout).toContain('sink a enabled');
    // The attempt sent before the enable now gets its 410, from the consumer as it was.
    consumer.answerHeld(410);
    // Enabled, the sink sends both messages again (held again); disabled, the lane has nothing to
    // claim and stops.
    let idle = false;
    void sending.then(() => (idle = true));
    await until(() => idle || consumer.held() === 2, 'both messages sent again, or the lane idle');
    expect(sinkState(hh)).toEqual({ disabled_at: null, disabled_reason: null });
    expect(idle).toBe(false);
    consumer.answerAll(200);
    await sending;
    await hh.settle();
    expect(hh.deliveries('a').map((d) => d.state)).toEqual(['delivered', 'delivered']);
    expect(consumer.requests()).toBe(4);
  });
});
