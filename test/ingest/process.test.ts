import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { freePort, ROOT, runTs, waitForHttp } from '../helpers/childServer.js';
import { tempDir } from '../helpers/receiver.js';
import { waitFor } from '../helpers/waitFor.js';
import { envelope, newSecret, postSigned, signDelivery } from '../helpers/signing.js';

const API = { HIRING_API_URL: 'http://127.0.0.1:9', HIRING_API_KEY: 'sk-test.unused' };

const { dir, cleanup } = tempDir('receiver-proc-');
afterAll(cleanup);

describe('the receiver as a real process', () => {
  it('exits non-zero with one clear message per bad setting, naming the variable', async () => {
    const child = runTs('src/main.ts', [], {
      WEBHOOK_SECRET: 'whsec_tooShort',
      PORT: 'eighty',
      LOG_LEVEL: 'loud',
      HIRING_API_KEY: 'not-a-key',
      HIRING_API_URL: 'http://127.0.0.1:9',
      DATABASE_PATH: join(dir, 'never.db'),
    });
    const { code } = await child.exited;
    expect(code).toBe(1);
    const err = child.stderr.join('');
    expect(err).toMatch(/config error: PORT: must be an integer, got "eighty"/);
    expect(err).toMatch(/config error: LOG_LEVEL: must be one of/);
    expect(err).toMatch(/config error: WEBHOOK_SECRET: (is not "whsec_" followed by valid base64|decodes to \d+ bytes)/);
    expect(err).toMatch(/config error: HIRING_API_KEY: must have the form sk-<segment>\.<segment>/);
    expect(err).not.toContain('not-a-key');
    expect(err.trim().split('\n')).toHaveLength(4);
  });

  it('refuses arguments (it is not the CLI) before touching the database: exit 2, naming the CLI', async () => {
    const path = join(dir, 'untouched.db');
    // Without the check each would start a whole receiver: stopped by SIGKILL after a bound, then.
    const exited = (c: ReturnType<typeof runTs>) => {
      const timer = setTimeout(() => c.proc.kill('SIGKILL'), 15_000);
      return c.exited.finally(() => clearTimeout(timer));
    };
    const child = runTs('src/main.ts', ['status', '--bogus'], { ...API, WEBHOOK_SECRET: newSecret(), DATABASE_PATH: path, PORT: '0' });
    expect((await exited(child)).code).toBe(2);
    expect(child.stderr.join('')).toBe(
      'error: dist/main.js runs the receiver and takes no arguments (got "status --bogus"); for commands run hiring-receiver <command> (node dist/cli/main.js <command>, or npm run cli -- <command>), e.g. hiring-receiver --help\n',
    );
    expect(existsSync(path)).toBe(false);
    // Named without its extension, as `node dist/main status` resolves it.
    const bare = runTs('src/main', ['status'], { ...API, WEBHOOK_SECRET: newSecret(), DATABASE_PATH: path, PORT: '0' });
    expect((await exited(bare)).code).toBe(2);
    expect(existsSync(path)).toBe(false);
  });

  it('exits non-zero when WEBHOOK_SECRET is missing', async () => {
    const child = runTs('src/main.ts', [], { ...API, DATABASE_PATH: join(dir, 'never.db') });
    expect((await child.exited).code).toBe(1);
    expect(child.stderr.join('')).toMatch(/WEBHOOK_SECRET: is required/);
  });

  it('refuses a database written by a newer version', async () => {
    const path = join(dir, 'newer.db');
    const db = new BetterSqlite3(path);
    db.exec("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL); INSERT INTO schema_migrations VALUES (999, 'future', 'x')");
    db.close();
    const child = runTs('src/main.ts', [], { ...API, WEBHOOK_SECRET: newSecret(), DATABASE_PATH: path, PORT: '0' });
    expect((await child.exited).code).toBe(1);
    expect(child.stderr.join('')).toMatch(/schema version 999.*newer version of the receiver/);
  });

  it.skipIf(!existsSync('/proc/self'))('exits non-zero naming DATABASE_PATH when its directory cannot be made (under /proc, where Node\'s recursive mkdir never returns)', async () => {
    const child = runTs('src/main.ts', [], { ...API, WEBHOOK_SECRET: newSecret(), DATABASE_PATH: '/proc/no-such-dir/receiver.db', PORT: '0' });
    const timer = setTimeout(() => child.proc.kill('SIGKILL'), 10_000);
    expect(await child.exited.finally(() => clearTimeout(timer))).toEqual({ code: 1, signal: null });
    expect(child.stderr.join('')).toBe(
      "fatal: cannot open the database at /proc/no-such-dir/receiver.db (DATABASE_PATH): ENOENT: no such file or directory, mkdir '/proc/no-such-dir'\n",
    );
  });

  it('a second receiver on a port in use fails before its workers take the live one\'s running jobs', async () => {
    const path = join(dir, 'second.db');
    const secret = newSecret();
    const port = await freePort();
    // The live receiver: listening on the port, with a job its worker is running right now.
    const first = runTs('src/main.ts', [], { ...API, WEBHOOK_SECRET: secret, DATABASE_PATH: path, PORT: String(port), HOST: '127.0.0.1', WORKER_CONCURRENCY: '0' });
    try {
      await waitForHttp(`http://127.0.0.1:${port}/healthz`, undefined, first);
      const db = new BetterSqlite3(path);
      const now = new Date().toISOString();
      const leased = new Date(Date.now() + 60_000).toISOString();
      const job = db
        .prepare(
          `INSERT INTO jobs (kind, payload, event_id, source, state, run_at, attempts, max_attempts, lease_owner, lease_token, lease_expires_at, created_at, updated_at)
           VALUES ('fetch_result', '{}', 'evt-live', 'default', 'running', ?, 1, 25, 'live-process', 't', ?, ?, ?)`,
        )
        .run(now, leased, now, now).lastInsertRowid;
      const second = runTs('src/main.ts', [], { ...API, WEBHOOK_SECRET: secret, DATABASE_PATH: path, PORT: String(port), HOST: '127.0.0.1' });
      const timer = setTimeout(() => second.proc.kill('SIGKILL'), 15_000);
      expect(await second.exited.finally(() => clearTimeout(timer))).toEqual({ code: 1, signal: null });
      expect(second.stderr.join('')).toBe(`fatal: PORT: 127.0.0.1:${port} is already in use (another receiver still running?); stop it or choose another PORT\n`);
      expect(second.stdout.join('')).not.toMatch(/workers started|jobs left running/);
      // The same failure as one JSON line at fatal, for a log pipeline that alerts on level.
      const logged = second.stdout.join('').split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(logged.filter((l) => l.level === 60)).toEqual([
        expect.objectContaining({ msg: 'start failed', mode: 'serve', err: `PORT: 127.0.0.1:${port} is already in use (another receiver still running?); stop it or choose another PORT` }),
      ]);
      expect(db.prepare('SELECT state, lease_owner FROM jobs WHERE id = ?').get(job)).toEqual({ state: 'running', lease_owner: 'live-process' });
      db.close();
    } finally {
      first.proc.kill('SIGTERM');
      await first.exited;
    }
  });

  it('a crash (an error nothing catches) is one JSON line at fatal, then exit 1', async () => {
    const child = runTs('test/helpers/crashAfterStart.ts', [], { ...API, WEBHOOK_SECRET: newSecret(), DATABASE_PATH: join(dir, 'crash.db'), PORT: '0', HOST: '127.0.0.1' });
    const timer = setTimeout(() => child.proc.kill('SIGKILL'), 20_000);
    expect(await child.exited.finally(() => clearTimeout(timer))).toEqual({ code: 1, signal: null });
    const lines = child.stdout.join('').trim().split('\n');
    expect(JSON.parse(lines.at(-1)!)).toMatchObject({ level: 60, msg: 'crashed', kind: 'uncaught exception', err: 'boom in a timer (test)', stack: expect.stringContaining('crashAfterStart.ts') });
    // Nothing else on stderr: no text stack trace beside it.
    expect(child.stderr.join('')).toBe('');
  });

  it.each(['SIGTERM', 'SIGINT'] as const)('drains and exits 0 on %s', async (signal) => {
    const secret = newSecret();
    const port = await freePort();
    const child = runTs('src/main.ts', [], { ...API, WEBHOOK_SECRET: secret, DATABASE_PATH: join(dir, `term-${signal}.db`), PORT: String(port), HOST: '127.0.0.1' });
    const url = `http://127.0.0.1:${port}`;
    await waitForHttp(`${url}/healthz`, undefined, child);
    const env = envelope();
    expect((await postSigned(url, secret, JSON.stringify(env))).status).toBe(200);
    child.proc.kill(signal);
    expect(await child.exited).toEqual({ code: 0, signal: null });
    expect(child.stdout.join('')).toMatch(new RegExp(`"signal":"${signal}","msg":"shutting down"[\\s\\S]*"msg":"receiver stopped"`));
  });

  it('a SIGTERM during the start-up lets the start finish, then drains and exits 0 (not killed by the signal mid-start)', async () => {
    const child = runTs('test/helpers/signalDuringStart.ts', [], { ...API, WEBHOOK_SECRET: newSecret(), DATABASE_PATH: join(dir, 'term-start.db'), PORT: '0', HOST: '127.0.0.1' });
    const timer = setTimeout(() => child.proc.kill('SIGKILL'), 20_000);
    expect(await child.exited.finally(() => clearTimeout(timer))).toEqual({ code: 0, signal: null });
    const msgs = child.stdout.join('').trim().split('\n').map((l) => (JSON.parse(l) as { msg: string }).msg);
    expect(msgs).toContain('shutting down');
    expect(msgs).toContain('receiver listening');
    expect(msgs.at(-1)).toBe('receiver stopped');
  });

  it.each([
    ['under an npm script (npm start), drains and exits when npm goes away (kill of npm\'s pid)', { npm_lifecycle_event: 'start' }, true],
    ['started otherwise (nohup ... & from a script that exits), keeps running when its parent goes away', {}, false],
  ] as const)('%s', async (_name, extra, exits) => {
    const port = await freePort();
    const log = join(dir, `orphan-${exits}.log`);
    const env = { PATH: process.env.PATH ?? '', ...API, ...extra, WEBHOOK_SECRET: newSecret(), DATABASE_PATH: join(dir, `orphan-${exits}.db`), PORT: String(port), HOST: '127.0.0.1' };
    // Like npm's shell: node runs as its child; the shell is killed, node is re-parented.
    const shell = spawn('bash', ['-c', `"${process.execPath}" --import "${ROOT}node_modules/tsx/dist/loader.mjs" "${ROOT}src/main.ts" > "${log}" 2>&1 & echo $!; wait`], { env, stdio: ['ignore', 'pipe', 'ignore'] });
    const pid = Number(await new Promise<string>((resolve) => shell.stdout!.once('data', (d: Buffer) => resolve(d.toString().trim()))));
    const alive = () => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    try {
      await waitForHttp(`http://127.0.0.1:${port}/healthz`, undefined, pid);
      shell.kill('SIGKILL');
      const deadline = Date.now() + (exits ? 15_000 : 3_000);
      while (alive() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      expect(alive()).toBe(!exits);
      if (exits) expect(readFileSync(log, 'utf8')).toMatch(/"signal":"npm, which started it, exited","msg":"shutting down"[\s\S]*"msg":"receiver stopped"/);
      else expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
    } finally {
      if (alive()) process.kill(pid, 'SIGKILL');
    }
  });

  it('on SIGTERM, answers a delivery already in progress, then closes a stalled client after SHUTDOWN_GRACE_MS and exits 0', async () => {
    const secret = newSecret();
    const port = await freePort();
    const dbPath = join(dir, 'grace.db');
    // REQUEST_TIMEOUT_MS is far away: only the shutdown grace can end the stalled request.
    const env = { ...API, WEBHOOK_SECRET: secret, DATABASE_PATH: dbPath, PORT: String(port), HOST: '127.0.0.1', SHUTDOWN_GRACE_MS: '1500', REQUEST_TIMEOUT_MS: '600000' };
    const child = runTs('src/main.ts', [], env);
    await waitForHttp(`http://127.0.0.1:${port}/healthz`, undefined, child);

    // Both clients send their head and part of the body; one finishes inside the grace, one never does.
    const open = (delivery: ReturnType<typeof signDelivery>) => {
      const socket = connect(port, '127.0.0.1');
      const answer = { text: '', closed: false };
      socket.on('data', (d: Buffer) => (answer.text += d.toString()));
      socket.on('close', () => (answer.closed = true));
      socket.on('error', () => {});
      const head = Object.entries({ ...delivery.headers, 'content-length': String(Buffer.byteLength(delivery.body)) })
        .map(([k, v]) => `${k}: ${v}\r\n`)
        .join('');
      socket.write(`POST /webhooks HTTP/1.1\r\nhost: 127.0.0.1\r\n${head}\r\n${delivery.body.slice(0, 10)}`);
      return { socket, answer, rest: delivery.body.slice(10) };
    };
    const finishing = envelope();
    const stalled = envelope();
    const a = open(signDelivery(secret, JSON.stringify(finishing)));
    const b = open(signDelivery(secret, JSON.stringify(stalled)));
    // Connected, then time for the server to take both requests in (it gives no sign that it has).
    await Promise.all([a, b].map((c) => new Promise((r) => (c.socket.readyState === 'open' ? r(null) : c.socket.once('connect', r)))));
    await new Promise((r) => setTimeout(r, 300));
    const sigtermAt = Date.now();
    child.proc.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 300));
    a.socket.write(a.rest);

    const exited = await Promise.race([child.exited, new Promise((r) => setTimeout(() => r('still running 15 s after SIGTERM'), 15_000))]);
    if (typeof exited === 'string') child.proc.kill('SIGKILL');
    expect(exited).toEqual({ code: 0, signal: null });
    expect(Date.now() - sigtermAt).toBeGreaterThanOrEqual(1500);
    expect(a.answer.text).toMatch(/^HTTP\/1\.1 200 /);
    expect(b.answer.text).toBe('');
    expect(b.answer.closed).toBe(true);
    expect(child.stdout.join('')).toMatch(/closing connections with a request still in progress after SHUTDOWN_GRACE_MS/);
    const db = new BetterSqlite3(dbPath, { readonly: true });
    const stored = db.prepare('SELECT id FROM events').pluck().all();
    db.close();
    expect(stored).toEqual([finishing.id]);
  });

  it('a second SIGTERM while the stop waits on a stalled client says the stop is under way, and the stop still drains and exits 0', async () => {
    const secret = newSecret();
    const port = await freePort();
    const env = { ...API, WEBHOOK_SECRET: secret, DATABASE_PATH: join(dir, 'second-signal.db'), PORT: String(port), HOST: '127.0.0.1', SHUTDOWN_GRACE_MS: '1500', REQUEST_TIMEOUT_MS: '600000' };
    const child = runTs('src/main.ts', [], env);
    await waitForHttp(`http://127.0.0.1:${port}/healthz`, undefined, child);
    const d = signDelivery(secret, JSON.stringify(envelope()));
    const socket = connect(port, '127.0.0.1');
    socket.on('error', () => {});
    const head = Object.entries({ ...d.headers, 'content-length': String(Buffer.byteLength(d.body)) })
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('');
    socket.write(`POST /webhooks HTTP/1.1\r\nhost: 127.0.0.1\r\n${head}\r\n${d.body.slice(0, 10)}`);
    const timer = setTimeout(() => child.proc.kill('SIGKILL'), 20_000);
    try {
      await new Promise((r) => setTimeout(r, 300)); // the server takes the head in; the body never ends
      child.proc.kill('SIGTERM');
      await waitFor(() => child.stdout.join('').includes('"msg":"shutting down"'), 'the shutting down line', 15_000);
      child.proc.kill('SIGTERM');
      expect(await child.exited).toEqual({ code: 0, signal: null });
    } finally {
      clearTimeout(timer);
      socket.destroy();
    }
    expect(child.stdout.join('')).toMatch(/"msg":"shutting down"[\s\S]*"msg":"already stopping: [^"]*SIGKILL[^"]*"[\s\S]*"msg":"receiver stopped"/);
  });

  it('loses no acknowledged event when killed with SIGKILL under a stream of deliveries', async () => {
    const secret = newSecret();
    const dbPath = join(dir, 'crash.db');
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const env = { ...API, WORKER_CONCURRENCY: '0', WEBHOOK_SECRET: secret, DATABASE_PATH: dbPath, PORT: String(port), HOST: '127.0.0.1' };
    const acked: string[] = [];
    const child = runTs('src/main.ts', [], env);
    await waitForHttp(`${url}/healthz`, undefined, child);

    // 16 concurrent senders, bounded to 3,000 deliveries; the kill comes after 300 acknowledgements.
    let sent = 0;
    let killed = false;
    const sender = async () => {
      while (!killed && sent < 3000) {
        sent++;
        const e = envelope();
        try {
          const res = await postSigned(url, secret, JSON.stringify(e));
          if (res.status === 200) acked.push(e.id as string);
        } catch {
          // connection cut by the kill: not acknowledged, so the service would retry
        }
        if (acked.length >= 300 && !killed) {
          killed = true;
          child.proc.kill('SIGKILL');
        }
      }
    };
    await Promise.all(Array.from({ length: 16 }, sender));
    expect((await child.exited).signal).toBe('SIGKILL');

    // Restart on the same file: recovery from the WAL, then check every acknowledged id.
    const again = runTs('src/main.ts', [], env);
    await waitForHttp(`${url}/healthz`, undefined, again);
    again.proc.kill('SIGTERM');
    await again.exited;
    const db = new BetterSqlite3(dbPath, { readonly: true });
    const missing = acked.filter((id) => !db.prepare('SELECT 1 FROM events WHERE id = ?').get(id));
    // No worker ran (WORKER_CONCURRENCY=0): every acknowledged event is still ahead of processing.
    const notAhead = acked.filter((id) => !db.prepare('SELECT 1 FROM events WHERE id = ? AND rowid > (SELECT last_event_rowid FROM processing_cursor)').get(id));
    db.close();
    expect(acked.length).toBeGreaterThanOrEqual(300);
    expect(missing).toEqual([]);
    expect(notAhead).toEqual([]);
  });
});

