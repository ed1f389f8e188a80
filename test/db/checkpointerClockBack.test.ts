import { statSync } from 'node:fs';
import BetterSqlite3 from 'better-sqlite3';
import { describe, expect, it, onTestFinished } from 'vitest';
import { clockBackChild } from '../helpers/clockBackChild.js';

// The checkpointer thread runs a tick when the last one is old enough. Told by the wall clock
// (Date.now), a clock set back (NTP stepping a VM's clock after a restore, an operator's `date`)
// made every tick look "not due yet" for as long as the step: no checkpoint for that long, and the
// WAL grew with every commit. The clock is the thread's own, so the receiver runs in a child
// process whose preload (--require, which worker threads run too) sets the thread's clock back an
// hour once the test says so (a file).

const OPENER = `
const { openDatabase } = await import(process.env.ROOT + 'src/db/openDatabase.ts');
const database = openDatabase(process.env.DB, { checkpointer: { intervalMs: 20, maxWalBytes: 64 * 1024 } });
process.stdout.write('ready\\n');
const keep = setInterval(() => {}, 1000);
process.on('SIGTERM', async () => {
  clearInterval(keep);
  await database.close();
  process.exit(0);
});
`;

describe('the checkpointer thread and a wall clock set back', () => {
  it('keeps checkpointing: the WAL is reset within a bounded wait, before and after the step', { timeout: 60_000 }, async () => {
    const { path, err, stepBack } = await clockBackChild(OPENER);

    // Another connection writes, as the receiver's do: no checkpoints of its own, and a WAL it
    // rewinds (after a checkpoint) truncated to 64 KB at its commit.
    const w = new BetterSqlite3(path);
    onTestFinished(() => {
      w.close();
    });
    w.pragma('wal_autocheckpoint = 0');
    w.pragma('journal_size_limit = 65536');
    const fill = w.prepare("INSERT INTO quarantine (received_at, source, delivery_id, reason, headers, body) VALUES ('t', 's', 'd', 'r', '{}', ?)");
    const body = Buffer.alloc(20_000, 1);
    const walBytes = () => statSync(`${path}-wal`, { throwIfNoEntry: false })?.size ?? 0;
    /** 1 MB in 50 commits, then small commits until the WAL is back under 128 KB (bounded): whether it was. */
    const resetAfterBurst = async (): Promise<{ reset: boolean; largest: number }> => {
      for (let i = 0; i < 50; i++) fill.run(body);
      const largest = walBytes();
      for (let i = 0; i < 60; i++) {
        await new Promise((r) => setTimeout(r, 50));
        fill.run(Buffer.alloc(10));
        if (walBytes() < 128 * 1024) return { reset: true, largest };
      }
      return { reset: false, largest };
    };

    // The clock as it is: the thread checkpoints, and the WAL is reset.
    expect(await resetAfterBurst()).toMatchObject({ reset: true });
    // Set back an hour.
    stepBack();
    expect(await resetAfterBurst()).toMatchObject({ reset: true });
    expect(err()).toBe('');
  });
});
