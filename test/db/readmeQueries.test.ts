import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/childServer.js';
import { scratchDatabase } from '../helpers/database.js';

/** The statements of the README's "Example queries" block, each with the comment above it. */
function exampleQueries(): { title: string; sql: string }[] {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('### Example queries'));
  const block = /```sql\n([\s\S]*?)```/.exec(section)![1]!;
  return block
    .split(/;\s*\n/)
    .map((chunk) => chunk.trim())
    .filter((chunk) => chunk !== '')
    .map((chunk) => {
      const lines = chunk.split('\n');
      return { title: lines.filter((l) => l.startsWith('--')).join(' '), sql: lines.filter((l) => !l.startsWith('--')).join('\n') };
    });
}

describe("the README's example queries", () => {
  it('run against a database at the latest migration, and the one over an application orders its events by instant', () => {
    const db = scratchDatabase().sqlite;
    const queries = exampleQueries();
    expect(queries.length).toBeGreaterThanOrEqual(6);
    for (const q of queries) expect(() => db.prepare(q.sql).all(), q.title).not.toThrow();

    // created_at is kept as sent: an offset, a fractional second. The order is by instant.
    const insert = db.prepare(
      `INSERT INTO events (id, event_type, source, delivery_id, received_at, created_at, application_id, envelope)
       VALUES (?, 'application.status_changed', 'default', ?, '2026-11-01T17:00:00.000Z', ?, 'a7d1c3e0-...', '{}')`,
    );
    const link = db.prepare('INSERT INTO application_events (application_id, event_id) VALUES (?, ?)');
    for (const [id, createdAt] of [['e-late', '2026-11-01T15:21:00.500Z'], ['e-offset', '2026-11-01T16:10:00+01:00'], ['e-mid', '2026-11-01T15:21:00Z']]) {
      insert.run(id, `msg-${id}`, createdAt);
      link.run('a7d1c3e0-...', id);
    }
    const history = queries.find((q) => /one application/.test(q.title))!;
    expect((db.prepare(history.sql).all() as { id: string }[]).map((r) => r.id)).toEqual(['e-offset', 'e-mid', 'e-late']);
  });

  it('each reads through an index, not every row of a table (they grow for years: see "What grows")', () => {
    const db = scratchDatabase().sqlite;
    for (const q of exampleQueries()) {
      const plan = (db.prepare(`EXPLAIN QUERY PLAN ${q.sql}`).all() as { detail: string }[]).map((r) => r.detail).join(' | ');
      expect({ query: q.title, plan }).toEqual({ query: q.title, plan: expect.not.stringMatching(/\bSCAN (?!CONSTANT ROW)/) });
    }
  });
});
