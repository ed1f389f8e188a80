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
  it.skipIf(!hasScript)('when Ctrl-C ends a replay --wait: cursor and line wrapping restored, and it still ends by SIGINT (130)', async () => {
    await withMigratedDatabase(join(dir, 'ctrl-c.db'), async (path, w) => {
      storeEvents(w, 3);
      const command = `${process.execPath} --import ${ROOT}node_modules/tsx/dist/loader.mjs ${ROOT}src/cli/main.ts replay --all --wait --timeout 60 --database ${path}`;
      const child = spawn('script', ['-qfec', command, '/dev/null'], { cwd: ROOT, env: { PATH: process.env['PATH'] ?? '', TERM: 'xterm' }, stdio: ['pipe', 'pipe', 'inherit'] });
      let out = '';
      child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
      const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
      const timer = setTimeout(() => child.kill('SIGKILL'), 40_000);
      try {
        // No workers here: the wait's bar stays at 0 of 3 until the Ctrl-C.
        await until(() => out.includes('waiting'), 'the --wait bar', 30_000);
        child.stdin.write('\x03');
        // script -e: the CLI's own status, 128 + SIGINT (2) as the shell reports a process ended by it.
        expect(await exited).toBe(130);
      } finally {
        clearTimeout(timer);
        child.kill('SIGKILL');
      }
      expect(terminalGivenBack(out), JSON.stringify(out)).toBe(true);
    });
  }, 60_000);
});
