import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { ackedIdsOf, missingEventIds, pastTolerance, rowsCheck } from '../../bench/lib/checks.js';
import { tempDir } from '../helpers/receiver.js';

let cleanup: (() => void) | undefined;
afterEach(() => {
  cleanup?.();
  cleanup = undefined;
});

describe("the bench's rows = 2xx check", () => {
  const base = { rows: 1_000, acked: 1_000, accepted: 1_000, unanswered: 0 };

  it('holds when the rows are the 2xx answers, up to the requests unanswered at the stop', () => {
    expect(rowsCheck(base)).toBe('ok');
    expect(rowsCheck({ ...base, rows: 1_050, unanswered: 50 })).toBe('ok');
    expect(rowsCheck({ ...base, rows: 1_051, unanswered: 50 })).toBe('FAILED');
    expect(rowsCheck({ ...base, rows: 999 })).toBe('FAILED');
  });

  it("fails when a 2xx did not say accepted, or the generator's pool ran out", () => {
    expect(rowsCheck({ ...base, accepted: 999 })).toBe('FAILED');
    expect(rowsCheck({ ...base, exhausted: 1 })).toBe('FAILED');
  });

  it('by id: one lost acknowledged event and one committed unanswered request do not cancel out', () => {
    // The counts agree (1,000 rows, 1,000 2xx, 1 unanswered), the ids do not.
    const counts = { ...base, unanswered: 1 };
    expect(rowsCheck(counts)).toBe('ok');
    expect(rowsCheck({ ...counts, byId: { listed: 1_000, missing: 1 } })).toBe('FAILED');
    expect(rowsCheck({ ...counts, byId: { listed: 1_000, missing: 0 } })).toBe('ok');
    // An ack file that lists fewer ids than the 2xx counted is no proof.
    expect(rowsCheck({ ...counts, byId: { listed: 999, missing: 0 } })).toBe('FAILED');
  });

  it('reads the ids of an ack file and counts those missing from a real events table', () => {
    const ids = ackedIdsOf('evt_a 1700000000000.123 application.created warmup\nevt_b 1700000000001.000 interview.completed\n\nevt_c 1700000000002.500 application.created\n');
    expect(ids).toEqual(['evt_a', 'evt_b', 'evt_c']);
    const t = tempDir('bench-checks-');
    cleanup = t.cleanup;
    const db = new BetterSqlite3(join(t.dir, 'r.db'));
    try {
      db.exec('CREATE TABLE events (id TEXT PRIMARY KEY)');
      db.prepare('INSERT INTO events (id) VALUES (?), (?)').run('evt_a', 'evt_c');
      expect(missingEventIds(db, ids)).toBe(1);
      expect(missingEventIds(db, ['evt_a', 'evt_c'])).toBe(0);
    } finally {
      db.close();
    }
  });
});

describe("a pre-signed pool's age against the signature tolerance", () => {
  it('a period is refused when its last deliveries would be older than the tolerance', () => {
    expect(pastTolerance(30, 15, 300)).toBe(false);
    expect(pastTolerance(60, 239, 300)).toBe(false);
    expect(pastTolerance(60, 240, 300)).toBe(true);
    expect(pastTolerance(290, 15, 300)).toBe(true);
  });
});
