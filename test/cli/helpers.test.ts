import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/receiver.js';
import { whileCommitting } from './helpers.js';

// whileCommitting waited for its writer's first commits with no deadline of its own: a writer that
// could not commit left a test hanging until the test timeout, with no word of what it waited for.
describe('whileCommitting', { timeout: 10_000 }, () => {
  it('fails within its deadline, saying what it waited for, while a lock held on the database keeps its writer from committing', async () => {
    const { dir, cleanup } = tempDir('while-committing-');
    const path = join(dir, 'locked.db');
    const holder = new BetterSqlite3(path);
    try {
      holder.exec('CREATE TABLE t (v TEXT)');
      // The writer's first statement waits on this lock (for better-sqlite3's 5 s busy timeout).
      holder.exec('BEGIN EXCLUSIVE');
      let ran = false;
      const started = Date.now();
      await expect(
        whileCommitting(path, 10, async () => {
          ran = true;
        }, 1_000),
      ).rejects.toThrow(`whileCommitting: the writer had not made its first 50 commits to ${path} after 1000 ms (a lock held on the database, or a writer stuck starting)`);
      expect(Date.now() - started).toBeLessThan(4_000);
      expect(ran).toBe(false);
    } finally {
      holder.close();
      cleanup();
    }
  });

  it('fails at once, with the exit code, when its writer ends before committing (a database it cannot open)', async () => {
    const { dir, cleanup } = tempDir('while-committing-');
    const path = join(dir, 'no-such-folder', 'x.db');
    try {
      let ran = false;
      await expect(
        whileCommitting(path, 10, async () => {
          ran = true;
        }),
      ).rejects.toThrow(`whileCommitting: the writer ended (exit code 1, signal null) before its first 50 commits to ${path}`);
      expect(ran).toBe(false);
    } finally {
      cleanup();
    }
  });
});
