import { describe, expect, it } from 'vitest';
import { IngestFirst, type IngestFirstOptions } from '../../src/processing/IngestFirst.js';

/** A fake time line: work "takes" time by advancing it; sleeps are recorded and advance it too. */
function harness(share = 0.5, utilization = () => 1, options: IngestFirstOptions = {}) {
  let t = 1_000;
  const sleeps: number[] = [];
  const pacer = new IngestFirst({
    // The rules of the loop's utilization, with the deliveries' own share left out (the tests of
    // `deliveriesRoomBelow` set it): these deliveries book no loop time.
    deliveriesRoomBelow: 0,
    ...options,
    share,
    utilization: () => utilization(),
    now: () => t,
    sleep: async (ms) => {
      sleeps.push(ms);
      t += ms;
    },
  });
  /** One worker step as the Worker takes it: wait for the turn, work, book the time. */
  const step = async (ms: number) => {
    await pacer.turn();
    t += ms;
    pacer.charge(ms);
  };
  return { pacer, sleeps, step, advance: (ms: number) => void (t += ms) };
}

/**
 * The folds' pacer as the app makes it (held from 60% utilization, share 0.25), enabled, a delivery
 * just in. `afterFoldAndRead`: a fold batch of 2 ms (owing 6 ms) and a read of 40 ms (network wait
 * included: the shared account at its 50 ms cap) end together, and the folds ask for their next turn.
 * `nextQuarter`: a quarter-second later (the next sample is taken), with a delivery just in.
 */
function foldHarness(utilization: () => number, options: IngestFirstOptions = {}) {
  const h = harness(0.25, utilization, options);
  const folds = h.pacer.from(0.6);
  h.pacer.enabled = true;
  h.pacer.noteIngest();
  const afterFoldAndRead = async () => {
    h.advance(2);
    folds.charge(2);
    h.pacer.charge(40);
    return folds.turn();
  };
  const nextQuarter = () => {
    h.advance(250);
    h.pacer.noteIngest();
  };
  return { ...h, folds, afterFoldAndRead, nextQuarter };
}

