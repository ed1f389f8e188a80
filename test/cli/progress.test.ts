import { join } from 'node:path';
import { Writable } from 'node:stream';
import type BetterSqlite3 from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { makeProgress } from '../../src/cli/progress.js';
import { readMigrations } from '../../src/db/migrate.js';
import { ManualClock } from '../../src/util/clock.js';
import { runTs } from '../helpers/childServer.js';
import { jobSeeder } from '../helpers/jobs.js';
import { tempDir } from '../helpers/receiver.js';
import { cli, until, whileCommitting, withMigratedDatabase } from './helpers.js';

const { dir, cleanup } = tempDir('receiver-progress-');
afterAll(cleanup);

/** Every step's line: the plain lines' 2 s spacing is what the throttle tests below check. */
const everyStep = { CLI_PROGRESS_INTERVAL_MS: '0' };
const ago = (days: number) => new Date(Date.now() - days * 86_400_000).toISOString();

/** `n` sink jobs finished 10 days ago (what `prune --older-than 7d` deletes), for the event `eventOf(i)`, in one transaction. */
function seedOldFinishedJobs(w: BetterSqlite3.Database, n: number, eventOf: (i: number) => string = () => 'evt'): void {
  const job = jobSeeder(w);
  w.transaction(() => {
    for (let i = 0; i < n; i++) job({ kind: 'sink:a', event_id: eventOf(i), state: 'done', run_at: ago(10), attempts: 1, max_attempts: 3, finished_at: ago(10) });
  })();
}
const lines = (stderr: string) => stderr.split('\n').filter((l) => l !== '');

/**
 * `args` run twice on the same state (`reset` before each): without --progress (nothing on
 * stderr), then with it (the same stdout). Returns the progress lines of the second run.
 */
async function progressLines(args: string[], env: Record<string, string>, reset: () => void): Promise<string[]> {
  reset();
  const quiet = await cli(args, env);
  expect(quiet).toMatchObject({ code: 0, stderr: '' });
  reset();
  const shown = await cli([...args, '--progress'], env);
  expect(shown.code, shown.stderr).toBe(0);
  expect(shown.stdout).toBe(quiet.stdout);
  return lines(shown.stderr);
}

