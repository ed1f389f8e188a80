import { afterEach, expect, it } from 'vitest';
import { startPair, type Pair } from '../helpers/pair.js';

let pair: Pair;
afterEach(() => pair?.close());

// Spec 8 asks for polls no faster than every 30 s, as the service sees them. Time passes between
// the read's reservation of its poll slot and the request reaching the service (a wait for the
// write lock, a slow connection): the next read's 30 s must count from when the request went out,
// not from the reservation, or it reaches the service sooner than 30 s after this one.
it('a read whose request left late still reaches the service 30 s after it at the earliest', async () => {
  let delayNext = 0;
  pair = await startPair({
    beforeRequest: (url) => {
      if (delayNext > 0 && url.endsWith('/interview')) {
        pair.clock.advance(delayNext);
        delayNext = 0;
      }
    },
  });
  const c = pair.sandbox.control;
  c.setResultDelay(10 * 60_000);
  const app = c.createApplication({ jobId: c.createJob({}).id });
  await pair.settle();
  c.completeInterview(app.id);
  delayNext = 5_000; // the first read reaches the service 5 s after it reserved its slot
  await pair.settle();
  const reads = () => pair.calls.filter((x) => x.path === `/api/v2/applications/${app.id}/interview`).length;
  expect(reads()).toBe(1);
  for (let i = 0; i < 60 && reads() < 2; i++) {
    pair.clock.advance(1_000);
    await pair.settle();
  }
  expect(reads()).toBe(2);
  const seen = c.readGaps().find((g) => g.applicationId === app.id && g.resource === 'interview');
  expect(seen).toMatchObject({ reads: 2 });
  expect(seen!.shortestGapMs).toBeGreaterThanOrEqual(30_000);
});
