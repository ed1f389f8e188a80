import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { constants } from 'node:os';
import { join } from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { runTs } from '../helpers/childServer.js';
import { jobSeeder } from '../helpers/jobs.js';
import { tempDir } from '../helpers/receiver.js';
import { cli, deadDeliveries, until, withMigratedDatabase, workersSayTheyWait } from './helpers.js';

const { dir, cleanup } = tempDir('receiver-cli-interrupt-');
afterAll(cleanup);

const old = '2020-01-01T00:00:00.000Z';

/**
 * Runs the CLI with `args` (progress lines at every batch), and once it has committed a batch
 * (its first progress line), sends it `signal` while this test holds the write lock: the command
 * cannot commit another batch before the signal is sent, so it cannot finish first however busy
 * the machine is. The lock is let go at once: the batch in flight (maybe waiting for the lock)
 * commits, then the command stops. Bounded: killed after 25 s. `twice`: the signal is sent again
 * once the CLI has taken the first (as `timeout` sends it, to the command and then to its group).
 */
async function interruptAfterFirstBatch(w: BetterSqlite3.Database, args: string[], env: Record<string, string>, signal: NodeJS.Signals, opts: { twice?: boolean; after?: string } = {}) {
  const { twice = false, after } = opts;
  // A running receiver's workers say they wait for the lock (as BusyRetrySqliteDialect does), so
  // the command holds each next batch back up to 30 ms (cli/batchPause.ts): 20,000 rows take over
  // a second, not the 0.2-0.4 s in which a command with nobody waiting could end before the lock
  // below is taken. (Replay's own tests below pass no such signal: the stop then rests on the
  // loop's turns alone.)
  const saying = args[0] === 'replay' ? null : workersSayTheyWait(env['DATABASE_PATH']!);
  const child = runTs('src/cli/main.ts', [...args, '--progress'], { ...env, CLI_PROGRESS_INTERVAL_MS: '0' });
  const timer = setTimeout(() => child.proc.kill('SIGKILL'), 25_000);
  try {
    const seen = (text: string) => child.stderr.join('').includes(text);
    await until(() => (after === undefined ? seen(' so far') || seen(' of ') : seen(after)), after ?? 'a first batch committed');
    w.exec('BEGIN IMMEDIATE');
    try {
      // Both signals taken while it waits for the lock, as the two of `timeout` come together: not
      // one taken between two batches, which it would end on before the second came.
      if (twice) await until(() => waitsForLock(child.proc.pid!), 'the CLI waiting for the write lock');
      child.proc.kill(signal);
      if (twice) {
        // Taken, not merged with the second by the kernel: the two reach the CLI as two.
        await until(() => !pending(child.proc.pid!, signal), 'the first signal taken');
        child.proc.kill(signal);
      }
    } finally {
      w.exec('ROLLBACK');
    }
    const { code, signal: killedBy } = await child.exited;
    const stderr = child.stderr.join('');
    // The last line: the progress lines come before it.
    return { code, killedBy, stdout: child.stdout.join(''), last: stderr.trimEnd().split('\n').at(-1)! };
  } finally {
    clearTimeout(timer);
    saying?.stop();
  }
}

/** Whether `signal` was sent to process `pid` and it has not taken it yet (Linux: /proc's ShdPnd mask). */
const pending = (pid: number, signal: NodeJS.Signals) => {
  const mask = readFileSync(`/proc/${pid}/status`, 'utf8').match(/^ShdPnd:\s*([0-9a-f]+)$/m)![1]!;
  return (BigInt(`0x${mask}`) & (1n << BigInt(constants.signals[signal] - 1))) !== 0n;
};

/** Whether process `pid`'s main thread sleeps in SQLite's busy handler (Linux: /proc's wchan), not in the event loop's poll. */
const waitsForLock = (pid: number) => readFileSync(`/proc/${pid}/wchan`, 'utf8').includes('nanosleep');

const countOf = (w: BetterSqlite3.Database, query: string) => w.prepare(query).pluck().get() as number;
/** "12,500" in the line as a number. */
const numberIn = (m: RegExpMatchArray | null) => Number(m![1]!.replace(/,/g, ''));

