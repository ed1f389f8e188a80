import { mkdirSync, readdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort, runTs, waitForHttp, type Child } from '../helpers/childServer.js';
import { tempDir } from '../helpers/receiver.js';
import { waitFor } from '../helpers/waitFor.js';
import { envelope, newSecret, postSigned } from '../helpers/signing.js';
import { openDatabase } from '../../src/db/openDatabase.js';

const { dir, cleanup } = tempDir('receiver-replaced-');
afterAll(cleanup);

const API = { HIRING_API_URL: 'http://127.0.0.1:9', HIRING_API_KEY: 'sk-test.unused' };

/** `node src/main.ts` on `path`, listening on 127.0.0.1; stopped by SIGTERM (SIGKILL past a bound). */
async function receiver(path: string, secret: string, extra: Record<string, string> = {}) {
  const port = await freePort();
  const child = runTs('src/main.ts', [], { ...API, WEBHOOK_SECRET: secret, DATABASE_PATH: path, PORT: String(port), HOST: '127.0.0.1', ...extra });
  const url = `http://127.0.0.1:${port}`;
  await waitForHttp(`${url}/healthz`, undefined, child);
  return { child, url, stop: () => stopChild(child) };
}

async function stopChild(child: Child) {
  child.proc.kill('SIGTERM');
  const timer = setTimeout(() => child.proc.kill('SIGKILL'), 15_000);
  return child.exited.finally(() => clearTimeout(timer));
}

/** Posts `n` new events; the ids of those answered 2xx, and every status. */
async function deliver(url: string, secret: string, n: number) {
  const acked: string[] = [];
  const answers: { status: number; retryAfter: string | null; body: { error?: string; message?: string } }[] = [];
  for (let i = 0; i < n; i++) {
    const e = envelope();
    const res = await postSigned(url, secret, JSON.stringify(e));
    answers.push({ status: res.status, retryAfter: res.headers.get('retry-after'), body: (await res.json()) as { error?: string } });
    if (res.ok) acked.push(e.id as string);
  }
  return { acked, answers };
}

const REPLACED_LINE = /the database file is no longer the one this process opened/;

