import { statSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openDatabase, type OpenDatabase } from '../../src/db/openDatabase.js';
import { tempDir } from '../helpers/receiver.js';

let database: OpenDatabase | undefined;
let cleanup = () => {};
afterEach(async () => {
  await database?.close();
  database = undefined;
  cleanup();
});

describe('openDatabase', () => {
  it('acknowledges through a FULL connection and processes through a NORMAL one, both in WAL mode', () => {
    const t = tempDir();
    cleanup = t.cleanup;
    database = openDatabase(join(t.dir, 'sub', 'r.db'));
    expect(database.ingestSqlite.pragma('synchronous', { simple: true })).toBe(2);
    expect(database.sqlite.pragma('synchronous', { simple: true })).toBe(1);
    expect(database.ingestSqlite.pragma('journal_mode', { simple: true })).toBe('wal');
  });

  it('checkpoints the WAL on a worker thread instead of inside commits', async () => {
    const t = tempDir();
    cleanup = t.cleanup;
    const path = join(t.dir, 'r.db');
    database = openDatabase(path, { checkpointer: true });
    const ingest = database.ingestSqlite;
    expect(ingest.pragma('wal_autocheckpoint', { simple: true })).toBe(0);
    const before = statSync(path).size;
    const insert = ingest.prepare(
      "INSERT INTO quarantine (received_at, source, delivery_id, reason, headers, body) VALUES ('t', 's', 'd', 'r', '{}', ?)",
    );
    ingest.transaction(() => {
      for (let i = 0; i < 200; i++) insert.run(Buffer.alloc(4096, i));
    })();
    // The commit itself did not copy pages into the main file; the checkpointer does, within ~0.5 s.
    expect(statSync(path).size).toBe(before);
    const deadline = Date.now() + 5000;
    while (statSync(path).size === before && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(statSync(path).size).toBeGreaterThan(before + 200 * 4096);
  });
});
