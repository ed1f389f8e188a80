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

describe("a sink's consumer asking again and again to wait a second", () => {
  it('is said at warn when the holds start, then once a minute with holds_since_last_line, the holds between at debug', async () => {
    const clock = new ManualClock(Date.now());
    const sinkSecret = newSecret();
    consumer = await startConsumer({ '/crm': sinkSecret });
    consumer.reply(() => ({ status: 429, headers: { 'retry-after': '1' } }));
    const config = join(dir, 'config.json');
    writeFileSync(config, JSON.stringify({ sinks: [{ name: 'crm', type: 'http', url: `${consumer.url}/crm`, secret: sinkSecret, concurrency: 1 }] }));
    const secret = newSecret();
    r = await startReceiver({ WEBHOOK_SECRET: secret, CONFIG_FILE: config }, { clock });
    const rec = r;
    const holdLines = (level: number) => rec.logs.lines.filter((l) => l.level === level && l.source === 'sink:crm' && String(l.msg).startsWith('asked to slow down (Retry-After)'));

    // Six messages, each due at once: after each 1 s hold the next one is tried and held again.
    for (let i = 0; i < 6; i++) {
      const body = JSON.stringify(envelope({ created_at: new Date(clock.now()).toISOString() }));
      expect((await postSigned(rec.url, secret, body, { timestampSeconds: Math.floor(clock.now() / 1000) })).status).toBe(200);
    }
    for (let n = 1; n <= 6; n++) {
      await until(() => consumer!.on('/crm').length >= n && holdLines(30).length + holdLines(40).length + holdLines(20).length >= n, `hold ${n}`);
      clock.advance(1_100);
    }
    expect(holdLines(40)).toHaveLength(1);
    expect(holdLines(20)).toHaveLength(5);

    // A minute on (the first tries are due again by then): the next hold is said, with the count.
    clock.advance(60_000);
    await until(() => holdLines(40).length === 2, 'the next line at warn');
    expect(holdLines(40)[1]).toMatchObject({ holds_since_last_line: 5 });
  });
});
