import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { jobSeeder } from '../helpers/jobs.js';
import { tempDir } from '../helpers/receiver.js';
import { cli, withMigratedDatabase } from './helpers.js';

const { dir, cleanup } = tempDir('receiver-cli-bounds-');
afterAll(cleanup);

/** A settled event stored at `receivedAt`, of `type` from `source`. */
function settled(w: BetterSqlite3.Database, id: string, receivedAt: string, type = 'application.created', source = 'default'): void {
  w.prepare(`INSERT INTO events (id, event_type, source, received_at, delivery_id, envelope) VALUES (?, ?, ?, ?, ?, '{}')`).run(id, type, source, receivedAt, `msg-${id}`);
  w.prepare(`INSERT INTO event_processing (event_id, state, settled_at, updated_at) VALUES (?, 'settled', ?, ?)`).run(id, receivedAt, receivedAt);
}

/** A CONFIG_FILE with these sinks (file sinks into the test's folder unless given a path). */
function config(name: string, sinks: Record<string, unknown>[]): string {
  const path = join(dir, `${name}.json`);
  writeFileSync(path, JSON.stringify({ sinks: sinks.map((s) => ({ type: 'file', path: join(dir, `${name}-${String(s.name)}.ndjson`), ...s })) }));
  return path;
}

const dryRun = async (args: string[], env: Record<string, string>) => {
  const r = await cli(['replay', ...args, '--dry-run', '--json'], env);
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as { selected: number; sinks: Record<string, { queued: number; not_wanted: number }> };
};

