import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/util/clock.js';
import { until } from '../cli/helpers.js';
import { startReceiver, tempDir, type TestReceiver } from '../helpers/receiver.js';
import { envelope, newSecret, postSigned } from '../helpers/signing.js';
import { startConsumer, type Consumer } from './helpers.js';

// A consumer that answers 429 with `Retry-After: 1` for hours holds its sink a second at a time:
// each job tried after a hold ends starts the next one. Said at every hold, that was a warn line
// a second per sink for as long as it lasted; said once, then once a minute with a count.

let r: TestReceiver | undefined;
let consumer: Consumer | undefined;
const { dir, cleanup } = tempDir('retry-after-logs-');
afterEach(async () => {
  await r?.close();
  r = undefined;
  await consumer?.close();
});
afterAll(cleanup);

/** A receiver with one http sink (`crm`, one at a time) whose consumer answers `reply`, and `messages` delivered to it. */
async function holdingConsumer(reply: Parameters<Consumer['reply']>[0], messages: number) {
  const clock = new ManualClock(Date.now());
  const sinkSecret = newSecret();
  consumer = await startConsumer({ '/crm': sinkSecret });
  consumer.reply(reply);
  const config = join(dir, `config-${messages}.json`);
  writeFileSync(config, JSON.stringify({ sinks: [{ name: 'crm', type: 'http', url: `${consumer.url}/crm`, secret: sinkSecret, concurrency: 1 }] }));
  const secret = newSecret();
  r = await startReceiver({ WEBHOOK_SECRET: secret, CONFIG_FILE: config }, { clock });
  const rec = r;
  const holdLines = (level: number) => rec.logs.lines.filter((l) => l.level === level && l.source === 'sink:crm' && String(l.msg).startsWith('asked to slow down (Retry-After)'));
  for (let i = 0; i < messages; i++) {
    const body = JSON.stringify(envelope({ created_at: new Date(clock.now()).toISOString() }));
    expect((await postSigned(rec.url, secret, body, { timestampSeconds: Math.floor(clock.now() / 1000) })).status).toBe(200);
  }
  return { clock, holdLines, received: () => consumer!.on('/crm').length };
}

describe("a sink's consumer asking again and again to wait a second", () => {
  it('is said at warn when the holds start, then once a minute with holds_since_last_line, the holds between at debug', async () => {
    // Six messages, each due at once: after each 1 s hold the next one is tried and held again.
    const { clock, holdLines, received } = await holdingConsumer(() => ({ status: 429, headers: { 'retry-after': '1' } }), 6);
    for (let n = 1; n <= 6; n++) {
      await until(() => received() >= n && holdLines(30).length + holdLines(40).length + holdLines(20).length >= n, `hold ${n}`);
      clock.advance(1_100);
    }
    expect(holdLines(40)).toHaveLength(1);
    expect(holdLines(20)).toHaveLength(5);

    // A minute on (the first tries are due again by then): the next hold is said, with the count.
    clock.advance(60_000);
    await until(() => holdLines(40).length === 2, 'the next line at warn');
    expect(holdLines(40)[1]).toMatchObject({ holds_since_last_line: 5 });
  });

  it('is not said again at every hold when the consumer lets some messages through in between (a rate limit)', async () => {
    // A consumer's rate limit answers 200 to the messages within it and 429 to the others: a job
    // goes through between two holds. That ended the "episode", and every hold was said at warn
    // again: still a warn line a second for as long as the limit lasted.
    const { clock, holdLines, received } = await holdingConsumer((_r, n) => (n % 2 === 1 ? { status: 429, headers: { 'retry-after': '1' } } : { status: 204 }), 8);
    // Requests 1, 3, 5, 7 are held; 2, 4, 6 go through between them.
    for (let n = 1; n <= 4; n++) {
      await until(() => received() >= 2 * n - 1 && holdLines(40).length + holdLines(20).length >= n, `hold ${n}`);
      clock.advance(1_100);
      if (n < 4) await until(() => received() >= 2 * n, `message ${2 * n} through`);
    }
    expect(holdLines(40)).toHaveLength(1);
    expect(holdLines(20)).toHaveLength(3);
  });
});
