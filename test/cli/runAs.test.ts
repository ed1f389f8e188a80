import { chmodSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/receiver.js';
import { cli } from './helpers.js';

// The Docker image starts as root with RUN_AS=node (src/cli/runAs.ts). Only root can run this.
const root = typeof process.getuid === 'function' && process.getuid() === 0;
const { dir, cleanup } = tempDir('run-as-');
afterAll(cleanup);

describe.skipIf(!root)('RUN_AS (the image starts as root, on a volume owned by root)', () => {
  it('makes the database folder and what root left in it the user\'s, then runs as that user', async () => {
    chmodSync(dir, 0o755);
    const folder = join(dir, 'volume');
    const db = join(folder, 'receiver.db');
    // A file root left there (as a CLI run as root before would have).
    const r0 = await cli(['migrate'], { DATABASE_PATH: db });
    expect(r0.code, r0.stderr).toBe(0);
    expect(statSync(db).uid).toBe(0);
    const r = await cli(['migrate', '--json'], { DATABASE_PATH: db, RUN_AS: 'nobody' });
    expect(r.code, r.stderr).toBe(0);
    expect(statSync(folder).uid).toBe(65534);
    expect(statSync(db).uid).toBe(65534);
    // It ran as nobody: a database it creates is nobody's from the start (only entries that
    // existed before are chowned).
    const fresh = join(dir, 'fresh', 'receiver.db');
    expect((await cli(['migrate'], { DATABASE_PATH: fresh, RUN_AS: 'nobody' })).code).toBe(0);
    expect(statSync(fresh).uid).toBe(65534);
  });

  it('a RUN_AS user that does not exist stops it with one line', async () => {
    const r = await cli(['status'], { DATABASE_PATH: join(dir, 'x.db'), RUN_AS: 'no-such-user' });
    expect(r).toMatchObject({ code: 1, stderr: 'fatal: RUN_AS: no user named "no-such-user" in /etc/passwd\n' });
  });
});
