import { spawn, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import type BetterSqlite3 from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/childServer.js';
import { tempDir } from '../helpers/receiver.js';
import { until, withMigratedDatabase } from './helpers.js';

const { dir, cleanup } = tempDir('receiver-bar-');
afterAll(cleanup);

const HIDE_CURSOR = '\x1b[?25l';
const SHOW_CURSOR = '\x1b[?25h';
const NO_WRAP = '\x1b[?7l';
const WRAP = '\x1b[?7h';

function storeEvents(w: BetterSqlite3.Database, n: number): void {
  const insert = w.prepare(`INSERT INTO events (id, event_type, source, received_at, delivery_id, envelope) VALUES (?, 'application.created', 'default', ?, ?, '{}')`);
  w.transaction(() => {
    for (let i = 0; i < n; i++) insert.run(`evt-${i}`, new Date().toISOString(), `msg-${i}`);
  })();
  w.prepare('UPDATE processing_cursor SET last_event_rowid = (SELECT max(rowid) FROM events)').run();
}

/** Whether the terminal output gives back what the bar took: the cursor and line wrapping, after the last time it hid them. */
const terminalGivenBack = (out: string) => {
  const hidden = out.lastIndexOf(HIDE_CURSOR);
  return hidden >= 0 && out.indexOf(SHOW_CURSOR, hidden) > hidden && out.indexOf(WRAP, out.lastIndexOf(NO_WRAP)) > out.lastIndexOf(NO_WRAP);
};

describe("replay's progress bar gives the terminal back", () => {
  it('when the replay fails midway: cursor and line wrapping restored, the error on a line of its own', async () => {
    await withMigratedDatabase(join(dir, 'fails.db'), async (path, w) => {
      storeEvents(w, 3);
      // The replay's first write fails, after its bar has started.
      w.exec("CREATE TRIGGER no_jobs BEFORE INSERT ON jobs BEGIN SELECT RAISE(ABORT, 'no jobs today'); END");
      let terminal = '';
      const stderr = Object.assign(new Writable({ write: (chunk: Buffer, _enc, done) => ((terminal += chunk.toString()), done()) }), { isTTY: true, columns: 100 });
      const { runCli } = await import('../../src/cli/program.js');
      const outcome = await runCli(['replay', '--all', '--database', path], { env: {}, out: () => {}, err: (t) => (terminal += `${t}\n`), isTTY: true, stderr });
      expect(outcome.code).toBe(1);
      expect(terminal).toContain(HIDE_CURSOR);
      expect(terminalGivenBack(terminal), JSON.stringify(terminal)).toBe(true);
      expect(terminal).toMatch(/\nerror: no jobs today\n$/);
    });
  });

  // A terminal for the CLI: `script` runs it on a pseudo-terminal, and a Ctrl-C typed there is
  // the terminal's own SIGINT to it.
  const hasScript = spawnSync('script', ['--version']).status === 0;

  /**
   * `replay args` on a pseudo-terminal, Ctrl-C typed once its output shows `bar`. Returns the
   * CLI's exit status (script -e: 128 + SIGINT (2) as the shell reports a process ended by it) and
   * what the terminal got.
   */
  async function ctrlCDuringReplay(args: string[], bar: string, killAfterMs: number): Promise<{ status: number | null; out: string }> {
    const command = `${process.execPath} --import ${ROOT}node_modules/tsx/dist/loader.mjs ${ROOT}src/cli/main.ts replay ${args.join(' ')}`;
    const child = spawn('script', ['-qfec', command, '/dev/null'], { cwd: ROOT, env: { PATH: process.env['PATH'] ?? '', TERM: 'xterm' }, stdio: ['pipe', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    const timer = setTimeout(() => child.kill('SIGKILL'), killAfterMs);
    try {
      await until(() => out.includes(bar), `the bar "${bar}"`, 30_000);
      child.stdin.write('\x03');
      return { status: await exited, out };
    } finally {
      clearTimeout(timer);
      child.kill('SIGKILL');
    }
  }

  it.skipIf(!hasScript)('when Ctrl-C ends a replay --wait: cursor and line wrapping restored, and it still ends by SIGINT (130)', async () => {
    await withMigratedDatabase(join(dir, 'ctrl-c.db'), async (path, w) => {
      storeEvents(w, 3);
      // No workers here: the wait's bar stays at 0 of 3 until the Ctrl-C.
      const { status, out } = await ctrlCDuringReplay(['--all', '--wait', '--timeout', '60', '--database', path], 'waiting', 40_000);
      expect(status).toBe(130);
      expect(terminalGivenBack(out), JSON.stringify(out)).toBe(true);
    });
  }, 60_000);

  it.skipIf(!hasScript)('when Ctrl-C is typed while the replay queues its events: it stops after the batch in flight, by SIGINT (130), saying where, not after queueing them all', async () => {
    await withMigratedDatabase(join(dir, 'ctrl-c-queueing.db'), async (path, w) => {
      // 200 batches: seconds of queueing, while the bar shows.
      const events = 100_000;
      storeEvents(w, events);
      const { status, out } = await ctrlCDuringReplay(['--all', '--database', path], 'replaying', 90_000);
      // Without a turn of the event loop between batches the handler ran only after every event was queued (or never: exit 0).
      expect(status, out.slice(-400)).toBe(130);
      expect(terminalGivenBack(out), JSON.stringify(out.slice(-400))).toBe(true);
      // After the batch in flight, not at once: a line after the bar says what was queued, and where to go on.
      const m = out.match(/replay: stopped part-way by SIGINT: (\d+) events selected; processing: \d+ queued before it \(they stay queued\); .* --after '[^']+'/);
      expect(m, JSON.stringify(out.slice(-600))).not.toBeNull();
      expect(w.prepare('SELECT count(*) FROM jobs').pluck().get()).toBe(Number(m![1]));
      expect(Number(m![1])).toBeLessThan(events);
    });
  }, 120_000);
});
