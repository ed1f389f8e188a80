import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import { createStrandedReadSweep } from '../../src/handlers/fetchResult.js';
import type { ProcessingContext } from '../../src/handlers/ProcessingContext.js';
import { recordPrepared } from '../helpers/recordPrepared.js';
import { tempDir } from '../helpers/receiver.js';

let close = () => {};
afterEach(() => close());

describe('migration 011: the sweep for stranded reads starts from the events awaiting a result', () => {
  it('reads event_processing_awaiting, then each event\'s dead reads through jobs_event, not every dead read', async () => {
    const t = tempDir('stranded-sweep-');
    const sqlite = new BetterSqlite3(join(t.dir, 'r.db'));
    close = () => {
      sqlite.close();
      t.cleanup();
    };
    migrate(sqlite);
    const prepared = recordPrepared(sqlite);
    // Nothing stranded: the sweep reads its candidates and stops there.
    const sweep = createStrandedReadSweep({ sqlite } as ProcessingContext, async () => {});
    expect(await sweep()).toBe(0);
    expect(prepared).toHaveLength(1);
    const plan = (sqlite.prepare(`EXPLAIN QUERY PLAN ${prepared[0]!}`).all() as { detail: string }[]).map((r) => r.detail);
    expect(plan.slice(0, 3)).toEqual(['MATERIALIZE candidates', 'SCAN ep USING INDEX event_processing_awaiting', 'SEARCH j USING INDEX jobs_event (event_id=?)']);
    expect(plan.join(' | ')).not.toMatch(/jobs_kind_ready/);
  });
});