describe('IngestFirst (processing yields the event loop to deliveries)', () => {
  it('while deliveries arrive, waits after each step so processing uses at most its share', async () => {
    const h = harness(0.5);
    h.pacer.enabled = true;
    h.pacer.noteIngest();
    for (const ms of [4, 2, 2]) await h.step(ms);
    // share 0.5: a 4 ms step is followed by 4 ms for the loop, a 2 ms step by 2 ms.
    expect(h.sleeps).toEqual([4, 2]);
  });

  it('a smaller share leaves the loop more time', async () => {
    const h = harness(0.25);
    h.pacer.enabled = true;
    h.pacer.noteIngest();
    for (const ms of [2, 1]) await h.step(ms);
    expect(h.sleeps).toEqual([6]);
  });

  it('runs flat out when no delivery came recently, and when not enabled', async () => {
    for (const enabled of [true, false]) {
      const h = harness();
      h.pacer.enabled = enabled;
      h.pacer.noteIngest();
      if (enabled) h.advance(300); // past the 250 ms window
      for (const ms of [5, 5]) await h.step(ms);
      expect(h.sleeps).toEqual([]);
    }
  });

  it('does not pace while the event loop has room, and starts when it gets busy', async () => {
    let load = 0.4;
    const h = harness(0.5, () => load);
    h.pacer.enabled = true;
    h.pacer.noteIngest();
    for (const ms of [4, 4]) await h.step(ms);
    expect(h.sleeps).toEqual([]);
    load = 0.9;
    h.advance(250); // the next sample is taken
    h.pacer.noteIngest();
    for (const ms of [4, 4]) await h.step(ms);
    expect(h.sleeps).toEqual([4]);
  });

  it('says whether it is holding processing back: only under load, while deliveries arrive', async () => {
    let load = 0.5;
    const h = harness(0.5, () => load);
    expect(await h.pacer.turn()).toBe(false); // not enabled
    h.pacer.enabled = true;
    h.pacer.noteIngest();
    expect(await h.pacer.turn()).toBe(false); // room on the loop
    load = 0.95;
    h.advance(250);
    h.pacer.noteIngest();
    expect(await h.pacer.turn()).toBe(true);
    h.advance(300); // no delivery for longer than the window
    expect(await h.pacer.turn()).toBe(false);
  });

  it('holds a worker paced from a lower threshold while the default one still runs free, on one budget', async () => {
    let load = 0.7; // between the folds' 60% and the default 90%
    const h = harness(0.5, () => load);
    const folds = h.pacer.from(0.6);
    h.pacer.enabled = true;
    h.pacer.noteIngest();
    expect(await folds.turn()).toBe(true);
    expect(await h.pacer.turn()).toBe(false);
    folds.charge(4); // owes 4 ms at share 0.5
    expect(await folds.turn()).toBe(true);
    expect(h.sleeps).toEqual([4]);
    load = 0.95;
    h.advance(250);
    h.pacer.noteIngest();
    expect(await h.pacer.turn()).toBe(true);
  });

  it('a held fold waits on its own charges while the loop has room, not on the reads\' wall time', async () => {
    let load = 0.7; // over the folds' 60%, under the 80% of room
    const h = foldHarness(() => load);
    expect(await h.folds.turn()).toBe(true);
    expect(await h.afterFoldAndRead()).toBe(true);
    expect(h.sleeps).toEqual([6]);
    // The reads wait on the shared account, the folds' charges included.
    load = 0.95;
    h.nextQuarter();
    h.advance(2);
    h.folds.charge(2);
    expect(await h.pacer.turn()).toBe(true);
    expect(h.sleeps).toEqual([6, 6]);
  });

  it('a fold\'s own charges add up like the shared ones (two batches ending together owe both)', async () => {
    const h = foldHarness(() => 0.7);
    expect(await h.folds.turn()).toBe(true);
    h.folds.charge(2); // owes 6 ms
    expect(await h.afterFoldAndRead()).toBe(true); // 2 ms later, 6 more
    expect(h.sleeps).toEqual([10]);
  });

  it('from 80% busy, a held fold waits on the shared account, the reads\' charges included', async () => {
    const h = foldHarness(() => 0.85);
    expect(await h.folds.turn()).toBe(true);
    expect(await h.afterFoldAndRead()).toBe(true);
    expect(h.sleeps).toEqual([50]);
  });

  it('the room is the utilization over about a second: one quieter quarter-second is not room', async () => {
    let load = 0.95;
    const h = foldHarness(() => load);
    expect(await h.folds.turn()).toBe(true); // the first sample: 0.95
    load = 0.7;
    h.nextQuarter();
    expect(await h.folds.turn()).toBe(true); // 0.7, smoothed: 0.89
    expect(await h.afterFoldAndRead()).toBe(true);
    expect(h.sleeps).toEqual([50]);
    // Three more quarter-seconds at 0.7: smoothed 0.84, 0.81, 0.78, under the 80% of room.
    for (let i = 0; i < 3; i++) {
      h.nextQuarter();
      expect(await h.folds.turn()).toBe(true);
    }
    expect(await h.afterFoldAndRead()).toBe(true);
    expect(h.sleeps).toEqual([50, 6]);
  });

  it('a delivery waiting for another process\'s write lock leaves no room: the held fold waits on the shared account', async () => {
    const h = foldHarness(() => 0.1); // the loop mostly waited on timers
    expect(await h.folds.turn()).toBe(false);
    h.advance(200);
    h.pacer.noteLockWait();
    h.advance(50); // the next sample: held, however idle the loop looked
    expect(await h.folds.turn()).toBe(true);
    expect(await h.afterFoldAndRead()).toBe(true);
    expect(h.sleeps).toEqual([50]);
  });

  it('the room is a setting: roomBelow', async () => {
    const h = foldHarness(() => 0.7, { roomBelow: 0.65 });
    expect(await h.folds.turn()).toBe(true);
    expect(await h.afterFoldAndRead()).toBe(true);
    expect(h.sleeps).toEqual([50]);
  });

  it('the room is gained slowly but lost at once: a busy quarter-second after a quiet spell ends it', async () => {
    let load = 0.05;
    const h = foldHarness(() => load);
    expect(await h.folds.turn()).toBe(false); // quiet: not held at all
    load = 1;
    h.nextQuarter();
    expect(await h.folds.turn()).toBe(true); // smoothed 0.29, but this quarter-second was fully busy
    expect(await h.afterFoldAndRead()).toBe(true);
    expect(h.sleeps).toEqual([50]);
  });

  it('room is under roomBelow, not at it', async () => {
    const h = foldHarness(() => 0.7, { roomBelow: 0.7 });
    expect(await h.folds.turn()).toBe(true); // the first sample as it is: exactly 0.7
    expect(await h.afterFoldAndRead()).toBe(true);
    expect(h.sleeps).toEqual([50]);
  });

  it('a quarter-second with a write-lock wait counts as fully busy in the smoothed utilization too', async () => {
    const h = foldHarness(() => 0.78);
    expect(await h.folds.turn()).toBe(true); // the first sample: 0.78, room
    h.advance(250);
    h.pacer.noteLockWait();
    expect(await h.folds.turn()).toBe(true); // counted as 1: smoothed 0.835, and no room while it waited
    h.nextQuarter();
    expect(await h.folds.turn()).toBe(true); // 0.78 again: smoothed 0.82, still no room
    expect(await h.afterFoldAndRead()).toBe(true);
    expect(h.sleeps).toEqual([50]);
  });

  it('holds processing back for the sample after ingest waited for the write lock, however idle the loop looked', async () => {
    const h = harness(0.5, () => 0.1); // the loop mostly waited on timers
    h.pacer.enabled = true;
    h.pacer.noteIngest();
    expect(await h.pacer.turn()).toBe(false);
    h.advance(200);
    h.pacer.noteLockWait(); // a delivery is waiting for another process's lock
    h.advance(50); // the next sample is taken
    expect(await h.pacer.turn()).toBe(true);
    h.pacer.charge(4);
    expect(await h.pacer.turn()).toBe(true);
    expect(h.sleeps).toEqual([4]);
    h.advance(250); // a sample without a lock wait: the loop has room again
    h.pacer.noteIngest();
    expect(await h.pacer.turn()).toBe(false);
  });

  describe('the deliveries\' own share of the loop (deliveriesRoomBelow, 8% by default)', () => {
    /**
     * The app's two pacers (reads from 90%, folds from 60%) on a fully busy loop, with the
     * default deliveriesRoomBelow. `quarter(handlersMs)`: a quarter-second later, a delivery was
     * committed and the deliveries' handlers took `handlersMs` of the loop in all.
     */
    function shareHarness(options: IngestFirstOptions = {}) {
      const h = foldHarness(() => 1, { deliveriesRoomBelow: 0.08, ...options });
      const quarter = (handlersMs: number) => {
        h.advance(250);
        h.pacer.noteIngest();
        h.pacer.noteDeliveryWork(handlersMs);
      };
      /** Whether the folds and the reads are held back (the folds' turn takes the sample). */
      const held = async () => [await h.folds.turn(), await h.pacer.turn()];
      return { ...h, quarter, held };
    }

    it('holds nothing back while the deliveries\' handlers take under 8% of the loop, however busy it is', async () => {
      const h = shareHarness();
      expect(await h.held()).toEqual([true, true]); // no sample yet
      h.quarter(15); // 6% of the quarter-second
      expect(await h.held()).toEqual([false, false]);
      // A fold and a read that end together owe nothing: the next ones start at once.
      expect(await h.afterFoldAndRead()).toBe(false);
      expect(await h.pacer.turn()).toBe(false);
      expect(h.sleeps).toEqual([]);
    });

    it('each delivery\'s time adds up: 6% in two bookings is room, 8% in three is not', async () => {
      for (const [bookings, held] of [[[5, 10], false], [[5, 10, 5], true]] as const) {
        const h = shareHarness();
        h.quarter(0);
        expect(await h.held()).toEqual([false, false]); // nothing booked
        for (const ms of bookings) h.pacer.noteDeliveryWork(ms);
        h.quarter(0);
        expect(await h.held()).toEqual([held, held]);
      }
    });

    it('lost at once, gained back slowly: a busy quarter-second holds, and quiet ones after a busy spell free only once the smoothed share is under', async () => {
      const h = shareHarness();
      h.quarter(10);
      expect(await h.held()).toEqual([false, false]);
      h.quarter(40); // 16%: smoothed 0.07, but this quarter-second is over
      expect(await h.held()).toEqual([true, true]);
      h.quarter(10); // 4% again, smoothed 0.0625
      expect(await h.held()).toEqual([false, false]);

      const busy = shareHarness();
      busy.quarter(40); // 16% from the first sample
      expect(await busy.held()).toEqual([true, true]);
      for (let i = 0; i < 3; i++) {
        busy.quarter(10); // 4%: smoothed 0.13, 0.11, 0.09
        expect(await busy.held()).toEqual([true, true]);
      }
      busy.quarter(10); // 0.078
      expect(await busy.held()).toEqual([false, false]);
    });

    it('a delivery waiting for another process\'s write lock holds processing back, however little the handlers took', async () => {
      const h = shareHarness();
      h.quarter(5);
      expect(await h.held()).toEqual([false, false]);
      h.advance(200);
      h.pacer.noteLockWait();
      h.advance(50);
      expect(await h.held()).toEqual([true, true]);
    });

    it('a lock wait ends that at once, not at the next sample: the loop was busy, so processing is held as before the rule', async () => {
      const h = shareHarness();
      h.quarter(5);
      expect(await h.held()).toEqual([false, false]);
      h.advance(10); // the same quarter-second
      h.pacer.noteLockWait();
      expect(await h.held()).toEqual([true, true]);
    });

    it('under deliveriesRoomBelow, not at it; and 0 turns it off', async () => {
      const at = shareHarness({ deliveriesRoomBelow: 0.1 });
      at.quarter(25); // exactly 10%
      expect(await at.held()).toEqual([true, true]);
      const off = shareHarness({ deliveriesRoomBelow: 0 });
      off.quarter(0);
      expect(await off.held()).toEqual([true, true]);
    });

    it('still only under load: with the loop under busyAbove, nothing is held whatever the deliveries take', async () => {
      const h = harness(0.5, () => 0.5, { deliveriesRoomBelow: 0.08 });
      h.pacer.enabled = true;
      h.advance(250);
      h.pacer.noteIngest();
      h.pacer.noteDeliveryWork(200);
      expect(await h.pacer.turn()).toBe(false);
    });
  });

  it('never parks a step for more than 50 ms, however long the last one ran', async () => {
    const h = harness(0.1);
    h.pacer.enabled = true;
    h.pacer.noteIngest();
    await h.step(40); // owes 360 ms at share 0.1
    h.pacer.noteIngest();
    await h.step(1);
    expect(h.sleeps).toEqual([50]);
  });

  it('refuses a share outside (0, 1]', () => {
    expect(() => new IngestFirst({ share: 0 })).toThrow(/share/);
    expect(() => new IngestFirst({ share: 1.5 })).toThrow(/share/);
  });
});
