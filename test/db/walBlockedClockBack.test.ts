import BetterSqlite3 from 'better-sqlite3';
import { describe, expect, it, onTestFinished } from 'vitest';
import { clockBackChild } from '../helpers/clockBackChild.js';
import { waitFor } from '../helpers/waitFor.js';

// While the WAL cannot be reset, the checkpointer thread says so again every blockedReportMs, and
// receiver_sqlite_wal_blocked_seconds counts from its start. Both were told by the wall clock: set
// back (NTP stepping a restored VM's clock, `date -s`) while a reader held the WAL, the thread
// said nothing more and the gauge read 0 for as long as the step (an hour here), while the WAL grew:
// the "WAL growing" alert could not fire. The database is opened in a child whose preload
// sets its clock (main thread and checkpointer thread alike) back an hour once the test says so
// (clockBackChild).

const OPENER = `
const { openDatabase } = await import(process.env.ROOT + 'src/db/openDatabase.ts');
const { logWalBlocked } = await import(process.env.ROOT + 'src/db/logWalBlocked.ts');
const { createMetrics } = await import(process.env.ROOT + 'src/observability/metrics.ts');
const { createLogger } = await import(process.env.ROOT + 'src/observability/logger.ts');
const metrics = createMetrics();
const report = logWalBlocked(metrics, createLogger('silent'));
const database = openDatabase(process.env.DB, {
  migrate: false,
  checkpointer: { intervalMs: 20, maxWalBytes: 64 * 1024, blockedReportMs: 100 },
  onWalBlocked: (b) => {
    report(b);
    process.stdout.write(JSON.stringify({ blocked: b }) + '\\n');
  },
});
process.stdout.write('ready\\n');
const gauge = setInterval(async () => {
  const m = /^receiver_sqlite_wal_blocked_seconds (\\S+)$/m.exec(await metrics.registry.metrics());
  process.stdout.write(JSON.stringify({ gauge: Number(m && m[1]) }) + '\\n');
}, 100);
process.on('SIGTERM', async () => {
  clearInterval(gauge);
  await database.close();
  process.exit(0);
});
`;

interface Line {
  blocked?: { since: number | null; blockedMs: number };
  gauge?: number;
}

describe('the WAL blocked by a reader, and a wall clock set back', () => {
  it('is still said every report interval, and its gauge keeps counting', { timeout: 60_000 }, async () => {
    const { path, out, err, stepBack } = await clockBackChild(OPENER, { mainThreadToo: true });
    const lines = (): Line[] => out().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Line);

    // A reader holds a snapshot; another connection writes past the bound (64 KB).
    const reader = new BetterSqlite3(path, { readonly: true });
    const w = new BetterSqlite3(path);
    onTestFinished(() => {
      reader.close();
      w.close();
    });
    w.pragma('wal_autocheckpoint = 0');
    const fill = w.prepare("INSERT INTO quarantine (received_at, source, delivery_id, reason, headers, body) VALUES ('t', 's', 'd', 'r', '{}', ?)");
    fill.run(Buffer.alloc(10));
    reader.exec('BEGIN');
    reader.prepare('SELECT COUNT(*) FROM quarantine').get();
    for (let i = 0; i < 20; i++) fill.run(Buffer.alloc(20_000, 1));

    const reports = () => lines().filter((l) => l.blocked && l.blocked.since !== null).length;
    const gaugeAbove = (s: number) => lines().some((l) => (l.gauge ?? 0) > s);
    // Said, and counted, on the clock as it is.
    await waitFor(() => reports() >= 3 && gaugeAbove(0.2), 'three reports, the gauge above 0.2', 5_000);
    // Set back an hour: still said every 100 ms, and the gauge still counts (not 0).
    stepBack();
    await new Promise((r) => setTimeout(r, 300));
    const before = reports();
    const gaugesBefore = lines().filter((l) => l.gauge !== undefined).length;
    await waitFor(() => reports() >= before + 3, 'three more reports', 5_000);
    await waitFor(() => lines().filter((l) => l.gauge !== undefined).length >= gaugesBefore + 3, 'three more gauge lines', 5_000);
    expect(lines().filter((l) => l.gauge !== undefined).slice(gaugesBefore).every((l) => l.gauge! > 0.5)).toBe(true);
    expect(err()).toBe('');
  });
});