/** After the replacement: refused with 503 database_replaced, never 2xx, and /readyz says why. */
async function expectRefused(url: string, secret: string, child: Child) {
  const after = await deliver(url, secret, 4);
  expect(after.acked).toEqual([]);
  for (const a of after.answers) {
    expect(a).toMatchObject({ status: 503, retryAfter: '5', body: { error: 'database_replaced' } });
    expect(a.body.message).toMatch(/deleted or replaced.*restarted/);
  }
  const ready = await fetch(`${url}/readyz`);
  expect(ready.status).toBe(503);
  expect(((await ready.json()) as { checks: { database: string } }).checks.database).toMatch(/^replaced \(/);
  // Logged before the first 503 was answered, but pino writes stdout asynchronously, on another
  // pipe than the answers: it may reach this process after them (seen under load).
  await waitFor(() => REPLACED_LINE.test(child.stdout.join('')), 'the error line', 15_000);
  const logs = child.stdout.join('');
  // Said once, naming what to do, whatever the number of deliveries refused.
  expect(logs.match(new RegExp(REPLACED_LINE, 'g'))).toHaveLength(1);
  expect(logs).toMatch(/Restart the receiver/);
}

describe('the database file deleted or replaced under a running receiver', () => {
  it('rm: every delivery after it is answered 503 database_replaced, /readyz 503; none is acknowledged into the deleted file', async () => {
    const path = join(dir, 'rm.db');
    const secret = newSecret();
    const r = await receiver(path, secret);
    try {
      const before = await deliver(r.url, secret, 3);
      expect(before.acked).toHaveLength(3);
      rmSync(path);
      await expectRefused(r.url, secret, r.child);
    } finally {
      expect((await r.stop()).code).toBe(0);
    }
  });

  it('rm of its -shm: found within a second, and every delivery after it is answered 503 database_replaced', async () => {
    // Another process opening the database then (a `work`, a CLI command, a second `serve`) makes a
    // new -shm, a wal-index of its own: the two processes' writes no longer exclude each other.
    // Measured before this check: a second ingest-only `serve` started after the rm, 800
    // deliveries acknowledged by each, and the file was "database disk image is malformed", every
    // acknowledged event lost; neither process said anything.
    const path = join(dir, 'shm.db');
    const secret = newSecret();
    const r = await receiver(path, secret);
    try {
      expect((await deliver(r.url, secret, 2)).acked).toHaveLength(2);
      rmSync(`${path}-shm`);
      await waitFor(() => REPLACED_LINE.test(r.child.stdout.join('')), 'the -shm found deleted', 5_000);
      expect(r.child.stdout.join('')).toContain(`${path}-shm was deleted while the receiver had it open`);
      await expectRefused(r.url, secret, r.child);
    } finally {
      expect((await r.stop()).code).toBe(0);
    }
    // The database file itself is the one opened: its -wal is not set aside.
    expect(readdirSync(dir).filter((f) => f.startsWith('shm.db-wal.replaced-'))).toEqual([]);
  });

  it('rm of its -shm, a second `serve` acknowledging deliveries, that one killed, then this one stopped: what the second acknowledged stays in the file', async () => {
    // The two processes' wal-indexes apart, this one's close (the last on the file once the other
    // died) checkpointed by its own, which knows none of the other's commits, and deleted the -wal
    // that held them: the other's deliveries since its last checkpoint were gone at the restart.
    const path = join(dir, 'shm-second.db');
    const secret = newSecret();
    const a = await receiver(path, secret);
    let b: Awaited<ReturnType<typeof receiver>> | undefined;
    const acked: string[] = [];
    try {
      acked.push(...(await deliver(a.url, secret, 2)).acked);
      rmSync(`${path}-shm`);
      b = await receiver(path, secret, { WORKER_CONCURRENCY: '0' });
      await waitFor(() => REPLACED_LINE.test(a.child.stdout.join('')), 'the -shm found deleted', 5_000);
      const second = await deliver(b.url, secret, 20);
      expect(second.acked).toHaveLength(20);
      acked.push(...second.acked);
      // Killed before its checkpointer's next tick (500 ms): its last commits are in the -wal only.
      b.child.proc.kill('SIGKILL');
      await b.child.exited;
    } finally {
      if (b) await b.stop();
      expect((await a.stop()).code).toBe(0);
    }
    const db = new BetterSqlite3(path, { readonly: true });
    try {
      expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
      const stored = new Set(db.prepare('SELECT id FROM events').pluck().all() as string[]);
      expect(acked.filter((id) => !stored.has(id))).toEqual([]);
    } finally {
      db.close();
    }
    // Said at warn; no second name of the -wal left beside it.
    expect(a.child.stdout.join('')).toMatch(/the -shm was not this process's at its stop/);
    expect(readdirSync(dir).filter((f) => f.startsWith('shm-second.db-wal.'))).toEqual([]);
  });

  /**
   * A backup moved over the file at `real` (which `path`, DATABASE_PATH, names or links to): refused
   * until restarted; the old -wal, beside `real` where SQLite keeps it, is set aside at the stop,
   * and the restart serves the restored file, intact. `stopAtOnce`: stopped right after the move,
   * with no delivery (nor any tick of the once-a-second check) that would find it first.
   */
  async function restoreByMv(path: string, real: string, { stopAtOnce = false } = {}) {
    const folder = dirname(real);
    const restored = join(folder, 'restored.db');
    const secret = newSecret();
    const r = await receiver(path, secret);
    const inBackup = (await deliver(r.url, secret, 3)).acked;
    try {
      expect(inBackup).toHaveLength(3);
      // A backup, then more deliveries (only in the live file), then the backup moved over it.
      const live = new BetterSqlite3(path, { readonly: true });
      await live.backup(restored);
      live.close();
      expect((await deliver(r.url, secret, 2)).acked).toHaveLength(2);
      renameSync(restored, real);
      if (!stopAtOnce) await expectRefused(r.url, secret, r.child);
    } finally {
      expect((await r.stop()).code).toBe(0);
    }
    // The old file's WAL, which the next start would have applied to the restored file.
    const aside = readdirSync(folder).filter((f) => f.startsWith(`${basename(real)}-wal.replaced-`));
    expect(aside).toHaveLength(1);
    expect(r.child.stdout.join('')).toContain(join(folder, aside[0]!));
    const again = await receiver(path, secret);
    let after: string[];
    try {
      after = (await deliver(again.url, secret, 2)).acked;
      expect(after).toHaveLength(2);
      expect((await fetch(`${again.url}/readyz`)).status).toBe(200);
    } finally {
      await again.stop();
    }
    // The restored file as it was, plus what came after the restart: nothing of the old file's WAL.
    const db = new BetterSqlite3(path, { readonly: true });
    try {
      expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
      expect(new Set(db.prepare('SELECT id FROM events').pluck().all())).toEqual(new Set([...inBackup, ...after]));
    } finally {
      db.close();
    }
  }

  it('mv of a backup over it: refused until restarted; the old -wal is set aside at the stop, and the restart serves the restored file, intact', async () => {
    const path = join(dir, 'mv.db');
    await restoreByMv(path, path);
  });

  it('the same through a DATABASE_PATH that is a symbolic link: the -wal set aside is the one beside the linked file, where SQLite keeps it', async () => {
    // The -wal was looked for beside the link, where there is none: left in place, the restart
    // applied it to the restored file (the events delivered after the backup came back).
    const volume = join(dir, 'volume');
    mkdirSync(volume);
    const real = join(volume, 'receiver.db');
    const link = join(dir, 'linked.db');
    symlinkSync(real, link);
    await restoreByMv(link, real);
  });

  it('mv of a backup over it, then SIGTERM at once (before anything found it): the old -wal is set aside all the same', async () => {
    // `mv backup.db receiver.db && kill -TERM <pid>`: the -wal was set aside only once a check had
    // found the file replaced, and the restart applied it to the restored file (whose events then
    // included the two delivered after the backup).
    await restoreByMv(join(dir, 'mv-stop.db'), join(dir, 'mv-stop.db'), { stopAtOnce: true });
  });

  it('found replaced while the start is still in its housekeeping: neither the workers nor the sink lanes start on the old file', async () => {
    // 200,000 queued deliveries of a sink no longer configured: the start dead-letters them 500 a
    // transaction, seconds of housekeeping after the receiver listens and before its workers start.
    // And one delivery waiting for the configured sink, which a lane started would claim.
    const path = join(dir, 'housekeeping.db');
    const setup = openDatabase(path);
    const row = (kind: string, payload: string, eventId: string) =>
      `SELECT '${kind}', '${payload}', ${eventId}, 'pending', '2026-01-01T00:00:00.000Z', 5, '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z'`;
    setup.sqlite.exec(`INSERT INTO jobs (kind, payload, event_id, state, run_at, max_attempts, created_at, updated_at)
      WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200000) ${row('sink:gone', '{}', "'evt_' || i")} FROM n;
      INSERT INTO jobs (kind, payload, event_id, state, run_at, max_attempts, created_at, updated_at) ${row('sink:archive', '{"event_id":"evt_x","sink":"archive"}', "'evt_x'")}`);
    await setup.close();
    const config = join(dir, 'housekeeping.json');
    writeFileSync(config, JSON.stringify({ sinks: [{ name: 'archive', type: 'file', path: join(dir, 'housekeeping.ndjson') }] }));
    const secret = newSecret();
    const r = await receiver(path, secret, { CONFIG_FILE: config });
    const moved = `${path}.moved`;
    try {
      // Moved away (kept, to look at afterwards); /readyz checks the file: found now, during the housekeeping.
      renameSync(path, moved);
      expect((await fetch(`${r.url}/readyz`)).status).toBe(503);
      const log = () => r.child.stdout.join('');
      await waitFor(() => /"msg":"workers (not )?started/.test(log()), 'the start finished', 60_000);
      // The premise: the file was found replaced before the start reached the workers.
      expect(log().search(REPLACED_LINE)).toBeLessThan(log().search(/"msg":"workers (not )?started/));
      expect(log()).not.toMatch(/"msg":"workers started/);
      expect(log()).toMatch(/"msg":"workers not started: the database file was found replaced during the start/);
    } finally {
      expect((await r.stop()).code).toBe(0);
    }
    // The moved file with its -wal (set aside at the stop): the delivery was never claimed there.
    const aside = readdirSync(dir).filter((f) => f.startsWith('housekeeping.db-wal.replaced-'));
    expect(aside).toHaveLength(1);
    renameSync(join(dir, aside[0]!), `${moved}-wal`);
    const old = new BetterSqlite3(moved, { readonly: true });
    try {
      expect(old.prepare("SELECT state, attempts FROM jobs WHERE kind = 'sink:archive'").all()).toEqual([{ state: 'pending', attempts: 0 }]);
    } finally {
      old.close();
    }
  });

  it('a `work` process stops claiming and says so once, beside an ingest-only serve', async () => {
    const path = join(dir, 'work.db');
    const secret = newSecret();
    const r = await receiver(path, secret, { WORKER_CONCURRENCY: '0' });
    const work = runTs('src/cli/main.ts', ['work'], { ...API, WEBHOOK_SECRET: secret, DATABASE_PATH: path });
    try {
      await waitFor(() => /workers started/.test(work.stdout.join('')), 'work started', 15_000);
      rmSync(path);
      // Its own check runs once a second: no delivery reaches a `work` process.
      await waitFor(() => REPLACED_LINE.test(work.stdout.join('')), 'work noticed', 15_000);
      await expectRefused(r.url, secret, r.child);
      expect(work.proc.exitCode).toBeNull();
    } finally {
      // Stopped by SIGTERM, drained: with its workers stopped it had not exited on its own.
      expect(await stopChild(work)).toEqual({ code: 0, signal: null });
      await r.stop();
    }
    expect(work.stdout.join('').match(new RegExp(REPLACED_LINE, 'g'))).toHaveLength(1);
  });
});
