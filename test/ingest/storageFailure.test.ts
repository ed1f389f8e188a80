import BetterSqlite3 from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { envelope, newSecret, postSigned } from '../helpers/signing.js';
import { startReceiver, type TestReceiver } from '../helpers/receiver.js';

const secret = newSecret();
let r: TestReceiver;
beforeEach(async () => {
  r = await startReceiver({ WORKER_CONCURRENCY: '0', WEBHOOK_SECRET: secret, WRITE_TIMEOUT_MS: '300' });
});
afterEach(() => r.close());

const post = (body: string) => postSigned(r.url, secret, body);
const count = (sql: string, ...p: unknown[]) => r.app.database.ingestSqlite.prepare(sql).pluck().get(...p) as number;

describe('a write that cannot commit is answered 503, never 2xx', () => {
  it('disk full (max_page_count): 503, nothing half-written, then recovery', async () => {
    const ingest = r.app.database.ingestSqlite;
    const pages = ingest.pragma('page_count', { simple: true }) as number;
    ingest.pragma(`max_page_count = ${pages}`);
    // Large bodies need new pages, so the insert fails with SQLITE_FULL.
    const env = envelope({ padding: 'p'.repeat(20_000) });
    const res = await post(JSON.stringify(env));
    expect(res.status).toBe(503);
    // Retry-After: the sender is told when to try again (the README's promise for every 503).
    expect(res.headers.get('retry-after')).toBe('5');
    expect(await res.json()).toMatchObject({ error: 'storage_unavailable' });
    expect(count('SELECT COUNT(*) FROM events WHERE id = ?', env.id)).toBe(0);
    expect(await (await fetch(`${r.url}/metrics`)).text()).toMatch(/receiver_storage_errors_total\{reason="SQLITE_FULL"\} 1/);
    // Not ready meanwhile, saying why: a probe that writes nothing would pass on a full disk.
    const notReady = await fetch(`${r.url}/readyz`);
    expect(notReady.status).toBe(503);
    expect(((await notReady.json()) as { checks: { writable: string } }).checks.writable).toMatch(/^no \(the last delivery's commit failed: SQLITE_FULL, \d+ s ago\)$/);

    ingest.pragma('max_page_count = 1073741823');
    const retry = await post(JSON.stringify(env));
    expect(retry.status).toBe(200);
    // A commit clears it at once.
    expect((await fetch(`${r.url}/readyz`)).status).toBe(200);
    // Stored once, and past the processing cursor: processing will take it.
    expect(count('SELECT COUNT(*) FROM events WHERE id = ? AND rowid > (SELECT last_event_rowid FROM processing_cursor)', env.id)).toBe(1);
  });

  it('write lock held by another connection past the bound: 503; released: the next delivery succeeds', async () => {
    const other = new BetterSqlite3(r.dbPath);
    try {
      other.exec('BEGIN IMMEDIATE');
      const env = envelope();
      const started = Date.now();
      const res = await post(JSON.stringify(env));
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('5');
      expect(Date.now() - started).toBeGreaterThanOrEqual(250);
      // The answer's log line says why, and of which event.
      expect(r.logs.lines.find((l) => l.outcome === 'unavailable' && l.status === 503)).toMatchObject({ storage_error: 'lock_timeout', event_id: env.id, event_type: env.event_type });
      // The server kept serving other requests while it waited.
      expect((await fetch(`${r.url}/healthz`)).status).toBe(200);
      other.exec('ROLLBACK');
      expect(count('SELECT COUNT(*) FROM events WHERE id = ?', env.id)).toBe(0);
      const retry = await post(JSON.stringify(env));
      expect(retry.status).toBe(200);
      expect(count('SELECT COUNT(*) FROM events WHERE id = ?', env.id)).toBe(1);
    } finally {
      other.close();
    }
  });

  it('a lock released within the bound delays the answer but the delivery is stored', async () => {
    const other = new BetterSqlite3(r.dbPath);
    try {
      other.exec('BEGIN IMMEDIATE');
      const env = envelope();
      const pending = post(JSON.stringify(env));
      setTimeout(() => other.exec('ROLLBACK'), 100);
      const res = await pending;
      expect(res.status).toBe(200);
      expect(count('SELECT COUNT(*) FROM events WHERE id = ?', env.id)).toBe(1);
    } finally {
      other.close();
    }
  });
});