describe('the bounds of what the operator commands select', { timeout: 60_000 }, () => {
  it('replay --until is "received before": an event received at exactly that time is left out; --since takes it', async () => {
    await withMigratedDatabase(join(dir, 'until.db'), async (path, w) => {
      settled(w, 'evt-before', '2026-11-20T09:59:59.999Z');
      settled(w, 'evt-at', '2026-11-20T10:00:00.000Z');
      const env = { DATABASE_PATH: path };
      expect((await dryRun(['--until', '2026-11-20T10:00:00Z'], env)).selected).toBe(1);
      expect((await dryRun(['--since', '2026-11-20T10:00:00Z'], env)).selected).toBe(1);
    });
  });

  it('replay --missing takes a sink\'s events ["*"] as every type, and leaves out the sources the sink does not take', async () => {
    await withMigratedDatabase(join(dir, 'missing.db'), async (path, w) => {
      settled(w, 'evt-default', '2026-11-20T10:00:00.000Z', 'application.created', 'default');
      settled(w, 'evt-other', '2026-11-20T10:00:01.000Z', 'insights.completed', 'other');
      const env = { DATABASE_PATH: path, CONFIG_FILE: config('missing', [{ name: 'everything', events: ['*'] }, { name: 'mine', sources: ['default'] }]) };
      // Neither has a delivery record of either event: `everything` is missing both.
      expect(await dryRun(['--sink', 'everything', '--missing'], env)).toMatchObject({ selected: 2, sinks: { everything: { queued: 2, not_wanted: 0 } } });
      // `mine` takes only the default source's: the other event is not one it is missing.
      expect(await dryRun(['--sink', 'mine', '--missing'], env)).toMatchObject({ selected: 1, sinks: { mine: { queued: 1, not_wanted: 0 } } });
    });
  });

  it('replay with no selection at all is bad usage (exit 2): every stored event takes --all; an --after at --until is an empty window', async () => {
    await withMigratedDatabase(join(dir, 'no-selection.db'), async (path, w) => {
      settled(w, 'evt-1', '2026-11-20T10:00:00.000Z');
      const env = { DATABASE_PATH: path };
      const bare = await cli(['replay'], env);
      expect({ code: bare.code, stdout: bare.stdout }).toEqual({ code: 2, stdout: '' });
      expect(bare.stderr).toMatch(/^error: choose events with --id/);
      const sinkOnly = await cli(['replay', '--sink', 'archive'], { ...env, CONFIG_FILE: config('no-selection', [{ name: 'archive' }]) });
      expect({ code: sinkOnly.code, stdout: sinkOnly.stdout }).toEqual({ code: 2, stdout: '' });
      expect(w.prepare("SELECT count(*) FROM jobs").pluck().get()).toBe(0);
      const empty = await cli(['replay', '--after', '2026-11-20T10:00:00Z/evt-0', '--until', '2026-11-20T10:00:00Z'], env);
      expect({ code: empty.code, stdout: empty.stdout }).toEqual({ code: 2, stdout: '' });
      expect(empty.stderr).toMatch(/--after \(received at 2026-11-20T10:00:00.000Z\) must be before --until/);
    });
  });

  it('sinks enable of an unknown name names the one sink configured (exit 2)', async () => {
    await withMigratedDatabase(join(dir, 'one-sink.db'), async (path) => {
      const r = await cli(['sinks', 'enable', 'archiv'], { DATABASE_PATH: path, CONFIG_FILE: config('one-sink', [{ name: 'archive' }]) });
      expect({ code: r.code, stdout: r.stdout }).toEqual({ code: 2, stdout: '' });
      expect(r.stderr).toMatch(/no sink named "archiv" \(known: archive\)/);
    });
  });

  it('an integer option past its upper bound is bad usage (exit 2), naming the range', async () => {
    const r = await cli(['replay', '--all', '--wait', '--timeout', '86401'], { DATABASE_PATH: join(dir, 'never-made.db') });
    expect({ code: r.code, stdout: r.stdout }).toEqual({ code: 2, stdout: '' });
    expect(r.stderr).toMatch(/--timeout.*expected 1 to 86400, got 86401/);
  });

  it('prune --older-than keeps a job finished more recently than that, and takes 1h, the least it allows', async () => {
    await withMigratedDatabase(join(dir, 'prune.db'), async (path, w) => {
      const insert = jobSeeder(w);
      const ago = (days: number) => new Date(Date.now() - days * 86_400_000).toISOString();
      insert({ kind: 'sink:a', event_id: 'eight-days', state: 'done', run_at: ago(8), attempts: 1, max_attempts: 3, finished_at: ago(8) });
      insert({ kind: 'sink:a', event_id: 'five-days', state: 'done', run_at: ago(5), attempts: 1, max_attempts: 3, finished_at: ago(5) });
      const pruned = await cli(['prune', '--older-than', '7d', '--json'], { DATABASE_PATH: path });
      expect(pruned.code, pruned.stderr).toBe(0);
      expect(JSON.parse(pruned.stdout)).toMatchObject({ dry_run: false, jobs: 1 });
      expect(w.prepare('SELECT event_id FROM jobs').pluck().all()).toEqual(['five-days']);
      const hour = await cli(['prune', '--older-than', '1h', '--dry-run', '--json'], { DATABASE_PATH: path });
      expect(hour.code, hour.stderr).toBe(0);
      expect(JSON.parse(hour.stdout)).toMatchObject({ dry_run: true, jobs: 1 });
    });
  });

  it('status names the oldest pending job as the one queued first, not the newest', async () => {
    await withMigratedDatabase(join(dir, 'oldest.db'), async (path, w) => {
      const insert = jobSeeder(w);
      const ago = (hours: number) => new Date(Date.now() - hours * 3_600_000).toISOString();
      insert({ kind: 'sink:a', event_id: 'evt-newer', state: 'pending', run_at: ago(1), max_attempts: 3 });
      insert({ kind: 'sink:a', event_id: 'evt-older', state: 'pending', run_at: ago(5), max_attempts: 3 });
      const r = await cli(['status', '--json'], { DATABASE_PATH: path });
      expect(r.code, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout).oldest_pending_job).toMatchObject({ event_id: 'evt-older', kind: 'sink:a' });
    });
  });

  it('dead-letters list --limit n lists n dead letters, the latest first', async () => {
    await withMigratedDatabase(join(dir, 'list-limit.db'), async (path, w) => {
      const insert = jobSeeder(w);
      for (const [event, at] of [['evt-old', '2026-11-20T10:00:00.000Z'], ['evt-new', '2026-11-20T11:00:00.000Z']] as const) {
        insert({ kind: 'sink:crm', event_id: event, state: 'dead', run_at: at, attempts: 3, max_attempts: 3, last_error: 'HTTP 503', finished_at: at });
      }
      const r = await cli(['dead-letters', 'list', '--limit', '1', '--json'], { DATABASE_PATH: path });
      expect(r.code, r.stderr).toBe(0);
      expect((JSON.parse(r.stdout) as { event_id: string }[]).map((d) => d.event_id)).toEqual(['evt-new']);
    });
  });

  it('dead-letters retry --all (no --kind) also gives the retried sink deliveries their sink\'s max_attempts as configured now', async () => {
    await withMigratedDatabase(join(dir, 'retry-all.db'), async (path, w) => {
      const at = new Date().toISOString();
      const id = jobSeeder(w)({
        kind: 'sink:crm', payload: '{"event_id":"evt-m1","sink":"crm"}', event_id: 'evt-m1', state: 'dead', run_at: at, attempts: 3, max_attempts: 3, last_error: 'HTTP 503', finished_at: at,
      });
      w.prepare(
        `INSERT INTO deliveries (event_id, sink, message_id, state, attempts, last_status_code, last_error, last_attempt_at, queued_at, created_at, updated_at)
         VALUES ('evt-m1', 'crm', 'msg_m1', 'dead', 3, 503, 'HTTP 503', ?, ?, ?, ?)`,
      ).run(at, at, at, at);
      const env = { DATABASE_PATH: path, CONFIG_FILE: config('retry-all', [{ name: 'crm', max_attempts: 50 }]) };
      const retry = await cli(['dead-letters', 'retry', '--all'], env);
      expect({ code: retry.code, stderr: retry.stderr }).toEqual({ code: 0, stderr: '' });
      expect(w.prepare('SELECT state, attempts, max_attempts FROM jobs WHERE id = ?').get(id)).toEqual({ state: 'pending', attempts: 0, max_attempts: 50 });
      // Its delivery starts a new cycle too: pending, no attempt of it made yet, no error.
      expect(w.prepare("SELECT state, attempts, last_error FROM deliveries WHERE event_id = 'evt-m1'").get()).toEqual({ state: 'pending', attempts: 0, last_error: null });
    });
  });
});
