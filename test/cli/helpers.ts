import { spawn } from 'node:child_process';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import BetterSqlite3 from 'better-sqlite3';
import { expect } from 'vitest';
import { ROOT, runTs } from '../helpers/childServer.js';
import { openIngestWaitSignal } from '../../src/db/ingestWaitSignal.js';
import { jobSeeder } from '../helpers/jobs.js';
import { until as poll } from '../helpers/waitFor.js';

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

/** Polls `check` until it returns a value, every 50 ms, 15 s at most (a child process's start takes seconds). */
export const until = <T>(check: () => T | undefined | false | Promise<T | undefined | false>, what: string, timeoutMs = 15_000): Promise<T> => poll(check, what, timeoutMs, 50);

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

/** What workersSayTheyWait returns. */
export interface WorkersSaying {
  /** Stops saying it, and clears the slot (their write went through). */
  stop(): void;
  /**
   * The wall-clock spans (Unix ms, from/to) in which the value last said had gone stale to a reader
   * while the next was not yet written: this process got no turn for its next say. A command's
   * pause that fell in one was rightly cut short (nobody said they wait), so a gap measured across
   * one shows nothing about the command.
   */
  lapses(): Lapse[];
}

/** A wall-clock span (Unix ms) in which the workers' word had gone stale (see WorkersSaying.lapses). */
export interface Lapse {
  from: number;
  to: number;
}

/** A value said at `at` (written `at + AHEAD_MS`) counts for a reader until `at + AHEAD_MS + 50` (ingestWaitSignal's STALE_MS): a lapse from then, with 5 ms to spare. */
const AHEAD_MS = 40;
const FRESH_FOR_MS = AHEAD_MS + 50 - 5;

/**
 * A running receiver's workers, retrying a write that keeps finding the lock held: they say so in
 * the database at `path`'s `-ingest-wait` file at each try, as BusyRetrySqliteDialect does, until
 * `stop()`. A value counts while it is within 50 ms of the reader's clock (either way), so each is
 * written 40 ms ahead: said every 5 ms, it stays fresh through a stall of this process of up to
 * about 85 ms (a loaded machine), where one written as of now lapsed after 45. Stalls longer than
 * that still happen on a shared 2-core machine (a 5 ms timer of an idle process beside two CPU
 * burners and a test run: gaps of 84 and 121 ms in 30 s), and nothing this process does can write
 * further ahead (a value more than 50 ms ahead counts as a clock step, not waiting): `lapses()`
 * says when one happened, for a test to leave that gap out.
 */
export function workersSayTheyWait(path: string): WorkersSaying {
  const workers = openIngestWaitSignal(path);
  const spans: Lapse[] = [];
  let lastSaid: number | null = null;
  const say = () => {
    const at = Date.now();
    workers.workersWaiting(at + AHEAD_MS);
    // Read after the write: a stall between the two reads keeps the old value in the file longer.
    const written = Date.now();
    if (lastSaid !== null && written > lastSaid + FRESH_FOR_MS) spans.push({ from: lastSaid + FRESH_FOR_MS, to: written });
    lastSaid = at;
  };
  say();
  const saying = setInterval(say, 5);
  return {
    stop() {
      clearInterval(saying);
      // The span up to now, if the last say is stale already (what ran since saw nobody waiting).
      const now = Date.now();
      if (lastSaid !== null && now > lastSaid + FRESH_FOR_MS) spans.push({ from: lastSaid + FRESH_FOR_MS, to: now });
      lastSaid = null;
      workers.workersThrough();
      workers.close();
    },
    lapses: () => [...spans],
  };
}

/** A transaction (or batch) seen from inside (wall-clock ms): its first statement, and its last. */
export interface Span {
  first: number;
  last: number;
}

/**
 * A bulk command's transactions (or batches), at `times` (wall-clock ms: when each began, or the
 * span from its first statement to its last), came `minMs` apart at least, each two between which
 * the workers' word stayed fresh: across a lapse of the test process's saying (see
 * WorkersSaying.lapses) the command rightly saw nobody waiting and went on, and that gap says
 * nothing of it. At least one gap is judged, or the call fails. A gap is measured from the end of
 * one to the start of the next where spans are given: from start to start, it holds the
 * transaction's own work too, which on a loaded machine took 30 ms and more without any pause.
 */
export function expectHeldBack(times: (number | Span)[], lapses: Lapse[], minMs: number, what = 'transactions'): void {
  expect(times.length, `${what} seen`).toBeGreaterThanOrEqual(2);
  const spans = times.map((t) => (typeof t === 'number' ? { first: t, last: t } : t));
  const gaps = spans.slice(1).map((s, i) => {
    const from = spans[i]!.last;
    return { ms: Math.round(s.first - from), lapsed: lapses.some((l) => l.from <= s.first + 1 && l.to >= from - 1) };
  });
  const said = `${what} apart by ${gaps.map((g) => `${g.ms}${g.lapsed ? ' (the workers\' word lapsed meanwhile)' : ''}`).join(', ')} ms`;
  const judged = gaps.filter((g) => !g.lapsed);
  expect(judged.length, `${said}: no gap with the workers' word fresh throughout`).toBeGreaterThanOrEqual(1);
  expect(judged.every((g) => g.ms >= minMs), said).toBe(true);
}

/** What answerCutOff returns: its origin, the requests it took (method, URL, headers), and close. */
export interface CutOffServer {
  origin: string;
  requests: { method: string; url: string; headers: IncomingHttpHeaders }[];
  close(): void;
}

/**
 * A server on 127.0.0.1 that answers every request 200 with its headers and `partial` of a longer
 * body, then closes the connection: a proxy or a service that dies mid-answer.
 */
export async function answerCutOff(partial: string): Promise<CutOffServer> {
  const requests: CutOffServer['requests'] = [];
  const server = createServer((req, res) => {
    requests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers });
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' });
      res.write(partial);
      setTimeout(() => req.socket.destroy(), 20);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, requests, close: () => server.close() };
}