describe('a bulk command stopped by SIGINT or SIGTERM says what it committed', { timeout: 60_000 }, () => {
  it('prune --json: the batch in flight commits, a line says how many were deleted, JSON says interrupted, exit 143', async () => {
    await withMigratedDatabase(join(dir, 'prune.db'), async (path, w) => {
      const total = 20_000;
      const insert = jobSeeder(w);
      w.transaction(() => {
        for (let i = 0; i < total; i++) insert({ kind: 'sink:crm', event_id: `evt-${i}`, state: 'done', run_at: old, attempts: 1, finished_at: old });
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
      expect(JSON.parse(r.stdout)).toEqual({ dry_run: false, retried, interrupted: true });
    });
  });

  it("dead-letters retry: a SIGTERM during its max_attempts step is said, with the jobs queued again, exit 143 (it was taken and ignored: exit 0)", async () => {
    await withMigratedDatabase(join(dir, 'retry-late.db'), async (path, w) => {
      deadDeliveries(w, 3);
      // Deliveries already waiting, queued with another max_attempts than the configuration's now: 120 batches.
      const waiting = 60_000;
      const job = jobSeeder(w);
      w.transaction(() => {
        for (let i = 0; i < waiting; i++) job({ kind: 'sink:crm', event_id: `evt-waiting-${i}`, state: 'pending', run_at: '2099-01-01T00:00:00.000Z', attempts: 1, created_at: old });
      })();
      const config = join(dir, 'retry-late.json');
      writeFileSync(config, JSON.stringify({ sinks: [{ name: 'crm', type: 'http', url: 'https://crm.example/hook', secret: { env: 'CRM_SINK_SECRET' }, max_attempts: 50 }] }));
      const r = await interruptAfterFirstBatch(w, ['dead-letters', 'retry', '--all'], { DATABASE_PATH: path, CONFIG_FILE: config }, 'SIGTERM', { after: 'max_attempts of waiting deliveries' });
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
      const job = jobSeeder(w);
      w.transaction(() => {
        for (let i = 0; i < total; i++) job({ kind: 'sink:crm', event_id: `evt-${i}`, state: 'pending', run_at: later, attempts: 3, created_at: old });
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

  /** `n` events processing has taken (behind its cursor), `perInstant` of them received in each same millisecond, as a backfill stores them. */
  const processedEvents = (w: BetterSqlite3.Database, n: number, perInstant: number) => {
    const insert = w.prepare(`INSERT INTO events (id, event_type, source, created_at, received_at, delivery_id, envelope) VALUES (?, 'application.created', 'default', ?, ?, ?, '{}')`);
    w.transaction(() => {
      for (let i = 0; i < n; i++) {
        const at = new Date(Date.UTC(2026, 10, 20) + Math.floor(i / perInstant) * 1000).toISOString();
        insert.run(`evt-${String(i).padStart(6, '0')}`, at, at, `msg-${i}`);
      }
    })();
    w.prepare('UPDATE processing_cursor SET last_event_rowid = (SELECT max(rowid) FROM events)').run();
  };

  it('replay --json: SIGTERM stops it after the batch in flight, says where, and --after continues exactly from there, exit 143', async () => {
    await withMigratedDatabase(join(dir, 'replay.db'), async (path, w) => {
      // Enough that the replay cannot end before the lock is taken, however long this process stalls
      // after its first progress line (it has no "workers wait" signal to slow it: about 0.2-0.4 s
      // for 20,000 events on a quiet machine, so a stall of the test process past that failed it).
      const total = 100_000;
      // 1,200 events per millisecond: the stop falls inside one, where --since would take its first events again.
      processedEvents(w, total, 1_200);
      // `timeout -s TERM 3 hiring-receiver replay --all --json`: ended at once, 16,000 of 200,000 events queued, nothing printed.
      const r = await interruptAfterFirstBatch(w, ['replay', '--all', '--json'], { DATABASE_PATH: path }, 'SIGTERM');
      expect({ code: r.code, killedBy: r.killedBy }).toEqual({ code: 143, killedBy: null });
      const m = r.last.match(
        /^replay: stopped part-way by SIGTERM: (\d+) events selected; processing: (\d+) queued before it \(they stay queued\); the last event it went through was received at (\S+) \(id (evt-\d+)\): for the rest, run the same command with --after '(\S+)'$/,
      );
      expect(m, r.last).not.toBeNull();
      const [selected, queued] = [Number(m![1]), Number(m![2])];
      expect(queued).toBe(selected);
      expect(selected).toBeGreaterThan(0);
      expect(selected).toBeLessThan(total);
      // Each batch whole: the jobs are the first events in (received_at, id) order, and the line names the last of them.
      const last = `evt-${String(selected - 1).padStart(6, '0')}`;
      expect(m![4]).toBe(last);
      expect(countOf(w, "SELECT count(*) FROM jobs WHERE kind = 'process_event'")).toBe(selected);
      expect(w.prepare('SELECT max(event_id) FROM jobs').pluck().get()).toBe(last);
      const after = `${m![3]}/${last}`;
      expect(m![5]).toBe(after);
      expect(JSON.parse(r.stdout)).toEqual({ dry_run: false, selected, processing: { queued: selected, already_queued: 0 }, sinks: {}, interrupted: true, continue_after: after });

      // The rest, and only the rest: every event replayed once.
      const rest = await cli(['replay', '--all', '--after', after, '--json'], { DATABASE_PATH: path }, 50_000);
      expect({ code: rest.code, stderr: rest.stderr }).toEqual({ code: 0, stderr: '' });
      expect(JSON.parse(rest.stdout)).toEqual({ dry_run: false, selected: total - selected, processing: { queued: total - selected, already_queued: 0 }, sinks: {} });
      expect(countOf(w, "SELECT count(*) FROM jobs WHERE kind = 'process_event'")).toBe(total);
      expect(countOf(w, 'SELECT count(DISTINCT event_id) FROM jobs')).toBe(total);
    });
  });

  it('replay --since <age>: the line and --json after a stop name the window as times, so the rest run later selects exactly the rest', async () => {
    await withMigratedDatabase(join(dir, 'replay-age.db'), async (path, w) => {
      // As above (enough that it cannot end first), 20 per second from 2026-11-20T00:00Z: 83 minutes of events.
      const total = 100_000;
      const base = Date.UTC(2026, 10, 20);
      const insert = w.prepare(`INSERT INTO events (id, event_type, source, created_at, received_at, delivery_id, envelope) VALUES (?, 'application.created', 'default', ?, ?, ?, '{}')`);
      w.transaction(() => {
        for (let i = 0; i < total; i++) {
          const at = new Date(base + i * 50).toISOString();
          insert.run(`evt-${String(i).padStart(6, '0')}`, at, at, `msg-${i}`);
        }
      })();
      w.prepare('UPDATE processing_cursor SET last_event_rowid = (SELECT max(rowid) FROM events)').run();
      // The CLI's wall clock (NODE_OPTIONS=--import): from a minute short of 2 h after the first event (its start-up
      // takes some of that minute), then, for the rest, 10 minutes later.
      const clockAt = (name: string, at: number) => {
        const file = join(dir, `${name}.mjs`);
        writeFileSync(file, `const real = Date.now; const start = real(); Date.now = () => ${at} + (real() - start);`);
        return { DATABASE_PATH: path, NODE_OPTIONS: `--import ${file}` };
      };
      const r = await interruptAfterFirstBatch(w, ['replay', '--since', '2h', '--json'], clockAt('first', base + 2 * 3_600_000 - 60_000), 'SIGTERM');
      expect({ code: r.code, killedBy: r.killedBy }, r.last).toEqual({ code: 143, killedBy: null });
      const m = r.last.match(/for the rest, run the same command with (.*)$/);
      expect(m, r.last).not.toBeNull();
      const json = JSON.parse(r.stdout) as { selected: number; continue_after: string; continue_since?: string };
      expect(json.selected).toBeLessThan(total);
      // The time `2h` named as it began, before the first event.
      const since = json.continue_since!;
      expect(Date.parse(since)).toBeGreaterThan(base - 60_000);
      expect(Date.parse(since)).toBeLessThanOrEqual(base);
      expect(m![1]).toBe(`--since '${since}' --after '${json.continue_after}'`);

      // Run as the line says, 10 minutes later: the events the first run did not reach, each once.
      const rest = await cli(['replay', '--since', '2h', '--since', since, '--after', json.continue_after, '--json'], clockAt('rest', base + 2 * 3_600_000 + 540_000), 50_000);
      expect({ code: rest.code, stderr: rest.stderr }).toEqual({ code: 0, stderr: '' });
      expect(JSON.parse(rest.stdout)).toMatchObject({ selected: total - json.selected });
      expect(countOf(w, 'SELECT count(DISTINCT event_id) FROM jobs')).toBe(total);
      expect(countOf(w, 'SELECT count(*) FROM jobs')).toBe(total);
    });
  });

  it('replay --wait --json: Ctrl-C ends the wait at once, saying what was queued and what had finished, exit 130', async () => {
    await withMigratedDatabase(join(dir, 'replay-wait.db'), async (path, w) => {
      processedEvents(w, 3, 1);
      // No receiver: nothing finishes, and the wait would last its --timeout.
      const child = runTs('src/cli/main.ts', ['replay', '--all', '--wait', '--timeout', '600', '--json', '--progress'], { DATABASE_PATH: path, CLI_PROGRESS_INTERVAL_MS: '0' });
      const timer = setTimeout(() => child.proc.kill('SIGKILL'), 25_000);
      try {
        await until(() => child.stderr.join('').includes('replay --wait: 0 of 3 finished'), 'the wait');
        child.proc.kill('SIGINT');
        const { code, signal } = await child.exited;
        expect({ code, signal }).toEqual({ code: 130, signal: null });
        expect(child.stderr.join('').trimEnd().split('\n').at(-1)).toBe(
          "replay --wait: stopped by SIGINT: 3 events selected; processing: 3 queued (they stay queued: the receiver's workers do them); finished so far: 0 done, 0 dead, 3 unfinished",
        );
        expect(JSON.parse(child.stdout.join(''))).toEqual({
          dry_run: false,
          selected: 3,
          processing: { queued: 3, already_queued: 0 },
          sinks: {},
          finished: { done: 0, failed: 0, unfinished: 3 },
          interrupted: true,
        });
        expect(countOf(w, "SELECT count(*) FROM jobs WHERE state = 'pending'")).toBe(3);
      } finally {
        clearTimeout(timer);
      }
    });
  });

  it('replay --after: a value that names no position is a usage error saying the form expected, exit 2', async () => {
    const env = { DATABASE_PATH: join(dir, 'none.db') };
    const expected = 'expected <received_at>/<event id>, as a stopped replay prints it (2026-11-20T10:00:00.000Z/evt-1)';
    for (const bad of ['evt-1', '2026-11-20T10:00:00.000Z', '2026-11-20T10:00:00.000Z/', '2h/evt-1', '/evt-1']) {
      const r = await cli(['replay', '--all', '--after', bad]);
      expect({ code: r.code, stdout: r.stdout }, bad).toEqual({ code: 2, stdout: '' });
      expect(r.stderr, bad).toContain(`${expected}, got ${JSON.stringify(bad)}`);
    }
    const day = await cli(['replay', '--after', '2026-11-31T10:00:00Z/evt-1'], env);
    expect({ code: day.code, stderr: day.stderr }).toMatchObject({ code: 2, stderr: expect.stringContaining('2026-11-31 is not a date') });
    const window = await cli(['replay', '--after', '2026-11-20T10:00:00Z/evt-1', '--until', '2026-11-20T09:00:00Z'], env);
    expect({ code: window.code, stderr: window.stderr }).toEqual({ code: 2, stderr: 'error: --after (received at 2026-11-20T10:00:00.000Z) must be before --until (2026-11-20T09:00:00.000Z)\n' });
  });

  it('replay: a repeat of the SIGTERM that comes just after the command returned (off) is still the same request: exit 143, not killed by it', async () => {
    await withMigratedDatabase(join(dir, 'replay-late.db'), async (path, w) => {
      processedEvents(w, 1_500, 1);
      // The handlers removed at once by off(): the repeat found none, and its default action killed the process.
      const child = runTs('test/helpers/lateDuplicateSignal.ts', ['replay', '--all', '--progress'], { DATABASE_PATH: path, CLI_PROGRESS_INTERVAL_MS: '0' });
      const timer = setTimeout(() => child.proc.kill('SIGKILL'), 25_000);
      const { code, signal } = await child.exited.finally(() => clearTimeout(timer));
      expect({ code, signal }).toEqual({ code: 143, signal: null });
      const m = child.stderr.join('').trimEnd().split('\n').at(-1)!.match(/^replay: stopped part-way by SIGTERM: (\d+) events selected; /);
      expect(m, child.stderr.join('')).not.toBeNull();
      expect(Number(m![1])).toBeLessThan(1_500);
      expect(countOf(w, 'SELECT count(*) FROM jobs')).toBe(Number(m![1]));
    });
  });

  it('prune: a SIGTERM after a last batch that was full ends it as a whole run (it said "stopped part-way ... run it again for the rest", with nothing left)', async () => {
    await withMigratedDatabase(join(dir, 'prune-after-last.db'), async (path, w) => {
      const insert = jobSeeder(w);
      // Exactly one batch (PRUNE_BATCH): the signal comes before the batch that would find nothing.
      w.transaction(() => {
        for (let i = 0; i < 500; i++) insert({ kind: 'sink:crm', event_id: `evt-${i}`, state: 'done', run_at: old, attempts: 1, finished_at: old });
      })();
      const child = runTs('test/helpers/lateDuplicateSignal.ts', ['prune', '--older-than', '1d', '--progress', '--json'], { DATABASE_PATH: path, CLI_PROGRESS_INTERVAL_MS: '0', SIGNAL_AFTER: '500 jobs deleted so far' });
      const timer = setTimeout(() => child.proc.kill('SIGKILL'), 25_000);
      const { code, signal } = await child.exited.finally(() => clearTimeout(timer));
      expect({ code, signal }, child.stderr.join('')).toEqual({ code: 0, signal: null });
      expect(child.stderr.join('')).toContain('500 jobs deleted so far');
      expect(child.stderr.join('')).not.toContain('stopped');
      expect(JSON.parse(child.stdout.join(''))).toEqual({ dry_run: false, finished_before: expect.any(String), jobs: 500 });
      expect(countOf(w, 'SELECT count(*) FROM jobs')).toBe(0);
    });
  });

  it('replay: a SIGTERM taken after its last batch ends it as a whole run (it said "stopped part-way" and gave an --after that selects nothing)', async () => {
    await withMigratedDatabase(join(dir, 'replay-after-last.db'), async (path, w) => {
      processedEvents(w, 1_000, 1);
      // Sent inside the line of the second and last full batch: the next page is empty.
      const child = runTs('test/helpers/lateDuplicateSignal.ts', ['replay', '--all', '--progress', '--json'], { DATABASE_PATH: path, CLI_PROGRESS_INTERVAL_MS: '0', SIGNAL_AFTER: '1,000 events selected so far' });
      const timer = setTimeout(() => child.proc.kill('SIGKILL'), 25_000);
      const { code, signal } = await child.exited.finally(() => clearTimeout(timer));
      expect({ code, signal }, child.stderr.join('')).toEqual({ code: 0, signal: null });
      expect(child.stderr.join('')).not.toContain('stopped');
      expect(JSON.parse(child.stdout.join(''))).not.toHaveProperty('interrupted');
      expect(countOf(w, 'SELECT count(*) FROM jobs')).toBe(1_000);
    });
  });

  it.skipIf(!existsSync('/proc/self/wchan'))('replay: SIGTERM sent twice, as `timeout` sends it (to the command, then its process group), is one request: stopped after the batch, exit 143', async () => {
    await withMigratedDatabase(join(dir, 'replay-twice.db'), async (path, w) => {
      processedEvents(w, 100_000, 1); // as many as above, for the same reason
      // Taken as a second signal, the repeat ended the replay at once: killed by SIGTERM, no line.
      const r = await interruptAfterFirstBatch(w, ['replay', '--all'], { DATABASE_PATH: path }, 'SIGTERM', { twice: true });
      expect({ code: r.code, killedBy: r.killedBy }).toEqual({ code: 143, killedBy: null });
      const m = r.last.match(/^replay: stopped part-way by SIGTERM: (\d+) events selected; processing: \d+ queued before it \(they stay queued\); /);
      expect(m, r.last).not.toBeNull();
      expect(countOf(w, 'SELECT count(*) FROM jobs')).toBe(Number(m![1]));
    });
  });
});
