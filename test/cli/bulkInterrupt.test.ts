import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { runTs } from '../helpers/childServer.js';
import { tempDir } from '../helpers/receiver.js';
import { deadDeliveries, until, withMigratedDatabase } from './helpers.js';

const { dir, cleanup } = tempDir('receiver-cli-interrupt-');
afterAll(cleanup);

const old = '2020-01-01T00:00:00.000Z';

/**
 * Runs the CLI with `args` (progress lines at every batch), and once it has committed a batch
 * (its first progress line), sends it `signal` while this test holds the write lock: the command
 * cannot commit another batch before the signal is sent, so it cannot finish first however busy
 * the machine is. The lock is let go at once: the batch in flight (maybe waiting for the lock)
 * commits, then the command stops. Bounded: killed after 25 s.
 */
async function interruptAfterFirstBatch(w: BetterSqlite3.Database, args: string[], env: Record<string, string>, signal: NodeJS.Signals, after?: string) {
  const child = runTs('src/cli/main.ts', [...args, '--progress'], { ...env, CLI_PROGRESS_INTERVAL_MS: '0' });
  const timer = setTimeout(() => child.proc.kill('SIGKILL'), 25_000);
  try {
    const seen = (text: string) => child.stderr.join('').includes(text);
    await until(() => (after === undefined ? seen(' so far') || seen(' of ') : seen(after)), after ?? 'a first batch committed');
    w.exec('BEGIN IMMEDIATE');
    try {
      child.proc.kill(signal);
    } finally {
      w.exec('ROLLBACK');
    }
    const { code, signal: killedBy } = await child.exited;
    const stderr = child.stderr.join('');
    // The last line: the progress lines come before it.
    return { code, killedBy, stdout: child.stdout.join(''), last: stderr.trimEnd().split('\n').at(-1)! };
  } finally {
    clearTimeout(timer);
  }
}

const countOf = (w: BetterSqlite3.Database, query: string) => w.prepare(query).pluck().get() as number;
/** "12,500" in the line as a number. */
const numberIn = (m: RegExpMatchArray | null) => Number(m![1]!.replace(/,/g, ''));