describe('ingest and workers in separate processes', () => {
  it('`serve` with WORKER_CONCURRENCY=0 stores, `work` processes and delivers; both drain on SIGTERM', async () => {
    const secret = newSecret();
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const sinkFile = join(dir, 'split.ndjson');
    const configFile = join(dir, 'split.json');
    writeFileSync(configFile, JSON.stringify({ sinks: [{ name: 'archive', type: 'file', path: sinkFile }] }));
    const env = { ...API, WEBHOOK_SECRET: secret, DATABASE_PATH: join(dir, 'split.db'), CONFIG_FILE: configFile, HOST: '127.0.0.1' };
    // One environment for both, METRICS_PORT included (fly.toml's [env] gives every process the same).
    const serveMetrics = await freePort();
    const server = runTs('src/cli/main.ts', ['serve'], { ...env, METRICS_PORT: String(serveMetrics), PORT: String(port), WORKER_CONCURRENCY: '0' });
    await waitForHttp(`${url}/healthz`, undefined, server);
    const refused = runTs('src/cli/main.ts', ['work'], { ...env, WORKER_CONCURRENCY: '0' });
    const badPort = runTs('src/cli/main.ts', ['work'], { ...env, WORK_METRICS_PORT: 'nine' });
    expect((await badPort.exited).code).toBe(1);
    expect(badPort.stderr.join('')).toMatch(/^config error: WORK_METRICS_PORT: must be an integer 0-65535, got "nine"/);
    // As an env file leaves it: named as such, like every other setting.
    const quotedPort = runTs('src/cli/main.ts', ['work'], { ...env, WORK_METRICS_PORT: '"9092"' });
    expect((await quotedPort.exited).code).toBe(1);
    expect(quotedPort.stderr.join('')).toBe('config error: WORK_METRICS_PORT: is wrapped in quote characters: set the value without them\n');
    expect((await refused.exited).code).toBe(1);
    expect(refused.stderr.join('')).toMatch(/WORKER_CONCURRENCY: must be at least 1 for `work`/);

    // With WORK_METRICS_PORT, `work` serves the counters that exist only in it (METRICS_PORT is serve's).
    const workMetrics = await freePort();
    const worker = runTs('src/cli/main.ts', ['work'], { ...env, METRICS_PORT: String(serveMetrics), WORK_METRICS_PORT: String(workMetrics) });
    try {
      const e = envelope();
      expect((await postSigned(url, secret, JSON.stringify(e))).status).toBe(200);
      const deadline = Date.now() + 15_000;
      while (Date.now() < deadline && !(existsSync(sinkFile) && readFileSync(sinkFile, 'utf8').includes(e.id as string))) {
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(readFileSync(sinkFile, 'utf8')).toContain(e.id as string);
      // The line is in the file before the delivery is recorded and counted: scrape until the count is there.
      const delivered = /receiver_sink_deliveries_total\{sink="archive",outcome="done"\} 1/;
      let workText = '';
      const scrapeDeadline = Date.now() + 15_000;
      while (Date.now() < scrapeDeadline && !delivered.test(workText)) {
        if (workText) await new Promise((r) => setTimeout(r, 100));
        workText = await (await fetch(`http://127.0.0.1:${workMetrics}/metrics`)).text();
      }
      expect(workText).toMatch(delivered);
      expect(workText).toMatch(/receiver_job_runs_total\{kind="process_event",outcome="done"\} 1/);
      // Not the database's gauges: serve reports those, and scraping both must not count them twice.
      expect(workText).not.toMatch(/^receiver_jobs\{/m);
      // Nor the ingest series or any other gauge of serve's, which would sit at 0 here.
      for (const name of ['receiver_events_unprocessed', 'receiver_quarantined', 'receiver_sqlite_wal_bytes', 'receiver_deliveries_received_total', 'receiver_group_commit_batch_size']) {
        expect(workText).not.toContain(name);
      }
      // Its own process's series are there.
      expect(workText).toMatch(/^nodejs_eventloop_lag_seconds /m);
      // The serve process did none of that work, and says so; the database's gauges are serve's,
      // read from the shared file (a dead letter put there shows in its scrape).
      const db = new BetterSqlite3(env.DATABASE_PATH);
      const at = new Date().toISOString();
      db.prepare(`INSERT INTO jobs (kind, payload, event_id, source, state, run_at, attempts, max_attempts, created_at, updated_at) VALUES ('sink:archive', '{}', 'evt-x', 'sink:archive', 'dead', ?, 25, 25, ?, ?)`).run(at, at, at);
      db.close();
      const serveText = await (await fetch(`http://127.0.0.1:${serveMetrics}/metrics`)).text();
      expect(serveText).not.toMatch(/receiver_sink_deliveries_total\{sink="archive",outcome="done"\} 1/);
      expect(serveText).toMatch(/^receiver_jobs\{state="dead",kind="sink:archive"\} 1$/m);
      worker.proc.kill('SIGTERM');
      server.proc.kill('SIGTERM');
      expect(await worker.exited).toEqual({ code: 0, signal: null });
      expect(await server.exited).toEqual({ code: 0, signal: null });
      expect(worker.stdout.join('')).toMatch(/"msg":"workers started"/);
      expect(server.stdout.join('')).not.toMatch(/"msg":"workers started"/);
    } finally {
      // A failed expectation must not leave either process running.
      for (const c of [worker, server]) if (c.proc.exitCode === null && c.proc.signalCode === null) c.proc.kill('SIGKILL');
    }
  }, 60_000);

  it('refuses a second process running workers on a live database (it would take the live one\'s running jobs); after a crash the next one starts at once', async () => {
    const secret = newSecret();
    const port = await freePort();
    const dbPath = join(dir, 'one-worker.db');
    const env = { ...API, WEBHOOK_SECRET: secret, DATABASE_PATH: dbPath, HOST: '127.0.0.1' };
    // Every child is stopped at the end, whatever the outcome: a failing check must not leave one running.
    const children: ReturnType<typeof runTs>[] = [];
    const start = (args: string[], extra: Record<string, string> = {}) => {
      const c = runTs('src/cli/main.ts', args, { ...env, ...extra });
      children.push(c);
      return c;
    };
    try {
      const live = start(['serve'], { PORT: String(port) });
      await waitForHttp(`http://127.0.0.1:${port}/healthz`, undefined, live);
      await waitFor(() => live.stdout.join('').includes('"msg":"workers started"'), "the live receiver's workers started line", 15_000);
      // A job the live process holds: running, leased for another hour.
      const now = new Date().toISOString();
      const db = new BetterSqlite3(dbPath);
      db.prepare(
        `INSERT INTO jobs (kind, payload, source, state, run_at, attempts, max_attempts, created_at, updated_at, lease_owner, lease_token, lease_expires_at)
         VALUES ('fetch_result', '{"resource":"interview","application_id":"x"}', 'default', 'running', ?, 1, 25, ?, ?, 'worker-live', 'token-live', ?)`,
      ).run(now, now, now, new Date(Date.now() + 3_600_000).toISOString());
      const held = () => db.prepare('SELECT state, lease_owner FROM jobs').get();

      const work = start(['work']);
      expect((await work.exited).code).toBe(1);
      expect(work.stderr.join('')).toMatch(/^error: another process is already running the workers of .*one-worker\.db .*run one per database/);
      const serve = start(['serve'], { PORT: String(await freePort()) });
      expect((await serve.exited).code).toBe(1);
      expect(serve.stderr.join('')).toMatch(/^fatal: another process is already running the workers of /);
      // Refused before the database is opened (no app, no logger of its own yet): at fatal all the same.
      const lines = serve.stdout.join('').trimEnd().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(lines).toEqual([expect.objectContaining({ level: 60, msg: 'start failed', mode: 'serve', err: expect.stringMatching(/^another process is already running the workers of /) })]);
      expect(held()).toEqual({ state: 'running', lease_owner: 'worker-live' });

      // SIGKILL: no clean stop, so the kernel is what lets the lock go.
      live.proc.kill('SIGKILL');
      await live.exited;
      const next = start(['work']);
      await waitFor(() => next.stdout.join('').includes('"msg":"workers started"'), "the next receiver's workers started line", 15_000);
      expect(next.stdout.join('')).toMatch(/"jobs":1,"msg":"jobs left running by a previous process run again"/);
      expect(held()).not.toEqual({ state: 'running', lease_owner: 'worker-live' });
      db.close();
      next.proc.kill('SIGTERM');
      expect(await next.exited).toEqual({ code: 0, signal: null });
    } finally {
      for (const c of children) if (c.proc.exitCode === null && c.proc.signalCode === null) c.proc.kill('SIGKILL');
    }
  });
});
