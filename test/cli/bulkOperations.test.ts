import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/childServer.js';
import { jobSeeder } from '../helpers/jobs.js';
import { tempDir } from '../helpers/receiver.js';
import { cli, deadDeliveries, withMigratedDatabase } from './helpers.js';

const { dir, cleanup } = tempDir('receiver-cli-bulk-');
afterAll(cleanup);

const withDatabase = (name: string, body: (path: string, w: BetterSqlite3.Database) => Promise<void>) => withMigratedDatabase(join(dir, name), body);

/** `n` application.created events, the i-th with the id and received_at `of(i)` gives. */
function storeEvents(w: BetterSqlite3.Database, n: number, of: (i: number) => { id: string; at: string }): void {
  const insert = w.prepare(
    `INSERT INTO events (id, event_type, source, created_at, received_at, delivery_id, envelope)
     VALUES (@id, 'application.created', 'default', @at, @at, 'msg_' || @id, '{}')`,
  );
  w.transaction(() => {
    for (let i = 0; i < n; i++) insert.run(of(i));
  })();
}

describe('bulk operator commands next to a running receiver', { timeout: 60_000 }, () => {
  it('dead-letters retry --all commits in batches of 500, each with its deliveries, not in one transaction', async () => {
    await withDatabase('retry-batches.db', async (path, w) => {
      deadDeliveries(w, 1_200);
      // A failure once 500 jobs are pending (a full disk, a kill): what committed before it stays
      // committed. One transaction for every dead letter held the write lock for seconds at a
      // hundred thousand of them (a running receiver answered its deliveries 503), and here rolls
      // back whole.
      w.exec(`CREATE TRIGGER stop_after_500 BEFORE UPDATE OF state ON jobs
        WHEN NEW.state = 'pending' AND (SELECT count(*) FROM jobs WHERE state = 'pending') >= 500
        BEGIN SELECT RAISE(ABORT, 'stopped by the test'); END`);
      const stopped = await cli(['dead-letters', 'retry', '--all'], { DATABASE_PATH: path });
      expect(stopped.code).toBe(1);
      // What committed before the failure is said, not left to be found (the error alone read as if nothing had changed).
      expect(stopped.stderr).toBe(
        'dead-letters retry: stopped part-way by the error below: 500 dead-lettered jobs queued again before it (they stay queued; the rest stay dead letters); run it again for the rest\n' +
          'error: stopped by the test\n',
      );
      const count = (sql: string) => w.prepare(sql).pluck().get() as number;
      expect(count("SELECT count(*) FROM jobs WHERE state = 'pending'")).toBe(500);
      // Each batch's deliveries turn pending in the batch's own transaction.
      expect(count("SELECT count(*) FROM deliveries WHERE state = 'pending'")).toBe(500);
      expect(count(`SELECT count(*) FROM jobs j JOIN deliveries d ON d.event_id = j.event_id AND d.sink = 'crm' WHERE j.state <> d.state`)).toBe(0);

      // Run again without the failure: the rest are retried, each delivery pending with its job.
      w.exec('DROP TRIGGER stop_after_500');
      const rest = await cli(['dead-letters', 'retry', '--all', '--json'], { DATABASE_PATH: path });
      expect({ code: rest.code, stderr: rest.stderr }).toEqual({ code: 0, stderr: '' });
      expect(JSON.parse(rest.stdout)).toEqual({ dry_run: false, retried: 700 });
      expect(w.prepare('SELECT state, count(*) AS n FROM jobs GROUP BY state').all()).toEqual([{ state: 'pending', n: 1_200 }]);
      expect(w.prepare('SELECT state, attempts, last_error, count(*) AS n FROM deliveries GROUP BY state').all()).toEqual([
        { state: 'pending', attempts: 0, last_error: null, n: 1_200 },
      ]);
    });
  });

  it('dead-letters discard --all deletes in batches of 500, not in one transaction', async () => {
    await withDatabase('discard-batches.db', async (path, w) => {
      deadDeliveries(w, 1_200);
      // As for retry: one transaction for all of them held the write lock for seconds, and rolls back whole here.
      w.exec(`CREATE TRIGGER stop_after_500 BEFORE DELETE ON jobs
        WHEN (SELECT count(*) FROM jobs WHERE state = 'dead') <= 700
        BEGIN SELECT RAISE(ABORT, 'stopped by the test'); END`);
      const stopped = await cli(['dead-letters', 'discard', '--all'], { DATABASE_PATH: path });
      expect(stopped.code).toBe(1);
      expect(stopped.stderr).toBe(
        'dead-letters discard: stopped part-way by the error below: 500 dead letters discarded before it (they stay deleted); run it again for the rest\n' +
          'error: stopped by the test\n',
      );
      const dead = () => w.prepare("SELECT count(*) FROM jobs WHERE state = 'dead'").pluck().get();
      expect(dead()).toBe(700);
      w.exec('DROP TRIGGER stop_after_500');
      const rest = await cli(['dead-letters', 'discard', '--all', '--json'], { DATABASE_PATH: path });
      expect({ code: rest.code, stderr: rest.stderr }).toEqual({ code: 0, stderr: '' });
      expect(JSON.parse(rest.stdout)).toEqual({ dry_run: false, discarded: 700, by_kind: { 'sink:crm': 700 }, kept: [] });
      expect(dead()).toBe(0);
    });
  });

  it("dead-letters retry whose max_attempts step fails at its first batch says the jobs it queued again stay queued", async () => {
    await withDatabase('retry-then-max-attempts.db', async (path, w) => {
      deadDeliveries(w, 3);
      // A delivery already waiting, queued with another max_attempts than the configuration's now.
      w.exec(`INSERT INTO jobs (kind, payload, event_id, source, state, run_at, attempts, max_attempts, created_at, updated_at)
        VALUES ('sink:crm', '{}', 'evt-waiting', 'sink:crm', 'pending', '2026-11-20T10:00:00.000Z', 1, 25, '2026-11-20T10:00:00.000Z', '2026-11-20T10:00:00.000Z')`);
      w.exec(`CREATE TRIGGER stop_max_attempts BEFORE UPDATE OF max_attempts ON jobs WHEN OLD.event_id = 'evt-waiting'
        BEGIN SELECT RAISE(ABORT, 'stopped by the test'); END`);
      const config = join(dir, 'retry-then-max-attempts.json');
      writeFileSync(config, JSON.stringify({ sinks: [{ name: 'crm', type: 'http', url: 'https://crm.example/hook', secret: { env: 'CRM_SINK_SECRET' }, max_attempts: 50 }] }));
      const stopped = await cli(['dead-letters', 'retry', '--all'], { DATABASE_PATH: path, CONFIG_FILE: config });
      // The error alone read as if the retry had failed: run again, it found no dead letter.
      expect({ code: stopped.code, stdout: stopped.stdout, stderr: stopped.stderr }).toEqual({
        code: 1,
        stdout: '',
        stderr:
          "dead-letters retry: 3 dead-lettered jobs queued again; then the error below stopped giving the other waiting deliveries their sink's max_attempts as configured now after 0 (the next start of the workers does the rest)\n" +
          'error: stopped by the test\n',
      });
      expect(w.prepare("SELECT count(*) FROM jobs WHERE state = 'pending'").pluck().get()).toBe(4);
    });
  });

  it('prune stopped by a failure part-way says how many jobs it deleted before it', async () => {
    await withDatabase('prune-stopped.db', async (path, w) => {
      const old = '2020-01-01T00:00:00.000Z';
      const insert = jobSeeder(w);
      w.transaction(() => {
        for (let i = 0; i < 1_200; i++) insert({ kind: 'sink:crm', event_id: `evt-${i}`, state: 'done', run_at: old, attempts: 1, finished_at: old });
      })();
      w.exec(`CREATE TRIGGER stop_after_500 BEFORE DELETE ON jobs WHEN (SELECT count(*) FROM jobs) <= 700
        BEGIN SELECT RAISE(ABORT, 'stopped by the test'); END`);
      const stopped = await cli(['prune', '--json'], { DATABASE_PATH: path });
      expect({ code: stopped.code, stdout: stopped.stdout, stderr: stopped.stderr }).toEqual({
        code: 1,
        stdout: '',
        stderr: 'prune: stopped part-way by the error below: 500 finished jobs deleted before it (they stay deleted); run it again for the rest\nerror: stopped by the test\n',
      });
      expect(w.prepare('SELECT count(*) FROM jobs').pluck().get()).toBe(700);
    });
  });

  it('sinks send-now stopped by a failure part-way says how many deliveries it made due before it', async () => {
    await withDatabase('send-now-stopped.db', async (path, w) => {
      const later = '2099-01-01T00:00:00.000Z';
      const insert = jobSeeder(w);
      const row = w.prepare("INSERT INTO deliveries (event_id, sink, message_id, state, attempts, queued_at, created_at, updated_at) VALUES (?, 'crm', ?, 'retrying', 2, ?, ?, ?)");
      w.transaction(() => {
        for (let i = 0; i < 1_200; i++) {
          insert({ kind: 'sink:crm', event_id: `evt-${i}`, state: 'pending', run_at: later, attempts: 2 });
          row.run(`evt-${i}`, `msg-${i}`, later, later, later);
        }
      })();
      w.exec(`CREATE TRIGGER stop_after_500 BEFORE UPDATE OF run_at ON jobs WHEN (SELECT count(*) FROM jobs WHERE run_at < '2099') >= 500
        BEGIN SELECT RAISE(ABORT, 'stopped by the test'); END`);
      const stopped = await cli(['sinks', 'send-now', 'crm'], { DATABASE_PATH: path });
      expect({ code: stopped.code, stdout: stopped.stdout, stderr: stopped.stderr }).toEqual({
        code: 1,
        stdout: '',
        stderr: 'sinks send-now: stopped part-way by the error below: 500 deliveries of sink crm made due before it (a running receiver sends them); run it again for the rest\nerror: stopped by the test\n',
      });
    });
  });

  it('replay stopped by a failure part-way says what it queued before it, and where --after continues, within one received_at', async () => {
    await withDatabase('replay-stopped.db', async (path, w) => {
      // One received_at for all (a backfill), stored in an order that is not the ids'.
      const at = '2026-11-01T00:00:00.000Z';
      storeEvents(w, 1_200, (i) => ({ id: `evt-${String((i * 7_919) % 1_200).padStart(4, '0')}`, at }));
      w.prepare('UPDATE processing_cursor SET last_event_rowid = ?').run(1_200);
      w.exec(`CREATE TRIGGER stop_after_500 BEFORE INSERT ON jobs WHEN (SELECT count(*) FROM jobs) >= 500
        BEGIN SELECT RAISE(ABORT, 'stopped by the test'); END`);
      const stopped = await cli(['replay', '--all', '--json'], { DATABASE_PATH: path });
      // The error alone said "try again", which queued the first 500 again.
      expect({ code: stopped.code, stdout: stopped.stdout, stderr: stopped.stderr }).toEqual({
        code: 1,
        stdout: '',
        stderr:
          'replay: stopped part-way by the error below: 500 events selected; processing: 500 queued before it (they stay queued); ' +
          `the last event it went through was received at ${at} (id evt-0499): for the rest, run the same command with --after '${at}/evt-0499'\n` +
          'error: stopped by the test\n',
      });
      expect(w.prepare('SELECT max(event_id) FROM jobs').pluck().get()).toBe('evt-0499');
      w.exec('DROP TRIGGER stop_after_500');
      const rest = await cli(['replay', '--all', '--after', `${at}/evt-0499`, '--json'], { DATABASE_PATH: path });
      expect({ code: rest.code, stderr: rest.stderr }).toEqual({ code: 0, stderr: '' });
      expect(JSON.parse(rest.stdout)).toMatchObject({ selected: 700, processing: { queued: 700, already_queued: 0 } });
      expect(w.prepare('SELECT count(*), count(DISTINCT event_id) FROM jobs').raw().get()).toEqual([1_200, 1_200]);
    });
  });

  it('replay stopped part-way at an id with control characters prints an --after that bash gives back as that id, also in the C locale', async () => {
    await withDatabase('replay-stopped-control.db', async (path, w) => {
      const at = '2026-11-01T00:00:00.000Z';
      // In id order: 499 plain ids, the 500th with a C1 control (U+0085), then two ids that sort between it and U+FFFD.
      const ids = [...Array.from({ length: 499 }, (_, i) => `evt-${String(i).padStart(4, '0')}`), 'evt-\u0085', 'evt-\u00e9', 'evt-\u200b'];
      storeEvents(w, ids.length, (i) => ({ id: ids[i]!, at }));
      w.prepare('UPDATE processing_cursor SET last_event_rowid = ?').run(ids.length);
      w.exec(`CREATE TRIGGER stop_after_500 BEFORE INSERT ON jobs WHEN (SELECT count(*) FROM jobs) >= 500
        BEGIN SELECT RAISE(ABORT, 'stopped by the test'); END`);
      const stopped = await cli(['replay', '--all', '--json'], { DATABASE_PATH: path });
      expect(stopped.code).toBe(1);
      const word = stopped.stderr.match(/ run the same command with --after (\S+)\n/)?.[1];
      expect(word, stopped.stderr).toBeDefined();
      w.exec('DROP TRIGGER stop_after_500');
      // Pasted into bash as printed (no LANG: the C locale of cron or a container). U+0085 as the
      // byte 0x85 came back as U+FFFD, after the two ids left: 0 selected.
      const rest = spawnSync('bash', ['-c', `exec "$0" --import "$1" src/cli/main.ts replay --all --json --after ${word}`, process.execPath, `${ROOT}node_modules/tsx/dist/loader.mjs`], {
        cwd: ROOT,
        env: { PATH: process.env['PATH'] ?? '', DATABASE_PATH: path },
        encoding: 'utf8',
        // Not a socket on stdin: bash takes that for rshd and reads ~/.bashrc.
        stdio: ['ignore', 'pipe', 'pipe'],
        timeout: 25_000,
      });
      expect({ status: rest.status, stderr: rest.stderr }).toEqual({ status: 0, stderr: '' });
      expect(JSON.parse(rest.stdout)).toMatchObject({ selected: 2, processing: { queued: 2, already_queued: 0 } });
      expect(w.prepare('SELECT count(*), count(DISTINCT event_id) FROM jobs').raw().get()).toEqual([ids.length, ids.length]);
    });
  });

  it('dead-letters discard counts the jobs it deleted, not one another process retried after its read', async () => {
    await withDatabase('discard-retried.db', async (path, w) => {
      deadDeliveries(w, 1_200);
      const id = (event: string) => w.prepare('SELECT id FROM jobs WHERE event_id = ?').pluck().get(event) as number;
      // Between the discard's read and the delete of the third batch, a dead-letters retry elsewhere
      // (here: in the first batch's delete) runs evt-1100's job again: it is no dead letter to delete.
      w.exec(`CREATE TRIGGER meanwhile AFTER DELETE ON jobs WHEN OLD.id = ${id('evt-0')}
        BEGIN UPDATE jobs SET state = 'pending' WHERE id = ${id('evt-1100')}; END`);
      const r = await cli(['dead-letters', 'discard', '--all', '--json'], { DATABASE_PATH: path });
      expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
      expect(w.prepare('SELECT event_id, state FROM jobs').all()).toEqual([{ event_id: 'evt-1100', state: 'pending' }]);
      expect(JSON.parse(r.stdout)).toEqual({ dry_run: false, discarded: 1_199, by_kind: { 'sink:crm': 1_199 }, kept: [] });
    });
  });

  it('replay reads the selection page by page: a dry run over more events than its heap could hold at once', async () => {
    await withDatabase('replay-pages.db', async (path, w) => {
      const n = 150_000;
      // Equal received_at in runs of three: pages are ordered (and continued) by id within one.
      storeEvents(w, n, (i) => ({ id: `evt-${String(i).padStart(7, '0')}-padding-to-the-length-of-a-uuid`, at: new Date(Date.UTC(2026, 10, 1) + Math.floor(i / 3) * 1000).toISOString() }));
      w.prepare('UPDATE processing_cursor SET last_event_rowid = ?').run(n);
      // Each selected event held at once took about 500 bytes of heap: 150,000 of them did not fit
      // in 64 MB (the process died with "heap out of memory"), a page of them does.
      const env = { DATABASE_PATH: path, NODE_OPTIONS: '--max-old-space-size=64' };
      const dry = await cli(['replay', '--all', '--dry-run', '--json'], env, 50_000);
      expect({ code: dry.code, stderr: dry.stderr }).toEqual({ code: 0, stderr: '' });
      expect(JSON.parse(dry.stdout)).toMatchObject({ dry_run: true, selected: n, processing: { queued: n, already_queued: 0 } });
      // Oldest first across page boundaries and equal times: --limit takes the first events stored.
      const limited = await cli(['replay', '--all', '--limit', '1001', '--dry-run'], env);
      const ids = limited.stdout.split('\n').filter((l) => l.startsWith('would queue')).map((l) => l.split(' ')[2]);
      expect(ids).toEqual(Array.from({ length: 1001 }, (_, i) => `evt-${String(i).padStart(7, '0')}-padding-to-the-length-of-a-uuid`));
    });
  });

  it('replay sees the process_event jobs opened or finished by others while it runs, batch by batch', async () => {
    await withDatabase('replay-open-jobs.db', async (path, w) => {
      const n = 1_200;
      const ev = (i: number) => `evt-${String(i).padStart(4, '0')}`;
      storeEvents(w, n, (i) => ({ id: ev(i), at: new Date(Date.UTC(2026, 10, 1) + i * 1000).toISOString() }));
      w.prepare('UPDATE processing_cursor SET last_event_rowid = ?').run(n);
      const at = '2026-11-20T10:00:00.000Z';
      const job = w.prepare(
        `INSERT INTO jobs (kind, payload, event_id, source, state, run_at, max_attempts, created_at, updated_at)
         VALUES ('process_event', json_object('event_id', @e), @e, 'default', @state, @at, 5, @at, @at)`,
      );
      const open = Number(job.run({ e: ev(700), state: 'pending', at }).lastInsertRowid);
      const dead = Number(job.run({ e: ev(900), state: 'dead', at }).lastInsertRowid);
      // What another process commits between the replay's first and second batch (here in the first
      // batch's transaction): the open fold of evt-0700 is dead-lettered, the dead one of evt-0900 is
      // retried, and a fold of evt-0800 fails (a new process_event job).
      w.exec(`CREATE TRIGGER meanwhile AFTER INSERT ON jobs WHEN NEW.event_id = '${ev(499)}' BEGIN
        UPDATE jobs SET state = 'dead' WHERE id = ${open};
        UPDATE jobs SET state = 'pending' WHERE id = ${dead};
        INSERT INTO jobs (kind, payload, event_id, source, state, run_at, max_attempts, created_at, updated_at)
          VALUES ('process_event', '{"event_id":"${ev(800)}"}', '${ev(800)}', 'default', 'pending', '${at}', 5, '${at}', '${at}');
      END`);
      const r = await cli(['replay', '--all', '--json'], { DATABASE_PATH: path });
      expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
      // evt-0700 is queued (its job is no longer open), evt-0800 and evt-0900 are not (they have one).
      expect(JSON.parse(r.stdout)).toMatchObject({ selected: n, processing: { queued: n - 2, already_queued: 2 } });
      const openJobs = w.prepare(`SELECT event_id, count(*) AS n FROM jobs WHERE kind = 'process_event' AND state IN ('pending', 'running') GROUP BY event_id`).all() as { event_id: string; n: number }[];
      expect(openJobs.filter((j) => j.n !== 1)).toEqual([]);
      expect(openJobs.length).toBe(n);
    });
  });

  it('replay continues a page after an id stored from a lone surrogate, which reads back as U+FFFD', async () => {
    await withDatabase('replay-surrogate.db', async (path, w) => {
      // All at one received_at: the pages continue by id. The 500th id ends in a lone surrogate (an
      // envelope's "\ud800" escape), stored as bytes that are not UTF-8 (ED A0 80); the next one
      // sorts between those and U+FFFD's (EF BF BD), as which the first reads back.
      const ids = Array.from({ length: 1_000 }, (_, i) => `evt-${String(i).padStart(4, '0')}`);
      ids[499] = 'evt-0498\ud800';
      ids[500] = 'evt-0498\ue000';
      storeEvents(w, ids.length, (i) => ({ id: ids[i]!, at: '2026-11-01T00:00:00.000Z' }));
      w.prepare('UPDATE processing_cursor SET last_event_rowid = ?').run(ids.length);
      const dry = await cli(['replay', '--all', '--dry-run', '--json'], { DATABASE_PATH: path });
      expect({ code: dry.code, stderr: dry.stderr }).toEqual({ code: 0, stderr: '' });
      expect(JSON.parse(dry.stdout)).toMatchObject({ selected: 1_000 });
    });
  });

  it('replay keeps (received_at, id) order and its filters through many events of one received_at', async () => {
    await withDatabase('replay-same-time.db', async (path, w) => {
      // 1,300 events at one time, stored in an order that is not the ids' (the pages walk that
      // time's events in id order from a temp table once a page holds only them), then 300 later.
      const id = (i: number) => `evt-${String((i * 7_919) % 1_300).padStart(4, '0')}${i >= 1_300 ? `-late-${i}` : ''}`;
      const at = (i: number) => (i < 1_300 ? '2026-11-01T00:00:00.000Z' : new Date(Date.UTC(2026, 10, 1, 1) + i).toISOString());
      storeEvents(w, 1_600, (i) => ({ id: id(i), at: at(i) }));
      w.exec(`UPDATE events SET event_type = 'interview.completed' WHERE rowid % 3 = 0`);
      w.prepare('UPDATE processing_cursor SET last_event_rowid = ?').run(1_600);
      const expected = (where: string, limit = -1) =>
        w.prepare(`SELECT id FROM events WHERE ${where} ORDER BY received_at, id LIMIT ${limit}`).pluck().all() as string[];
      const listed = async (args: string[]) => {
        const r = await cli(['replay', ...args, '--dry-run'], { DATABASE_PATH: path });
        expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
        return r.stdout.split('\n').filter((l) => l.startsWith('would queue')).map((l) => l.split(' ')[2]);
      };
      expect(await listed(['--all'])).toEqual(expected('1'));
      expect(await listed(['--all', '--limit', '1100'])).toEqual(expected('1', 1_100));
      expect(await listed(['--type', 'interview.completed'])).toEqual(expected(`event_type = 'interview.completed'`));
    });
  });

  it('sinks list names every sink the database knows, from its deliveries and sink_state, when none is configured', async () => {
    await withDatabase('sink-names.db', async (path, w) => {
      const at = '2026-11-20T10:00:00.000Z';
      const delivery = w.prepare(
        `INSERT INTO deliveries (event_id, sink, message_id, state, queued_at, created_at, updated_at) VALUES (@event, @sink, 'msg_' || @event || @sink, 'delivered', @at, @at, @at)`,
      );
      for (const [event, sink] of [['e1', 'crm'], ['e2', 'crm'], ['e1', 'archive'], ['e3', 'zz-last'], ['e3', 'a.b']]) delivery.run({ event, sink, at });
      w.prepare(`INSERT INTO sink_state (sink, disabled_at, disabled_reason, disabled_status, disabled_target, updated_at) VALUES ('gone', @at, 'HTTP 410', 410, 'x', @at)`).run({ at });
      const listed = await cli(['sinks', 'list', '--json'], { DATABASE_PATH: path });
      expect({ code: listed.code, stderr: listed.stderr }).toEqual({ code: 0, stderr: '' });
      const rows = JSON.parse(listed.stdout) as { name: string; configured: boolean; delivered: number }[];
      expect(rows.map((r) => [r.name, r.configured, r.delivered]).sort()).toEqual([
        ['a.b', false, 1],
        ['archive', false, 1],
        ['crm', false, 2],
        ['gone', false, 0],
        ['zz-last', false, 1],
      ]);
    });
  });
});
