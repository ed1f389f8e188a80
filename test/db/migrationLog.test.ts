import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { migrate, readMigrations } from '../../src/db/migrate.js';
import { idleReceiverEnv, runTs } from '../helpers/childServer.js';
import { tempDir } from '../helpers/receiver.js';
import { newSecret } from '../helpers/signing.js';

const { dir, cleanup } = tempDir('migration-log-');
afterAll(cleanup);

const all = readMigrations();

/** serve on `path` until it listens (bounded), then SIGTERM: its log lines. */
async function logOfStart(path: string): Promise<Array<Record<string, unknown>>> {
  const child = runTs('src/main.ts', [], idleReceiverEnv(path, newSecret()));
  const kill = setTimeout(() => child.proc.kill('SIGKILL'), 30_000);
  try {
    const deadline = Date.now() + 20_000;
    while (!child.stdout.join('').includes('receiver listening') && child.proc.exitCode === null && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
    }
    child.proc.kill('SIGTERM');
    expect(await child.exited).toEqual({ code: 0, signal: null });
  } finally {
    clearTimeout(kill);
  }
  return child.stdout
    .join('')
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe('the start says the migrations it applies to an existing database', () => {
  it('one line as each begins (the start serves nothing meanwhile), then `database migrated` with the time they took; a new database only the last', async () => {
    // A database an older version left at schema 7, with an event in it.
    const path = join(dir, 'at7.db');
    const old = new BetterSqlite3(path);
    migrate(old, all.filter((m) => m.version <= 7));
    old
      .prepare("INSERT INTO events (id, event_type, source, received_at, delivery_id, envelope) VALUES ('evt_1', 'application.created', 'default', '2026-01-01T00:00:00.000Z', 'msg_1', '{}')")
      .run();
    old.close();
    const pending = all.filter((m) => m.version > 7);
    const lines = await logOfStart(path);
    const msgs = lines.map((l) => l.msg);
    // Before: only `database migrated`, once they were all done, with no time.
    const applying = lines.filter((l) => String(l.msg).startsWith('applying migration'));
    expect(applying.map((l) => [l.migration, l.nth, l.pending])).toEqual(
      pending.map((m, i) => [`${String(m.version).padStart(3, '0')}_${m.name}`, i + 1, pending.length]),
    );
    const migrated = lines.find((l) => l.msg === 'database migrated')!;
    expect(migrated.migrations).toEqual(pending.map((m) => m.version));
    expect(typeof migrated.duration_ms).toBe('number');
    expect(msgs.indexOf('database migrated')).toBeGreaterThan(msgs.lastIndexOf(applying.at(-1)!.msg));

    // A new database (milliseconds): `database migrated` alone, no line per migration.
    const fresh = await logOfStart(join(dir, 'new.db'));
    expect(fresh.filter((l) => String(l.msg).startsWith('applying migration'))).toEqual([]);
    expect(fresh.find((l) => l.msg === 'database migrated')?.migrations).toEqual(all.map((m) => m.version));
  }, 60_000);
});
