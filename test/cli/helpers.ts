import { spawn } from 'node:child_process';
import BetterSqlite3 from 'better-sqlite3';
import { expect } from 'vitest';
import { ROOT, runTs } from '../helpers/childServer.js';
import { openIngestWaitSignal } from '../../src/db/ingestWaitSignal.js';
import { jobSeeder } from '../helpers/jobs.js';

export interface CliResult {
  code: number | null;
  /** SIGKILL when it outlived `killAfterMs` */
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs the real CLI (src/cli/main.ts) as a child process, with only the given environment (plus
 * PATH). A child still running after `killAfterMs` is killed, so a hang fails its test and leaves
 * no process behind.
 */
export async function cli(args: string[], env: Record<string, string> = {}, killAfterMs = 25_000): Promise<CliResult> {
  const child = runTs('src/cli/main.ts', args, env);
  const timer = setTimeout(() => child.proc.kill('SIGKILL'), killAfterMs);
  const { code, signal } = await child.exited.finally(() => clearTimeout(timer));
  return { code, signal, stdout: child.stdout.join(''), stderr: child.stderr.join('') };
}

/** Polls `check` until it returns a value (bounded). */
export async function until<T>(check: () => T | undefined | false | Promise<T | undefined | false>, what: string, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A database `migrate` made at `path`, written meanwhile through a connection of the test's own (as a running receiver would). */
export async function withMigratedDatabase(path: string, body: (path: string, w: BetterSqlite3.Database) => Promise<void>): Promise<void> {
  expect((await cli(['migrate'], { DATABASE_PATH: path })).code).toBe(0);
  const w = new BetterSqlite3(path);
  try {
    await body(path, w);
  } finally {
    w.close();
  }
}

/** What a commit of whileCommitting writes: `statement` (SQL), run with `args` (JavaScript over the commit's number `n`). */
export interface CommittedRow {
  statement: string;
  args: string;
}

/**
 * Runs `body` while another process commits to the database at `path` back to back (one statement
 * per commit, bounded to 30 s: `row`, or a row of `row` bytes into a table `filler`), as a receiver
 * under load does; `body` starts once it is committing, and is told whether it still is. A writer
 * that has not made its first 50 commits within `startTimeoutMs` (a lock held on the database, a
 * start-up that hangs), or that ends before them, fails the call at once with what it waited for.
 */
export async function whileCommitting<T>(
  path: string,
  row: number | CommittedRow,
  body: (writing: () => boolean) => Promise<T>,
  startTimeoutMs = 10_000,
): Promise<T> {
  const { statement, args, setup } =
    typeof row === 'number'
      ? { statement: 'INSERT INTO filler (v) VALUES (?)', args: `'x'.repeat(${row})`, setup: 'CREATE TABLE IF NOT EXISTS filler (v TEXT)' }
      : { ...row, setup: '' };
  const writer = spawn(
    process.execPath,
    [
      '-e',
      `const db = new (require('better-sqlite3'))(process.argv[1]);
       db.pragma('journal_mode = WAL');
       if (${JSON.stringify(setup)}) db.exec(${JSON.stringify(setup)});
       const ins = db.prepare(${JSON.stringify(statement)});
       const end = Date.now() + 30000;
       let n = 0;
       (function loop() { if (Date.now() > end) process.exit(0); ins.run(${args}); if (++n === 50) console.log('go'); setImmediate(loop); })();`,
      path,
    ],
    { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`whileCommitting: the writer had not made its first 50 commits to ${path} after ${startTimeoutMs} ms (a lock held on the database, or a writer stuck starting)`)),
        startTimeoutMs,
      );
      writer.stdout!.once('data', () => {
        clearTimeout(timer);
        resolve();
      });
      writer.once('exit', (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`whileCommitting: the writer ended (exit code ${code}, signal ${signal}) before its first 50 commits to ${path}`));
      });
    });
    return await body(() => writer.exitCode === null);
  } finally {
    writer.kill('SIGKILL');
  }
}

/** `n` events dead-lettered for the sink crm: their jobs dead, their delivery rows dead. */
export function deadDeliveries(w: BetterSqlite3.Database, n: number): void {
  const at = '2026-11-20T10:00:00.000Z';
  const job = jobSeeder(w);
  const delivery = w.prepare(
    `INSERT INTO deliveries (event_id, sink, message_id, state, attempts, last_status_code, last_error, last_attempt_at, queued_at, created_at, updated_at)
     VALUES (@e, 'crm', 'msg_' || @e, 'dead', 25, 503, 'HTTP 503', @at, @at, @at, @at)`,
  );
  w.transaction(() => {
    for (let i = 0; i < n; i++) {
      job({ kind: 'sink:crm', payload: JSON.stringify({ event_id: `evt-${i}`, sink: 'crm' }), event_id: `evt-${i}`, state: 'dead', run_at: at, attempts: 25, last_error: 'HTTP 503', finished_at: at });
      delivery.run({ e: `evt-${i}`, at });
    }
  })();
}

/**
 * A running receiver's workers, retrying a write that keeps finding the lock held: they say so in
 * the database at `path`'s `-ingest-wait` file at each try, as BusyRetrySqliteDialect does, until
 * the returned function is called. A value counts while it is within 50 ms of the reader's clock
 * (either way), so each is written 40 ms ahead: said every 5 ms, it stays fresh through a stall of
 * this process of up to about 85 ms (a loaded machine), where one written as of now lapsed after 45.
 */
export function workersSayTheyWait(path: string): () => void {
  const workers = openIngestWaitSignal(path);
  const say = () => workers.workersWaiting(Date.now() + 40);
  say();
  const saying = setInterval(say, 5);
  return () => {
    clearInterval(saying);
    workers.workersThrough();
    workers.close();
  };
}