describe('progress on stderr', () => {
  it('on a terminal: one line rewritten in place, at most every 200 ms, cleared at the end; elsewhere nothing unless forced, then a plain line every 2 s', () => {
    const clock = new ManualClock(0);
    const run = (tty: boolean, forced: boolean) => {
      const out: string[] = [];
      const p = makeProgress({ tty, forced, write: (t) => out.push(t), now: () => clock.now() });
      for (let i = 1; i <= 30; i++) {
        p.report(() => `step ${i}`);
        clock.advance(100);
      }
      p.report(() => 'checking', { phase: true });
      p.end();
      return out;
    };
    expect(run(false, false)).toEqual([]);
    // 3 s in steps of 100 ms: the first, then one every 2 s, and the phase at once.
    expect(run(false, true)).toEqual(['step 1\n', 'step 21\n', 'checking\n']);
    const tty = run(true, false);
    expect(tty.slice(0, 3)).toEqual(['\rstep 1\x1b[K', '\rstep 3\x1b[K', '\rstep 5\x1b[K']);
    expect(tty).toHaveLength(15 + 2);
    expect(tty.slice(-2)).toEqual(['\rchecking\x1b[K', '\r\x1b[K']);
    expect(run(true, true)).toEqual(tty);
    // Longer than the terminal is wide: cut, or each rewrite would leave a row behind.
    const narrow: string[] = [];
    makeProgress({ tty: true, forced: false, write: (t) => narrow.push(t), now: () => 0, columns: () => 20 }).report(() => 'backup: 1,234 of 52,000 pages (2%)');
    expect(narrow).toEqual(['\rbackup: 1,234 of 5…\x1b[K']);
  });

  it('backup and prune show their progress with --progress, and only their progress: stdout and the exit code as without it', async () => {
    await withMigratedDatabase(join(dir, 'big.db'), async (path, w) => {
      // About 700 pages of events, 2,600 old finished jobs (six transactions of prune).
      const event = w.prepare(`INSERT INTO events (id, event_type, source, received_at, delivery_id, envelope) VALUES (?, 'application.created', 'default', ?, ?, ?)`);
      w.transaction(() => {
        for (let i = 0; i < 1000; i++) event.run(`evt-${i}`, ago(10), `msg-${i}`, JSON.stringify({ padding: 'x'.repeat(2000) }));
      })();
      seedOldFinishedJobs(w, 2600, (i) => `evt-${i % 1000}`);

      const quiet = await cli(['backup', join(dir, 'quiet.db'), '--database', path], everyStep);
      expect(quiet.code, quiet.stderr).toBe(0);
      expect(quiet.stderr).toBe('');
      // Another process commits back to back meanwhile (a receiver under load): the copy in
      // steps stays under one snapshot, so its page count never goes back (a restart) or grows.
      const shown = await whileCommitting(path, 3000, async (writing) => {
        const r = await cli(['backup', join(dir, 'shown.db'), '--database', path, '--progress'], everyStep);
        expect(writing(), 'the writer ran all along').toBe(true);
        return r;
      });
      expect(shown.code, shown.stderr).toBe(0);
      const sameLine = (stdout: string, name: string) => stdout.replace(name, 'COPY').replace(/\d+ bytes, /, 'B bytes, ').replace(/in [\d.]+ s\n$/, 'in T s\n');
      expect(sameLine(shown.stdout, 'shown.db')).toBe(sameLine(quiet.stdout, 'quiet.db'));
      const backupLines = lines(shown.stderr);
      const pageLines = backupLines.filter((l) => /^backup: [\d,]+ of [\d,]+ pages \(\d+%\)$/.test(l));
      expect(pageLines.length, shown.stderr).toBeGreaterThanOrEqual(5);
      expect(pageLines[0]).toMatch(/^backup: 0 of [\d,]+ pages \(0%\)$/);
      expect(backupLines.slice(pageLines.length)).toEqual([expect.stringMatching(/^backup: ([\d,]+) of \1 pages \(100%\); checking the copy$/), 'backup: syncing the copy to disk']);
      const numbers = (l: string) => /: ([\d,]+) of ([\d,]+)/.exec(l)!.slice(1).map((n) => Number(n.replace(/,/g, '')));
      const done = pageLines.map((l) => numbers(l)[0]);
      expect(done).toEqual([...done].sort((a, b) => a! - b!));
      expect(new Set(backupLines.map((l) => (l.includes(' of ') ? numbers(l)[1] : 'phase'))).size, shown.stderr).toBe(2);

      const pruned = await cli(['prune', '--older-than', '7d', '--progress'], { DATABASE_PATH: path, ...everyStep });
      expect(pruned.code, pruned.stderr).toBe(0);
      expect(pruned.stdout).toMatch(/^deleted 2600 finished jobs \(state done, finished before [\d\-T:.]+Z\); jobs still to run and dead letters are kept\n$/);
      expect(lines(pruned.stderr)).toEqual(['prune: 500 jobs deleted so far', 'prune: 1,000 jobs deleted so far', 'prune: 1,500 jobs deleted so far', 'prune: 2,000 jobs deleted so far', 'prune: 2,500 jobs deleted so far', 'prune: 2,600 jobs deleted so far']);
      // A multiple of the batch: the last, empty batch says nothing more.
      seedOldFinishedJobs(w, 1000, (i) => `evt-${i % 1000}`);
      const evenly = await cli(['prune', '--older-than', '7d', '--progress'], { DATABASE_PATH: path, ...everyStep });
      expect(evenly.code, evenly.stderr).toBe(0);
      expect(lines(evenly.stderr)).toEqual(['prune: 500 jobs deleted so far', 'prune: 1,000 jobs deleted so far']);
      const nothing = await cli(['prune', '--older-than', '7d', '--progress'], { DATABASE_PATH: path, ...everyStep });
      expect(lines(nothing.stderr)).toEqual(['prune: 0 jobs deleted so far']);
      seedOldFinishedJobs(w, 1200, (i) => `evt-${i % 1000}`);
      const prunedQuietly = await cli(['prune', '--older-than', '7d', '--json'], { DATABASE_PATH: path, ...everyStep });
      expect(prunedQuietly.code, prunedQuietly.stderr).toBe(0);
      expect(prunedQuietly.stderr).toBe('');
      expect(JSON.parse(prunedQuietly.stdout)).toMatchObject({ dry_run: false, jobs: 1200 });
      const badSpacing = await cli(['prune', '--progress'], { DATABASE_PATH: path, CLI_PROGRESS_INTERVAL_MS: '2s' });
      expect(badSpacing).toMatchObject({ code: 1, stdout: '', stderr: 'config error: CLI_PROGRESS_INTERVAL_MS: expected milliseconds (0 or more), got "2s"\n' });
      // Left blank in an env file (`CLI_PROGRESS_INTERVAL_MS=`): unset, as the server's variables, not an error ending every command.
      const blank = await cli(['prune', '--older-than', '7d', '--dry-run'], { DATABASE_PATH: path, CLI_PROGRESS_INTERVAL_MS: '' });
      expect(blank).toMatchObject({ code: 0, stderr: '' });
      expect(blank.stdout).toMatch(/^would delete 0 finished jobs /);
    });
  }, 60_000);

  it('the spacing of the lines is measured on a monotonic clock: a wall clock stepped back (NTP, a VM resumed) does not stop them', async () => {
    await withMigratedDatabase(join(dir, 'clock.db'), async (path, w) => {
      seedOldFinishedJobs(w, 2600);
      // In the CLI: the wall clock (Date.now) goes back an hour once the first progress line is written.
      const stepBack = `const real = Date.now; let back = 0; const write = process.stderr.write.bind(process.stderr);
        process.stderr.write = (chunk, ...rest) => { if (String(chunk).startsWith('prune:')) back = 3_600_000; return write(chunk, ...rest); };
        Date.now = () => real() - back;`;
      const pruned = await cli(['prune', '--older-than', '7d', '--progress'], { DATABASE_PATH: path, ...everyStep, NODE_OPTIONS: `--import data:text/javascript,${encodeURIComponent(stepBack)}` });
      expect(pruned.code, pruned.stderr).toBe(0);
      expect(lines(pruned.stderr)).toEqual(['prune: 500 jobs deleted so far', 'prune: 1,000 jobs deleted so far', 'prune: 1,500 jobs deleted so far', 'prune: 2,000 jobs deleted so far', 'prune: 2,500 jobs deleted so far', 'prune: 2,600 jobs deleted so far']);
    });
  });

  it('dead-letters retry and discard show the dead letters they have been through with --progress, stdout as without it', async () => {
    await withMigratedDatabase(join(dir, 'dead.db'), async (path, w) => {
      const job = jobSeeder(w);
      w.transaction(() => {
        for (let i = 0; i < 1200; i++) job({ kind: 'sink:crm', event_id: `evt-${i}`, state: 'dead', run_at: ago(1), attempts: 3, max_attempts: 3, finished_at: ago(1) });
      })();
      const killAgain = () => w.prepare("UPDATE jobs SET state = 'dead'").run();
      const env = { DATABASE_PATH: path, ...everyStep };
      expect(await progressLines(['dead-letters', 'retry', '--all'], env, killAgain)).toEqual([
        'dead-letters retry: reading the dead letters chosen',
        'dead-letters retry: 500 of 1,200 dead letters (41%)',
        'dead-letters retry: 1,000 of 1,200 dead letters (83%)',
        'dead-letters retry: 1,200 of 1,200 dead letters (100%)',
      ]);
      killAgain();
      const discarded = await cli(['dead-letters', 'discard', '--all', '--progress', '--json'], env);
      expect(discarded.code, discarded.stderr).toBe(0);
      expect(JSON.parse(discarded.stdout)).toEqual({ dry_run: false, discarded: 1200, by_kind: { 'sink:crm': 1200 }, kept: [] });
      expect(lines(discarded.stderr)).toEqual([
        'dead-letters discard: reading the dead letters chosen',
        'dead-letters discard: 500 of 1,200 dead letters (41%)',
        'dead-letters discard: 1,000 of 1,200 dead letters (83%)',
        'dead-letters discard: 1,200 of 1,200 dead letters (100%)',
      ]);
    });
  }, 60_000);

  it('replay with --progress shows the events selected page by page, then what --wait saw finish; stdout as without it', async () => {
    await withMigratedDatabase(join(dir, 'replay.db'), async (path, w) => {
      const event = w.prepare(`INSERT INTO events (id, event_type, source, received_at, delivery_id, envelope) VALUES (?, 'application.created', 'default', ?, ?, '{}')`);
      w.transaction(() => {
        for (let i = 0; i < 1200; i++) event.run(`evt-${String(i).padStart(4, '0')}`, ago(1), `msg-${i}`);
      })();
      w.prepare('UPDATE processing_cursor SET last_event_rowid = (SELECT max(rowid) FROM events)').run();
      const env = { DATABASE_PATH: path, ...everyStep };
      const selectedSoFar = ['replay: reading the events selected', 'replay: 500 events selected so far', 'replay: 1,000 events selected so far', 'replay: 1,200 events selected so far'];

      const quiet = await cli(['replay', '--all', '--dry-run', '--json'], env);
      expect(quiet).toMatchObject({ code: 0, stderr: '' });
      const dry = await cli(['replay', '--all', '--dry-run', '--json', '--progress'], env);
      expect(dry.code, dry.stderr).toBe(0);
      expect(dry.stdout).toBe(quiet.stdout);
      expect(lines(dry.stderr)).toEqual(selectedSoFar);
      // On a terminal, --json: one line rewritten in place, cleared before the JSON.
      const out: string[] = [];
      let terminal = '';
      const stderr = new Writable({ write: (chunk: Buffer, _enc, done) => ((terminal += chunk.toString()), done()) });
      const { runCli } = await import('../../src/cli/program.js');
      const outcome = await runCli(['replay', '--all', '--dry-run', '--json', '--database', path], { env: {}, out: (t) => out.push(t), err: (t) => (terminal += `${t}\n`), isTTY: true, stderr });
      expect(outcome.code).toBe(0);
      expect(`${out.join('\n')}\n`).toBe(quiet.stdout);
      expect(terminal.startsWith('\rreplay: reading the events selected\x1b[K'), JSON.stringify(terminal)).toBe(true);
      expect(terminal.endsWith('\r\x1b[K') && !terminal.includes('\n'), JSON.stringify(terminal)).toBe(true);

      // No receiver here: the test finishes the jobs the replay queued while it waits for them.
      const running = cli(['replay', '--all', '--wait', '--timeout', '60', '--json', '--progress'], env, 60_000);
      await until(() => w.prepare("SELECT count(*) FROM jobs WHERE kind = 'process_event' AND state = 'pending'").pluck().get() === 1200, 'the replay queued its jobs');
      w.prepare("UPDATE jobs SET state = 'done', finished_at = ? WHERE kind = 'process_event'").run(new Date().toISOString());
      const waited = await running;
      expect(waited.code, waited.stderr).toBe(0);
      expect(JSON.parse(waited.stdout)).toMatchObject({ selected: 1200, processing: { queued: 1200 }, finished: { done: 1200, failed: 0 } });
      const waitLines = lines(waited.stderr);
      expect(waitLines.slice(0, 4)).toEqual(selectedSoFar);
      expect(waitLines.slice(4).every((l) => /^replay --wait: [\d,]+ of 1,200 finished \(\d+%\)$/.test(l)), waited.stderr).toBe(true);
      expect(waitLines.at(-1)).toBe('replay --wait: 1,200 of 1,200 finished (100%)');
    });
  }, 90_000);

  it('prune --progress whose stderr reader goes away (a log pipe that died): the prune goes on to the end, exit 0', async () => {
    await withMigratedDatabase(join(dir, 'gone.db'), async (path, w) => {
      seedOldFinishedJobs(w, 20_000);
      const child = runTs('src/cli/main.ts', ['prune', '--older-than', '7d', '--progress'], { DATABASE_PATH: path, ...everyStep });
      // Gone after the first of its 40 lines (one a transaction, 5 ms apart at least).
      child.proc.stderr!.once('data', () => child.proc.stderr!.destroy());
      const { code } = await child.exited;
      // The first line at least; more when this host was too busy to take the first chunk before the
      // next lines were written (5 ms apart), but never the last: the reader was gone by then.
      expect(child.stderr.join('')).toMatch(/^prune: 500 jobs deleted so far\n(prune: [\d,]+ jobs deleted so far\n)*$/);
      expect(child.stderr.join('')).not.toContain('prune: 20,000 jobs deleted so far');
      expect(child.stdout.join('')).toMatch(/^deleted 20000 finished jobs /);
      expect(code).toBe(0);
      expect(w.prepare('SELECT count(*) FROM jobs').pluck().get()).toBe(0);
    });
  });

  it('sinks send-now with --progress shows the deliveries made due so far; stdout as without it', async () => {
    await withMigratedDatabase(join(dir, 'send-now.db'), async (path, w) => {
      w.prepare("INSERT INTO sink_state (sink, updated_at) VALUES ('crm', ?)").run(ago(1));
      const job = jobSeeder(w);
      const backOff = () =>
        w.transaction(() => {
          w.prepare("DELETE FROM jobs").run();
          for (let i = 0; i < 1200; i++) job({ kind: 'sink:crm', event_id: `evt-${i}`, state: 'pending', run_at: ago(-1), attempts: 2, max_attempts: 8, created_at: ago(1) });
        })();
      const env = { DATABASE_PATH: path, ...everyStep };
      expect(await progressLines(['sinks', 'send-now', 'crm'], env, backOff)).toEqual(['sinks send-now: 500 deliveries made due so far', 'sinks send-now: 1,000 deliveries made due so far', 'sinks send-now: 1,200 deliveries made due so far']);
    });
  });

  it('migrate with --progress names each migration as it starts; stdout as without it', async () => {
    const all = readMigrations();
    const quiet = await cli(['migrate', '--database', join(dir, 'm-quiet.db')]);
    expect(quiet).toMatchObject({ code: 0, stderr: '' });
    const shown = await cli(['migrate', '--database', join(dir, 'm-shown.db'), '--progress']);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout.replace('m-shown.db', 'DB')).toBe(quiet.stdout.replace('m-quiet.db', 'DB'));
    expect(lines(shown.stderr)).toEqual(all.map((m, i) => `migrate: applying ${String(m.version).padStart(3, '0')}_${m.name} (${i + 1} of ${all.length})`));
    const again = await cli(['migrate', '--database', join(dir, 'm-shown.db'), '--progress']);
    expect(again).toMatchObject({ code: 0, stderr: '' });
  });
});
