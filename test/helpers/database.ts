import { join } from 'node:path';
import { onTestFinished } from 'vitest';
import { openDatabase, type OpenDatabase } from '../../src/db/openDatabase.js';
import { tempDir } from './receiver.js';

/** A migrated database in a temp dir of its own, closed and removed when the test ends. */
export function scratchDatabase(opts?: Parameters<typeof openDatabase>[1]): OpenDatabase {
  const t = tempDir();
  const database = openDatabase(join(t.dir, 'r.db'), opts);
  onTestFinished(async () => {
    await database.close();
    t.cleanup();
  });
  return database;
}
