import { copyFileSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { readMigrations } from '../../src/db/migrate.js';
import { cli } from './helpers.js';

const dir = mkdtempSync(join(tmpdir(), 'migrate-closes-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('migrate', () => {
  it('closes the database: the schema is in the file itself, no -wal or -shm is left beside it', async () => {
    const path = join(dir, 'receiver.db');
    const r = await cli(['migrate'], { DATABASE_PATH: path });
    expect(r.code, r.stderr).toBe(0);
    // The last connection to close checkpoints the WAL into the file and removes it. One left
    // open at exit left the whole schema in a -wal beside a 2 KB file.
    expect(existsSync(`${path}-wal`)).toBe(false);
    expect(existsSync(`${path}-shm`)).toBe(false);
    // The file alone (as a copy of it without its -wal would be) holds the migrated schema.
    const alone = join(dir, 'alone.db');
    copyFileSync(path, alone);
    const db = new BetterSqlite3(alone, { readonly: true });
    try {
      expect(db.prepare('SELECT MAX(version) FROM schema_migrations').pluck().get()).toBe(readMigrations().at(-1)!.version);
    } finally {
      db.close();
    }
  });
});