describe('a bulk command stopped by SIGINT or SIGTERM says what it committed', { timeout: 60_000 }, () => {
  it('prune --json: the batch in flight commits, a line says how many were deleted, JSON says interrupted, exit 143', async () => {
    await withMigratedDatabase(join(dir, 'prune.db'), async (path, w) => {
      const total = 20_000;
      const insert = w.prepare(
        `INSERT INTO jobs (kind, payload, event_id, source, state, run_at, attempts, max_attempts, created_at, updated_at, finished_at)
         VALUES ('sink:crm', '{}', ?, 'sink:crm', 'done', ?, 1, 25, ?, ?, ?)`,
      );
      w.transaction(() => {
        for (let i = 0; i < total; i++) insert.run(`evt-${i}`, old, old, old, old);
      })();
      // `timeout -s TERM` of a cron job: ended at once, it printed nothing (40,000 of 100,000 deleted, unsaid).
      const r = await interruptAfterFirstBatch(w, ['prune', '--older-than', '1d', '--json'], { DATABASE_PATH: path }, 'SIGTERM');
      expect({ code: r.code, killedBy: r.killedBy }).toEqual({ code: 143, killedBy: null });
      const m = r.last.match(/^prune: stopped part-way by SIGTERM: ([\d,]+) finished jobs deleted before it \(they stay deleted\); run it again for the rest$/);
      expect(m, r.last).not.toBeNull();
      const deleted = numberIn(m);
      expect(deleted).toBeGreaterThan(0);
      expect(deleted).toBeLessThan(total);
      // Exactly what the line says is gone: each batch whole.
      expect(countOf(w, 'SELECT count(*) FROM jobs')).toBe(total - deleted);
      expect(JSON.parse(r.stdout)).toMatchObject({ dry_run: false, jobs: deleted, interrupted: true });
    });
  });

  it('dead-letters retry --json: Ctrl-C says how many were queued again (each with its delivery row), exit 130', async () => {
    await withMigratedDatabase(join(dir, 'retry.db'), async (path, w) => {
      const total = 20_000;
      deadDeliveries(w, total);
      const r = await interruptAfterFirstBatch(w, ['dead-letters', 'retry', '--all', '--json'], { DATABASE_PATH: path }, 'SIGINT');
      expect({ code: r.code, killedBy: r.killedBy }).toEqual({ code: 130, killedBy: null });
      const m = r.last.match(/^dead-letters retry: stopped part-way by SIGINT: ([\d,]+) dead-lettered jobs queued again before it \(they stay queued; the rest stay dead letters\); run it again for the rest$/);
      expect(m, r.last).not.toBeNull();
      const retried = numberIn(m);
      expect(retried).toBeGreaterThan(0);
      expect(retried).toBeLessThan(total);
      expect(countOf(w, "SELECT count(*) FROM jobs WHERE state = 'pending'")).toBe(retried);
      expect(countOf(w, "SELECT count(*) FROM jobs WHERE state = 'dead'")).toBe(total - retried);
      expect(countOf(w, "SELECT count(*) FROM deliveries WHERE state = 'pending'")).toBe(retried);
      expect(JSON.parse(r.stdout)).toEqual({ retried, interrupted: true });
    });
  });

  it("dead-letters retry: a SIGTERM during its max_attempts step is said, with the jobs queued again, exit 143 (it was taken and ignored: exit 0)", async () => {
    await withMigratedDatabase(join(dir, 'retry-late.db'), async (path, w) => {
      deadDeliveries(w, 3);
      // Deliveries already waiting, queued with another max_attempts than the configuration's now: 120 batches.
      const waiting = 60_000;
      const job = w.prepare(
        `INSERT INTO jobs (kind, payload, event_id, source, state, run_at, attempts, max_attempts, created_at, updated_at)
         VALUES ('sink:crm', '{}', ?, 'sink:crm', 'pending', '2099-01-01T00:00:00.000Z', 1, 25, ?, ?)`,
      );
      w.transaction(() => {
        for (let i = 0; i < waiting; i++) job.run(`evt-waiting-${i}`, old, old);
      })();
      const config = join(dir, 'retry-late.json');
      writeFileSync(config, JSON.stringify({ sinks: [{ name: 'crm', type: 'http', url: 'https://crm.example/hook', secret: { env: 'CRM_SINK_SECRET' }, max_attempts: 50 }] }));
      const r = await interruptAfterFirstBatch(w, ['dead-letters', 'retry', '--all'], { DATABASE_PATH: path, CONFIG_FILE: config }, 'SIGTERM', 'max_attempts of waiting deliveries');
      expect({ code: r.code, killedBy: r.killedBy, stdout: r.stdout }).toEqual({ code: 143, killedBy: null, stdout: '' });
      expect(r.last).toBe(
        "dead-letters retry: 3 dead-lettered jobs queued again (they stay queued); SIGTERM came while it gave the other waiting deliveries their sink's max_attempts as configured now (those it did not reach get it at the next start of the workers)",
      );
      expect(countOf(w, "SELECT count(*) FROM jobs WHERE state = 'pending'")).toBe(waiting + 3);
      // Stopped before its last batch: some waiting deliveries keep the old max_attempts for the next start.
      expect(countOf(w, 'SELECT count(*) FROM jobs WHERE max_attempts = 25')).toBeGreaterThan(0);
    });
  });

  it('sinks send-now --json: SIGINT says how many were made due, and that the sink a 410 disabled is enabled, exit 130', async () => {
    await withMigratedDatabase(join(dir, 'send-now.db'), async (path, w) => {
      const total = 20_000;
      const later = '2099-01-01T00:00:00.000Z';
      const job = w.prepare(
        `INSERT INTO jobs (kind, payload, event_id, source, state, run_at, attempts, max_attempts, created_at, updated_at)
         VALUES ('sink:crm', '{}', ?, 'sink:crm', 'pending', ?, 3, 25, ?, ?)`,
      );
      w.transaction(() => {
        for (let i = 0; i < total; i++) job.run(`evt-${i}`, later, old, old);
      })();
      w.prepare("INSERT INTO sink_state (sink, disabled_at, disabled_reason, disabled_status, updated_at) VALUES ('crm', ?, '410 Gone', 410, ?)").run(old, old);
      const r = await interruptAfterFirstBatch(w, ['sinks', 'send-now', 'crm', '--json'], { DATABASE_PATH: path }, 'SIGINT');
      expect({ code: r.code, killedBy: r.killedBy }).toEqual({ code: 130, killedBy: null });
      const m = r.last.match(
        /^sinks send-now: stopped part-way by SIGINT: ([\d,]+) deliveries of sink crm made due before it \(a running receiver sends them\); run it again for the rest; it was disabled since 2020-01-01T00:00:00.000Z and is enabled$/,
      );
      expect(m, r.last).not.toBeNull();
      const due = numberIn(m);
      expect(due).toBeGreaterThan(0);
      expect(due).toBeLessThan(total);
      expect(countOf(w, `SELECT count(*) FROM jobs WHERE run_at < '2099'`)).toBe(due);
      expect(countOf(w, "SELECT count(*) FROM sink_state WHERE sink = 'crm' AND disabled_at IS NULL")).toBe(1);
      expect(JSON.parse(r.stdout)).toEqual({ dry_run: false, sink: 'crm', made_due: due, pending: total, was_disabled: { since: old, reason: '410 Gone' }, interrupted: true });
    });
  });

  it('dead-letters discard: SIGTERM says how many were discarded, nothing on stdout, exit 143', async () => {
    await withMigratedDatabase(join(dir, 'discard.db'), async (path, w) => {
      const total = 20_000;
      deadDeliveries(w, total);
      const r = await interruptAfterFirstBatch(w, ['dead-letters', 'discard', '--all'], { DATABASE_PATH: path }, 'SIGTERM');
      expect({ code: r.code, killedBy: r.killedBy, stdout: r.stdout }).toEqual({ code: 143, killedBy: null, stdout: '' });
      const m = r.last.match(/^dead-letters discard: stopped part-way by SIGTERM: ([\d,]+) dead letters discarded before it \(they stay deleted; the rest stay dead letters\); run it again for the rest$/);
      expect(m, r.last).not.toBeNull();
      const discarded = numberIn(m);
      expect(discarded).toBeGreaterThan(0);
      expect(discarded).toBeLessThan(total);
      expect(countOf(w, 'SELECT count(*) FROM jobs')).toBe(total - discarded);
    });
  });
});
