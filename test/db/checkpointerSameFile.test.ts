import { existsSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import type { CheckpointProblem } from '../../src/db/checkpointer.js';
import { openDatabase } from '../../src/db/openDatabase.js';
import { tempDir } from '../helpers/receiver.js';

let cleanup = () => {};
afterEach(() => cleanup());

describe('the checkpointer thread', () => {
  it('leaves alone a file moved to the path before it opened it: nothing checkpointed into it, the opened file\'s -wal not deleted', async () => {
    const t = tempDir();
    cleanup = t.cleanup;
    const path = join(t.dir, 'r.db');
    const backup = join(t.dir, 'backup.db');
    // The live database: 3 rows, a backup of it, then 200 rows more that only the live one has.
    const seed = new BetterSqlite3(path);
    // schema_migrations makes it a receiver's file: another program's is refused at the open.
    seed.exec("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)");
    seed.exec("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT); CREATE INDEX t_v ON t (v); INSERT INTO t (v) VALUES ('a'), ('b'), ('c')");
    await seed.backup(backup);
    seed.prepare('INSERT INTO t (v) SELECT hex(randomblob(40)) FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200) SELECT i FROM n)').run();
    seed.close();

    const problems: CheckpointProblem[] = [];
    const database = openDatabase(path, { migrate: false, checkpointer: { intervalMs: 20 }, onCheckpointProblem: (p) => problems.push(p) });
    // The backup moved over the file at once (a restore under a starting receiver): the thread,
    // still booting, opens the path after this.
    renameSync(backup, path);
    // Commits of the opened (moved) file, into its -wal at the path.
    for (let i = 0; i < 20; i++) database.ingestSqlite.prepare("INSERT INTO t (v) VALUES ('late')").run();
    await database.close();

    // The opened file's -wal is still there (the receiver's stop sets it aside: DatabaseFileWatch).
    expect(existsSync(`${path}-wal`)).toBe(true);
    renameSync(`${path}-wal`, join(t.dir, 'old-wal'));
    rmSync(`${path}-shm`, { force: true });
    // The restored file alone is the backup as it was: none of the opened file's pages in it.
    const restored = new BetterSqlite3(path, { readonly: true });
    try {
      expect(restored.pragma('integrity_check', { simple: true })).toBe('ok');
      expect(restored.prepare('SELECT v FROM t ORDER BY k').pluck().all()).toEqual(['a', 'b', 'c']);
    } finally {
      restored.close();
    }
    // Said: the thread ended without a checkpoint.
    expect(problems).toContainEqual(expect.objectContaining({ stopped: true, message: expect.stringMatching(/no longer the one the receiver opened/) }));
  });
});
