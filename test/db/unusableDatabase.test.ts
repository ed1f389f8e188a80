import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { runTs } from '../helpers/childServer.js';
import { newSecret } from '../helpers/signing.js';
import { cli } from '../cli/helpers.js';

const dir = mkdtempSync(join(tmpdir(), 'unusable-db-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const API = { HIRING_API_URL: 'http://127.0.0.1:9', HIRING_API_KEY: 'sk-acme0001.sandboxAcmeKeyOne0000000000' };

/** Another program's SQLite file, in rollback-journal mode as most programs leave theirs. */
function otherProgramsDatabase(path: string): Buffer {
  const db = new BetterSqlite3(path);
  db.exec("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes (body) VALUES ('keep me')");
  db.close();
  return readFileSync(path);
}

async function serveOn(path: string): Promise<{ code: number | null; stderr: string }> {
  const child = runTs('src/main.ts', [], { ...API, WEBHOOK_SECRET: newSecret(), DATABASE_PATH: path, PORT: '0', HOST: '127.0.0.1' });
  const timer = setTimeout(() => child.proc.kill('SIGKILL'), 20_000);
  const { code } = await child.exited.finally(() => clearTimeout(timer));
  return { code, stderr: child.stderr.join('') };
}

describe('a file that is not a database this build may write', () => {
  it("another program's database: serve and migrate refuse it, saying so, and leave it byte for byte as it was", async () => {
    const path = join(dir, 'other.db');
    const before = otherProgramsDatabase(path);
    // It used to be migrated: the receiver's tables written into the other program's file (turned
    // into WAL mode), and served on; one with an `events` table of its own failed on migration 001
    // with its schema_migrations table and WAL mode already written.
    const served = await serveOn(path);
    expect(served.code).toBe(1);
    expect(served.stderr).toMatch(/DATABASE_PATH\): it is not the receiver's database but another program's: it has tables \(notes\) and no schema_migrations table/);
    expect(readFileSync(path).equals(before)).toBe(true);

    const migrated = await cli(['migrate', '--database', path]);
    expect(migrated.code).toBe(1);
    expect(migrated.stderr).toMatch(/it is not the receiver's database but another program's/);
    expect(readFileSync(path).equals(before)).toBe(true);

    // Not "schema version 0 ... run `migrate`", which would do the harm above.
    const status = await cli(['status', '--database', path]);
    expect(status.code).toBe(1);
    expect(status.stderr).toMatch(/another program's/);
    expect(status.stderr).not.toMatch(/run `migrate`/);
    expect(readFileSync(path).equals(before)).toBe(true);
  });

  it("another program's database with a schema_migrations table of its own (golang-migrate's, Rails'): refused, left as it was", async () => {
    // golang-migrate's table: (version, dirty). Its version 3 passed for a receiver database at 3:
    // serve turned the file into WAL mode and added compatible_from to that table before migration
    // 001 failed on its missing name column. Rails' text versions were called "written by a newer
    // version of the receiver".
    for (const [name, table, row] of [
      ['golang-migrate.db', 'CREATE TABLE schema_migrations (version uint64 NOT NULL PRIMARY KEY, dirty boolean NOT NULL)', 'INSERT INTO schema_migrations VALUES (3, 0)'],
      ['rails.db', 'CREATE TABLE schema_migrations (version varchar NOT NULL PRIMARY KEY)', "INSERT INTO schema_migrations VALUES ('20240105120000')"],
    ] as const) {
      const path = join(dir, name);
      const db = new BetterSqlite3(path);
      db.exec(`${table}; ${row}; CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT)`);
      db.close();
      const before = readFileSync(path);
      const served = await serveOn(path);
      expect(served.code).toBe(1);
      expect(served.stderr).toMatch(/it is not the receiver's database but another program's: it has tables \(schema_migrations, users\) and its schema_migrations table is not the receiver's/);
      expect(readFileSync(path).equals(before)).toBe(true);
      const status = await cli(['status', '--database', path]);
      expect(status.code).toBe(1);
      expect(status.stderr).toMatch(/another program's/);
      expect(readFileSync(path).equals(before)).toBe(true);
    }
  });

  it("a backup of a newer version's database (rollback-journal mode): refused before anything is written, the file left as it was", async () => {
    const path = join(dir, 'newer.db');
    expect((await cli(['migrate', '--database', path])).code).toBe(0);
    const db = new BetterSqlite3(path);
    db.exec("INSERT INTO schema_migrations (version, name, applied_at, compatible_from) VALUES (99, 'future', '2030-01-01T00:00:00.000Z', 99)");
    db.pragma('journal_mode = DELETE'); // as `backup` leaves its copy
    db.close();
    const before = readFileSync(path);
    // Both refused it, but only after switching it to WAL mode (header bytes 18 and 19 from 1 to 2).
    const served = await serveOn(path);
    expect(served.code).toBe(1);
    expect(served.stderr).toMatch(/schema version 99, but this build knows migrations up to \d+/);
    expect(readFileSync(path).equals(before)).toBe(true);
    const migrated = await cli(['migrate', '--database', path]);
    expect(migrated.code).toBe(1);
    expect(migrated.stderr).toMatch(/schema version 99/);
    expect(readFileSync(path).equals(before)).toBe(true);
  });

  it('an empty file is still a new database: migrate makes the receiver\'s schema in it', async () => {
    const path = join(dir, 'empty.db');
    rmSync(path, { force: true });
    new BetterSqlite3(path).close();
    const r = await cli(['migrate', '--database', path]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/applied migrations 1, 2,/);
  });
});
