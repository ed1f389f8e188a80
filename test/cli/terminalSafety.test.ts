import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startReceiver, type TestReceiver } from '../helpers/receiver.js';
import { envelope, newSecret, postSigned } from '../helpers/signing.js';
import { cli } from './helpers.js';

// A signed delivery may carry anything in its id and type: the CLI's plain output must not hand
// a terminal escape sequences, NULs or line breaks from it (quarantine show already escaped them).
const secret = newSecret();
let receiver: TestReceiver;
const ID = 'evt_ctl\u001b[31mred';
const TYPE = 'weird\u0000type\nsecond line';

beforeAll(async () => {
  receiver = await startReceiver({ WEBHOOK_SECRET: secret, WORKER_CONCURRENCY: '0' });
  const res = await postSigned(receiver.url, secret, JSON.stringify(envelope({ id: ID, event_type: TYPE })));
  expect(await res.json()).toMatchObject({ outcome: 'accepted' });
});
afterAll(() => receiver.close());

describe('stored values in the plain output of the CLI', () => {
  it('status and replay --dry-run show control characters and line breaks of an event id or type escaped', async () => {
    const [status, replay] = await Promise.all([
      cli(['status'], { DATABASE_PATH: receiver.dbPath }),
      cli(['replay', '--all', '--dry-run'], { DATABASE_PATH: receiver.dbPath }),
    ]);
    for (const r of [status, replay]) {
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).not.toMatch(/[\u0000-\u0008\u000b-\u001f]/);
      expect(r.stdout).not.toContain('second line\n');
    }
    expect(status.stdout).toContain('  weird\\x00type\\x0asecond line');
    expect(replay.stdout).toContain('nothing for evt_ctl\\x1b[31mred weird\\x00type\\x0asecond line; skipped: processing');
  });
});
