import { Writable } from 'node:stream';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { freePort, runTs, waitForHttp, type Child } from '../helpers/childServer.js';
import { jobSeeder } from '../helpers/jobs.js';
import { tempDir } from '../helpers/receiver.js';
import { envelope, newSecret, postSigned, signDelivery } from '../helpers/signing.js';
import { cli, until, withMigratedDatabase } from './helpers.js';

const { dir, cleanup } = tempDir('receiver-cli-');
const secret = newSecret();
const sinkFile = join(dir, 'archive.ndjson');
const dbPath = join(dir, 'receiver.db');
let env: Record<string, string>;
let server: Child;
let url: string;
let db: BetterSqlite3.Database;

const sinkLines = () => {
  try {
    return readFileSync(sinkFile, 'utf8').split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as { id: string; event_type: string });
  } catch {
    return [];
  }
};
const one = <T>(sql: string, ...args: unknown[]) => db.prepare(sql).get(...args) as T;
const all = <T>(sql: string, ...args: unknown[]) => db.prepare(sql).all(...args) as T[];

async function post(env: Record<string, unknown>): Promise<void> {
  const res = await postSigned(url, secret, JSON.stringify(env));
  expect(res.status).toBe(200);
}

const appA = 'a0000000-0000-4000-8000-00000000000a';
const appB = 'b0000000-0000-4000-8000-00000000000b';
const app = (id: string, ext: string, status: string) => ({ id, external_id: ext, status, created_at: '2026-11-01T08:00:00.000Z' });

beforeAll(async () => {
  const configFile = join(dir, 'config.json');
  writeFileSync(configFile, JSON.stringify({ sinks: [{ name: 'archive', type: 'file', path: sinkFile }, { name: 'scores', type: 'file', path: join(dir, 'scores.ndjson'), events: ['insights.*'] }] }));
  const port = await freePort();
  url = `http://127.0.0.1:${port}`;
  env = {
    WEBHOOK_SECRET: secret,
    HIRING_API_URL: 'http://127.0.0.1:9',
    HIRING_API_KEY: 'sk-test.unused',
    DATABASE_PATH: dbPath,
    CONFIG_FILE: configFile,
    PORT: String(port),
    HOST: '127.0.0.1',
    WORKER_CONCURRENCY: '2',
    LOG_LEVEL: 'warn',
  };
  const migrated = await cli(['migrate'], { DATABASE_PATH: dbPath });
  expect(migrated.code, migrated.stderr).toBe(0);
  expect(migrated.stdout).toMatch(/applied migrations 1, 2, 3/);
  server = runTs('src/cli/main.ts', ['serve'], env);
  await waitForHttp(`${url}/healthz`, undefined, server);
  db = new BetterSqlite3(dbPath, { readonly: false });

  // Application events need no scoring read: they settle at once and fan out.
  await post(envelope({ id: 'evt-a1', created_at: '2026-11-01T08:00:00.000Z', event_type: 'application.created', payload: { application: app(appA, 'ext-a', 'applied') } }));
  await post(envelope({ id: 'evt-a2', created_at: '2026-11-01T09:00:00.000Z', event_type: 'application.status_changed', payload: { application: app(appA, 'ext-a', 'screened'), previous_status: 'applied' } }));
  await post(envelope({ id: 'evt-a3', created_at: '2026-11-01T10:00:00.000Z', event_type: 'application.status_changed', payload: { application: app(appA, 'ext-a', 'interviewed'), previous_status: 'screened' } }));
  await post(envelope({ id: 'evt-b1', created_at: '2026-11-01T08:30:00.000Z', event_type: 'application.created', payload: { application: app(appB, 'ext-b', 'applied') } }));
  // Signed, but not JSON, with a terminal escape sequence in it: quarantined.
  // A proxy's own credential header rides along: not stored; an ordinary header is.
  const signed = signDelivery(secret, 'not json \u001b[31mred\u001b[0m');
  const res = await fetch(`${url}/webhooks`, { method: 'POST', ...signed, headers: { ...signed.headers, 'X-Auth-Token': 'tokSECRET', 'Cf-Access-Jwt-Assertion': 'jwtSECRET', 'X-Functions-Key': 'fnSECRET', 'X-Request-Id': 'req-42' } });
  expect(await res.json()).toMatchObject({ outcome: 'quarantined' });
  await until(() => sinkLines().length === 4, 'the file sink to receive the 4 events');
  await until(() => one<{ n: number }>("SELECT COUNT(*) AS n FROM jobs WHERE state IN ('pending', 'running')").n === 0, 'an idle queue');
  fixture = Object.fromEntries(FIXTURE_TABLES.map((t) => [t, all<Record<string, unknown>>(`SELECT * FROM ${t} ORDER BY rowid`)]));
});

/**
 * The rows of the shared receiver's queue and sink records as beforeAll left them. Tests dead-letter,
 * replay, retry, disable and enable on that receiver; each starts again from these rows, so that none
 * depends on which tests ran before it (vitest --sequence.shuffle), nor leaves a job for the next.
 */
const FIXTURE_TABLES = ['jobs', 'deliveries', 'sink_state'] as const;
let fixture: Record<string, Record<string, unknown>[]> = {};

afterEach(async () => {
  if (!db) return;
  await until(() => one<{ n: number }>("SELECT COUNT(*) AS n FROM jobs WHERE state IN ('pending', 'running')").n === 0, 'an idle queue after the test, before its rows are restored');
  db.transaction(() => {
    for (const table of FIXTURE_TABLES) {
      db.prepare(`DELETE FROM ${table}`).run();
      for (const row of fixture[table] ?? []) {
        const columns = Object.keys(row);
        db.prepare(`INSERT INTO ${table} (${columns.join(', ')}) VALUES (${columns.map((c) => `@${c}`).join(', ')})`).run(row);
      }
    }
  })();
});

afterAll(async () => {
  db?.close();
  server?.proc.kill('SIGTERM');
  await server?.exited;
  cleanup();
});

/** A database of the test's own (migrated by the CLI, no receiver on it), open for its writes meanwhile. */
const withOwnDatabase = (name: string, body: (own: string, w: BetterSqlite3.Database) => Promise<void>) => withMigratedDatabase(join(dir, name), body);

// Up to nine CLI runs a test, each a Node start-up (about a second here, more on a busy runner).
describe('operations on a running receiver', { timeout: 60_000 }, () => {
  it('status --json matches the database; dry runs and quarantine reads change nothing', async () => {
    const jobsBefore = one<{ n: number }>('SELECT COUNT(*) AS n FROM jobs').n;
    const [status, dry, qlist] = await Promise.all([
      cli(['status', '--json'], { DATABASE_PATH: dbPath, CONFIG_FILE: env.CONFIG_FILE! }),
      cli(['replay', '--type', 'application.*', '--sink', 'all', '--processing', '--dry-run'], { DATABASE_PATH: dbPath, CONFIG_FILE: env.CONFIG_FILE! }),
      cli(['quarantine', 'list', '--json'], { DATABASE_PATH: dbPath }),
    ]);
    expect(status.code, status.stderr).toBe(0);
    const s = JSON.parse(status.stdout) as Record<string, any>;
    expect(s.events.total).toBe(4);
    expect(s.events.by_type).toEqual(Object.fromEntries(all<{ event_type: string; n: number }>('SELECT event_type, COUNT(*) AS n FROM events GROUP BY event_type').map((r) => [r.event_type, r.n])));
    const byState = Object.fromEntries(all<{ state: string; n: number }>('SELECT state, COUNT(*) AS n FROM jobs GROUP BY state').map((r) => [r.state, r.n]));
    expect(s.jobs.by_state).toEqual({ pending: 0, running: 0, done: 0, dead: 0, ...byState });
    expect(s.jobs.by_state.done).toBe(4); // the 4 deliveries to archive: new events are folded from the processing cursor, not as jobs
    expect(s.processing).toEqual({ events_waiting: 0, oldest_waiting_age_ms: null });
    expect(s.dead_letters).toBe(0);
    expect(s.quarantined).toBe(1);
    expect(s.applications).toEqual({ total: 2, needs_review: 0 });
    expect(s.paused_sources).toEqual([]);
    expect(s.oldest_pending_job).toBeNull();
    expect(s.sinks.map((k: any) => [k.name, k.configured, k.enabled, k.delivered, k.pending, k.dead])).toEqual([
      ['archive', true, true, 4, 0, 0],
      ['scores', true, true, 0, 0, 0],
    ]);

    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toMatch(/^would queue evt-a1 application\.created: processing, sink archive$/m);
    expect(dry.stdout).toMatch(/dry run: 4 events selected; processing: 4 would queue; sink archive: 4 would queue; sink scores: 0 would queue, 4 not wanted by its filters/);
    expect(one<{ n: number }>('SELECT COUNT(*) AS n FROM jobs').n).toBe(jobsBefore);

    const rows = JSON.parse(qlist.stdout) as { id: number; reason: string }[];
    expect(rows).toHaveLength(1);
    const show = await cli(['quarantine', 'show', String(rows[0]!.id)], { DATABASE_PATH: dbPath });
    expect(show.code, show.stderr).toBe(0);
    const stored = JSON.parse(one<{ headers: string }>('SELECT headers FROM quarantine').headers) as Record<string, string>;
    expect(show.stdout).toContain('webhook-signature: [hidden]');
    expect(show.stdout).not.toContain(stored['webhook-signature']!.slice(3, 20));
    expect(show.stdout).toContain(`webhook-id: ${stored['webhook-id']}`);
    expect(show.stdout).toContain('not json \\x1b[31mred\\x1b[0m');
    expect(stored['x-request-id']).toBe('req-42');
    expect(Object.keys(stored).filter((k) => k.startsWith('x-') || k.startsWith('cf-'))).toEqual(['x-request-id']);
    expect(show.stdout).toContain('x-request-id: req-42');
    for (const secretValue of ['tokSECRET', 'jwtSECRET', 'fnSECRET']) expect(show.stdout).not.toContain(secretValue);
    // A row stored before ingest dropped every credential header: show still hides it.
    db.prepare(`UPDATE quarantine SET headers = json_set(headers, '$."x-session-token"', 'tokOLD')`).run();
    const old = await cli(['quarantine', 'show', String(rows[0]!.id)], { DATABASE_PATH: dbPath });
    expect(old.stdout).toContain('x-session-token: [hidden]');
    expect(old.stdout).not.toContain('tokOLD');
    expect(show.stdout).not.toContain('\u001b');
  });

  it('replays one application to a sink (same message id) and events through processing, waiting for the receiver', async () => {
    const idsBefore = all<{ event_id: string; message_id: string }>("SELECT event_id, message_id FROM deliveries WHERE sink = 'archive' ORDER BY event_id");
    const linesBefore = sinkLines().length; // 4 when it runs first; the file keeps what other tests' replays appended
    const toSink = await cli(['replay', '--application', 'ext-a', '--sink', 'archive', '--wait', '--timeout', '20'], { DATABASE_PATH: dbPath, CONFIG_FILE: env.CONFIG_FILE! });
    expect(toSink.code, toSink.stderr).toBe(0);
    expect(toSink.stdout).toMatch(/3 events selected; sink archive: 3 queued; finished: 3 done, 0 dead/);
    const lines = sinkLines();
    expect(lines).toHaveLength(linesBefore + 3);
    expect(lines.slice(linesBefore).map((l) => l.id).sort()).toEqual(['evt-a1', 'evt-a2', 'evt-a3']);
    expect(all("SELECT event_id, message_id FROM deliveries WHERE sink = 'archive' ORDER BY event_id")).toEqual(idsBefore);

    const processing = await cli(['replay', '--type', 'application.created', '--since', '1h', '--wait', '--json'], { DATABASE_PATH: dbPath });
    expect(processing.code, processing.stderr).toBe(0);
    expect(JSON.parse(processing.stdout)).toMatchObject({ selected: 2, processing: { queued: 2, already_queued: 0 }, finished: { done: 2, failed: 0 } });
    expect(all("SELECT event_id, COUNT(*) AS n FROM jobs WHERE kind = 'process_event' GROUP BY event_id ORDER BY event_id")).toEqual([
      { event_id: 'evt-a1', n: 1 },
      { event_id: 'evt-b1', n: 1 },
    ]);
    // Already settled: replaying processing does not deliver to sinks again.
    expect(sinkLines()).toHaveLength(linesBefore + 3);
  });

  it('replay through processing counts an event whose process_event job is still open as already queued', async () => {
    // Due in an hour, so the running receiver leaves it pending.
    const queued = jobSeeder(db)({
      kind: 'process_event', payload: '{"event_id":"evt-a2"}', event_id: 'evt-a2', state: 'pending', run_at: new Date(Date.now() + 3_600_000).toISOString(), created_at: new Date().toISOString(),
    });
    try {
      const r = await cli(['replay', '--id', 'evt-a1', '--id', 'evt-a2', '--processing', '--dry-run', '--json'], { DATABASE_PATH: dbPath });
      expect(r.code, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout)).toMatchObject({ selected: 2, processing: { queued: 1, already_queued: 1 } });
    } finally {
      db.prepare('DELETE FROM jobs WHERE id = ?').run(queued);
    }
  });

  it('status says when the latest event was stored: refused deliveries (a rotated secret not configured) leave no other trace in the database', async () => {
    await withOwnDatabase('latest.db', async (own, w) => {
      expect(JSON.parse((await cli(['status', '--json'], { DATABASE_PATH: own })).stdout).events).toMatchObject({ total: 0, latest_received_at: null, latest_received_age_ms: null });
      expect((await cli(['status'], { DATABASE_PATH: own })).stdout).toMatch(/^events {9}0$/m);
      const insert = w.prepare(`INSERT INTO events (id, event_type, source, received_at, delivery_id, envelope) VALUES (?, 'application.created', 'default', ?, ?, '{}')`);
      const latest = new Date(Date.now() - 3 * 3_600_000).toISOString();
      insert.run('evt-l2', latest, 'msg-l2');
      // Stored later (a quarantine replay) with the time it was first received: not the latest.
      insert.run('evt-l1', '2026-01-01T00:00:00.000Z', 'msg-l1');
      const json = JSON.parse((await cli(['status', '--json'], { DATABASE_PATH: own })).stdout);
      expect(json.events.latest_received_at).toBe(latest);
      expect(json.events.latest_received_age_ms).toBeGreaterThanOrEqual(3 * 3_600_000);
      expect((await cli(['status'], { DATABASE_PATH: own })).stdout).toMatch(new RegExp(`^events {9}2 \\(latest stored 3 h 0 min ago, at ${latest.replace(/\./g, '\\.')}\\)$`, 'm'));
    });
  });

  it('without CONFIG_FILE in the shell, status and sinks list still show a sink a 410 disabled, and say why they do not know its configuration', async () => {
    await withOwnDatabase('unlisted.db', async (own, w) => {
      const at = '2026-11-20T08:00:00.000Z';
      const delivery = w.prepare("INSERT INTO deliveries (event_id, sink, message_id, state, queued_at, created_at, updated_at) VALUES (?, ?, ?, 'pending', ?, ?, ?)");
      delivery.run('evt-u1', 'crm', 'msg_u1', at, at, at);
      delivery.run('evt-u1', 'archive', 'msg_u2', at, at, at);
      w.prepare('INSERT INTO sink_state (sink, disabled_at, disabled_reason, disabled_status, updated_at) VALUES (?, ?, ?, 410, ?)').run('crm', at, 'HTTP 410 Gone from https://crm.example', at);
      const [status, list] = await Promise.all([cli(['status'], { DATABASE_PATH: own }), cli(['sinks', 'list'], { DATABASE_PATH: own })]);
      expect(status.code, status.stderr).toBe(0);
      expect(status.stdout).toMatch(/^crm +unknown +DISABLED \(HTTP 410 Gone from https:\/\/crm\.example\); CONFIG_FILE unset here +1 /m);
      expect(status.stdout).toMatch(/^archive +unknown +CONFIG_FILE unset here +1 /m);
      expect(list.code, list.stderr).toBe(0);
      expect(list.stdout).toMatch(/^crm +unknown +NO; CONFIG_FILE unset here +1 /m);
    });
  });

  it('with a CONFIG_FILE that cannot be read here or has a problem, a sink is not called unconfigured; one the file lacks is "not in CONFIG_FILE"', async () => {
    await withOwnDatabase('unread-config.db', async (own, w) => {
      const at = '2026-11-20T08:00:00.000Z';
      const delivery = w.prepare("INSERT INTO deliveries (event_id, sink, message_id, state, queued_at, created_at, updated_at) VALUES (?, ?, ?, 'pending', ?, ?, ?)");
      delivery.run('evt-c1', 'crm', 'msg_c1', at, at, at);
      w.prepare('INSERT INTO sink_state (sink, disabled_at, disabled_reason, disabled_status, updated_at) VALUES (?, ?, ?, 410, ?)').run('crm', at, 'HTTP 410 Gone from https://crm.example', at);
      // crm is configured in the file, but its entry has a problem (no secret): it is left out.
      const flawed = join(dir, 'flawed-config.json');
      writeFileSync(flawed, JSON.stringify({ sinks: [{ name: 'crm', type: 'http', url: 'https://crm.example/hook' }] }));
      // A whole file without crm: another receiver's, perhaps.
      const other = join(dir, 'other-config.json');
      writeFileSync(other, JSON.stringify({ sinks: [{ name: 'archive', type: 'file', path: join(dir, 'other-archive.ndjson') }] }));
      const [missing, flawedList, otherStatus] = await Promise.all([
        cli(['status'], { DATABASE_PATH: own, CONFIG_FILE: join(dir, 'no-such-config.json') }),
        cli(['sinks', 'list'], { DATABASE_PATH: own, CONFIG_FILE: flawed }),
        cli(['status'], { DATABASE_PATH: own, CONFIG_FILE: other }),
      ]);
      expect(missing.code, missing.stderr).toBe(0);
      expect(missing.stderr).toMatch(/^warning: CONFIG_FILE: cannot read /m);
      expect(missing.stdout).toMatch(/^crm +unknown +DISABLED \(HTTP 410 Gone from https:\/\/crm\.example\); CONFIG_FILE has problems +1 /m);
      expect(flawedList.code, flawedList.stderr).toBe(0);
      expect(flawedList.stderr).toMatch(/^warning: CONFIG_FILE sinks\.0\.secret: /m);
      expect(flawedList.stdout).toMatch(/^crm +unknown +NO; CONFIG_FILE has problems +1 /m);
      expect(otherStatus.code, otherStatus.stderr).toBe(0);
      expect(otherStatus.stdout).toMatch(/^crm +unknown +DISABLED \(HTTP 410 Gone from https:\/\/crm\.example\); not in CONFIG_FILE +1 /m);
      expect(`${missing.stdout}${flawedList.stdout}${otherStatus.stdout}`).not.toMatch(/not configured/);
    });
  });

  it('status names a paused source that is no longer configured as such, not as "HTTP 0"', async () => {
    await withOwnDatabase('paused.db', async (own, w) => {
      const pause = w.prepare('INSERT INTO source_pauses (source, paused_at, status, detail, probe_after) VALUES (?, ?, ?, ?, ?)');
      pause.run('acme', '2026-11-20T08:00:00.000Z', 401, 'interview: HTTP 401 unauthorized', '2026-11-20T08:05:00.000Z');
      pause.run('gone', '2026-11-20T08:00:00.000Z', 0, 'source gone has no HIRING_API_URL / HIRING_API_KEY configured', '2026-11-20T08:05:00.000Z');
      const out = (await cli(['status'], { DATABASE_PATH: own })).stdout;
      // The heading says how many follow (it ended in a bare space before).
      expect(out).toMatch(/^paused sources 2$/m);
      expect(out).toMatch(/^ {2}acme: HTTP 401 since 2026-11-20T08:00:00\.000Z \(interview: HTTP 401 unauthorized\)$/m);
      expect(out).toMatch(/^ {2}gone: not configured since 2026-11-20T08:00:00\.000Z \(source gone has no HIRING_API_URL \/ HIRING_API_KEY configured\)$/m);
    });
  });

  it("status's oldest pending job names its source, and says it waits on the source's pause rather than repeating the note of its last run", async () => {
    await withOwnDatabase('oldest-paused.db', async (own, w) => {
      w.prepare('INSERT INTO source_pauses (source, paused_at, status, detail, probe_after) VALUES (?, ?, ?, ?, ?)').run(
        'globex', '2026-11-20T08:00:00.000Z', 401, 'interview: HTTP 401 unauthorized', '2026-11-20T08:05:00.000Z',
      );
      const seed = jobSeeder(w);
      const at = '2026-11-20T07:59:00.000Z';
      seed({ kind: 'fetch_result', event_id: 'evt-g1', source: 'globex', state: 'pending', run_at: at, created_at: at, last_error: 'result still processing' });
      const out = (await cli(['status'], { DATABASE_PATH: own })).stdout;
      expect(out).toMatch(/^oldest pending job \d+ fetch_result of source globex, queued .+ ago, runs at 2026-11-20T07:59:00\.000Z \(waits: source globex paused since 2026-11-20T08:00:00\.000Z, HTTP 401; last note: result still processing\)$/m);
      // Not paused: the note as it was.
      w.prepare('DELETE FROM source_pauses').run();
      const after = (await cli(['status'], { DATABASE_PATH: own })).stdout;
      expect(after).toMatch(/^oldest pending job \d+ fetch_result of source globex, queued .+ ago, runs at 2026-11-20T07:59:00\.000Z \(result still processing\)$/m);
    });
  });

  it("status says whose result reads are waiting and failing when several sources have some: one organization's API down beside another's reads waiting their turn", async () => {
    await withOwnDatabase('reads-by-source.db', async (own, w) => {
      const now = new Date().toISOString();
      const seed = jobSeeder(w);
      const job = (source: string, event_id: string, attempts: number, updated_at: string, last_error: string) =>
        seed({ kind: 'fetch_result', source, event_id, state: 'pending', run_at: now, attempts, updated_at, last_error });
      job('acme', 'evt-a1', 3, '2026-11-25T01:00:00.000Z', 'interview: HTTP 502');
      job('acme', 'evt-a2', 2, '2026-11-25T02:00:00.000Z', 'interview: HTTP 503 error');
      job('globex', 'evt-g1', 0, now, 'result still processing');
      job('initech-old', 'evt-i1', 0, now, 'result still processing');
      const json = JSON.parse((await cli(['status', '--json'], { DATABASE_PATH: own })).stdout) as { result_reads: { by_source: unknown } };
      expect(json.result_reads.by_source).toEqual([
        { source: 'acme', pending: 2, failing: 2, latest_failure_at: '2026-11-25T02:00:00.000Z' },
        { source: 'globex', pending: 1, failing: 0, latest_failure_at: null },
        { source: 'initech-old', pending: 1, failing: 0, latest_failure_at: null },
      ]);
      const plain = (await cli(['status'], { DATABASE_PATH: own })).stdout;
      expect(plain).toMatch(
        /^result reads {3}4 waiting, 2 failing \(latest, 2026-11-25T02:00:00\.000Z: interview: HTTP 503 error\)\n {2}acme {9}2 waiting, 2 failing \(latest at 2026-11-25T02:00:00\.000Z\)\n {2}globex {7}1 waiting, 0 failing\n {2}initech-old {2}1 waiting, 0 failing\nresults /m,
      );
    });
  });

  it("status names the one source whose reads are waiting and failing when the other sources' reads are all done", async () => {
    // Several organizations, one of them down for good: the others' reads finish, its own wait.
    // Only the source with reads waiting was left, and the line by source was left out with it:
    // status named no source at all for the failing reads.
    await withOwnDatabase('reads-one-source-left.db', async (own, w) => {
      const now = new Date().toISOString();
      const seed = jobSeeder(w);
      seed({ kind: 'fetch_result', source: 'acme', event_id: 'evt-a1', state: 'pending', run_at: now, attempts: 2, updated_at: '2026-11-25T02:00:00.000Z', last_error: 'interview: HTTP 503 error' });
      seed({ kind: 'fetch_result', source: 'globex', event_id: 'evt-g1', state: 'done', run_at: now, attempts: 1, updated_at: now });
      const plain = (await cli(['status'], { DATABASE_PATH: own })).stdout;
      expect(plain).toMatch(/^result reads {3}1 waiting, 1 failing \(latest, 2026-11-25T02:00:00\.000Z: interview: HTTP 503 error\)\n {2}acme {2}1 waiting, 1 failing \(latest at 2026-11-25T02:00:00\.000Z\)\nresults /m);
    });
  });

  it('status shows the result reads that are failing, with the latest error (an API outage), apart from those only waiting', async () => {
    await withOwnDatabase('reads.db', async (own, w) => {
      const now = new Date().toISOString();
      const seed = jobSeeder(w);
      const job = (event_id: string, attempts: number, updated_at: string, last_error: string) => seed({ kind: 'fetch_result', event_id, state: 'pending', run_at: now, attempts, updated_at, last_error });
      job('evt-r1', 0, now, 'result still processing');
      // Failed once, then polled normally: attempts stay counted, but it is not failing now.
      job('evt-r0', 1, '2026-11-25T03:00:00.000Z', 'result still processing');
      job('evt-r2', 3, '2026-11-25T01:00:00.000Z', 'interview: HTTP 502');
      job('evt-r3', 2, '2026-11-25T02:00:00.000Z', 'interview: HTTP 503 error');
      const json = await cli(['status', '--json'], { DATABASE_PATH: own });
      expect(JSON.parse(json.stdout).result_reads).toEqual({
        pending: 4,
        failing: 2,
        latest_failure: { last_error: 'interview: HTTP 503 error', updated_at: '2026-11-25T02:00:00.000Z' },
        by_source: [{ source: 'default', pending: 4, failing: 2, latest_failure_at: '2026-11-25T02:00:00.000Z' }],
      });
      const plain = await cli(['status'], { DATABASE_PATH: own });
      expect(plain.stdout).toMatch(/^result reads {3}4 waiting, 2 failing \(latest, 2026-11-25T02:00:00\.000Z: interview: HTTP 503 error\)\nresults /m);
      // Results by final state, over the four result tables, with what to do about the given up ones.
      const result = w.prepare(`INSERT INTO interview_results (application_id, source, state, reason, first_requested_at, updated_at) VALUES (?, 'default', ?, ?, ?, ?)`);
      result.run('app-1', 'given_up', 'still processing after 168 h', now, now);
      result.run('app-2', 'unavailable', 'scoring_failed', now, now);
      w.prepare(`INSERT INTO insights_results (application_id, source, state, reason, first_requested_at, updated_at) VALUES ('app-1', 'default', 'ready', NULL, ?, ?)`).run(now, now);
      expect(JSON.parse((await cli(['status', '--json'], { DATABASE_PATH: own })).stdout).results).toEqual({ ready: 1, processing: 0, unavailable: 1, given_up: 1 });
      expect((await cli(['status'], { DATABASE_PATH: own })).stdout).toMatch(
        /^results {8}ready 1, processing 0, unavailable 1, given up 1 {3}\(given up: `replay --application <id>` reads one again\)$/m,
      );
      // A running job whose lease ran out: its process died or hangs.
      const past = new Date(Date.now() - 60_000).toISOString();
      seed({ kind: 'fetch_result', event_id: 'evt-r9', state: 'running', run_at: past, attempts: 1, lease_owner: 'gone', lease_token: 't', lease_expires_at: past });
      expect(JSON.parse((await cli(['status', '--json'], { DATABASE_PATH: own })).stdout).jobs.running_lease_expired).toBe(1);
      expect((await cli(['status'], { DATABASE_PATH: own })).stdout).toMatch(/^jobs {11}pending 4, running 1 \(1 past their lease: their process died or hangs\), done 0, dead 0$/m);
    });
  });

  it('quarantine replay stores what this version parses (out of quarantine in the same transaction) and leaves what it still refuses', async () => {
    await withOwnDatabase('quarantine-replay.db', async (own, w) => {
      const at = '2026-11-20T08:00:00.000Z';
      const q = w.prepare('INSERT INTO quarantine (received_at, source, delivery_id, reason, headers, body) VALUES (?, ?, ?, ?, ?, ?)');
      // As an older version with stricter rules would have left them: two that parse now, one that never will.
      const fresh = JSON.stringify({ id: 'evt-q1', event_type: 'application.created', created_at: at, webhook_id: 'wh_1', payload: { application: { id: 'app-q1' } } });
      const dup = JSON.stringify({ id: 'evt-q0', event_type: 'application.created', payload: {} });
      w.prepare(`INSERT INTO events (id, event_type, source, received_at, delivery_id, envelope) VALUES ('evt-q0', 'application.created', 'default', ?, 'msg-q0', ?)`).run(at, dup);
      const fid = Number(q.run(at, 'default', 'msg-q1', 'an older rule', '{}', Buffer.from(fresh)).lastInsertRowid);
      const did = Number(q.run(at, 'default', 'msg-q0b', 'an older rule', '{}', Buffer.from(dup)).lastInsertRowid);
      const bad = Number(q.run(at, 'default', 'msg-q2', 'body is not valid JSON', '{}', Buffer.from('{"id": oops')).lastInsertRowid);
      // Other content under a stored id (a conflict), and a second copy of the first row's event.
      const changed = JSON.stringify({ id: 'evt-q0', event_type: 'application.created', payload: { note: 'other' } });
      const cid = Number(q.run(at, 'default', 'msg-q0c', 'an older rule', '{}', Buffer.from(changed)).lastInsertRowid);
      const again = Number(q.run(at, 'default', 'msg-q1b', 'an older rule', '{}', Buffer.from(fresh)).lastInsertRowid);
      const env = { DATABASE_PATH: own };

      expect((await cli(['quarantine', 'replay'], env))).toMatchObject({ code: 2, stderr: expect.stringMatching(/quarantine ids .* or --all/) });
      const dry = await cli(['quarantine', 'replay', '--all', '--dry-run', '--json'], env);
      expect(dry.code).toBe(1);
      // What the real run will say, row by row (it said "duplicate" for both of the last two before).
      const expected = [
        { id: fid, outcome: 'accepted', event_id: 'evt-q1' },
        { id: did, outcome: 'duplicate', event_id: 'evt-q0' },
        { id: bad, outcome: 'still refused', reason: 'body is not valid JSON' },
        { id: cid, outcome: 'conflict', event_id: 'evt-q0' },
        { id: again, outcome: 'duplicate', event_id: 'evt-q1' },
      ];
      expect(JSON.parse(dry.stdout).results).toEqual(expected);
      expect(w.prepare('SELECT COUNT(*) FROM quarantine').pluck().get()).toBe(5);

      const r = await cli(['quarantine', 'replay', '--all'], env);
      expect(r.code).toBe(1);
      expect(r.stdout).toBe(
        [
          `quarantine ${fid}: event evt-q1 was stored as a new event; out of quarantine`,
          `quarantine ${did}: event evt-q0 was already stored (a duplicate); out of quarantine`,
          `quarantine ${bad}: still refused (body is not valid JSON); left in quarantine`,
          `quarantine ${cid}: event evt-q0 was a conflict: kept in event_conflicts, the stored event unchanged; out of quarantine`,
          `quarantine ${again}: event evt-q1 was already stored (a duplicate); out of quarantine`,
          '',
        ].join('\n'),
      );
      // Stored as the receiver would have: its source, webhook-id, arrival time and exact body.
      expect(w.prepare("SELECT source, delivery_id, received_at, webhook_id, application_id, envelope FROM events WHERE id = 'evt-q1'").get()).toEqual({
        source: 'default', delivery_id: 'msg-q1', received_at: at, webhook_id: 'wh_1', application_id: 'app-q1', envelope: fresh,
      });
      expect(w.prepare('SELECT id FROM quarantine').pluck().all()).toEqual([bad]);
      // A body refused for a leading byte order mark shows it, escaped, instead of dropping it from view.
      const bom = Number(q.run(at, 'default', 'msg-q3', 'body is not valid JSON', '{}', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"id":"x"}')])).lastInsertRowid);
      expect((await cli(['quarantine', 'show', String(bom)], env)).stdout).toContain('\\ufeff{"id":"x"}');
      const gone = await cli(['quarantine', 'replay', String(fid)], env);
      expect({ code: gone.code, stderr: gone.stderr }).toEqual({ code: 1, stderr: `error: no quarantined delivery with id ${fid}\n` });
    });
  });

  it('conflicts list and show: where a body sent later under a stored id differs, and both bodies', async () => {
    await withOwnDatabase('conflicts.db', async (own, w) => {
      const first = { id: 'evt-c1', event_type: 'application.status_changed', payload: { application: { id: 'app-c', status: 'screened' }, tags: ['a'] } };
      const later = { id: 'evt-c1', event_type: 'application.status_changed', payload: { application: { id: 'app-c', status: 'hired' }, tags: ['a', 'b'], note: '\u001b[31m' } };
      w.prepare(`INSERT INTO events (id, event_type, source, received_at, delivery_id, envelope) VALUES ('evt-c1', 'application.status_changed', 'default', '2026-11-20T08:00:00.000Z', 'msg-1', ?)`).run(JSON.stringify(first));
      const cid = Number(
        w.prepare(`INSERT INTO event_conflicts (event_id, source, received_at, delivery_id, envelope) VALUES ('evt-c1', 'default', '2026-11-20T09:00:00.000Z', 'msg-2', ?)`).run(JSON.stringify(later)).lastInsertRowid,
      );
      const env = { DATABASE_PATH: own };
      expect((await cli(['status'], env)).stdout).toMatch(/^conflicts {6}1 {3}\(conflicts list\)$/m);
      const list = JSON.parse((await cli(['conflicts', 'list', '--json'], env)).stdout) as Record<string, unknown>[];
      expect(list).toEqual([{ id: cid, event_id: 'evt-c1', received_at: '2026-11-20T09:00:00.000Z', source: 'default', delivery_id: 'msg-2', bytes: JSON.stringify(later).length }]);
      const show = await cli(['conflicts', 'show', String(cid), '--json'], env);
      expect(JSON.parse(show.stdout)).toMatchObject({ differing_paths: ['$.payload.application.status', '$.payload.tags[1]', '$.payload.note'], stored: { delivery_id: 'msg-1' } });
      const plain = await cli(['conflicts', 'show', String(cid)], env);
      expect(plain.stdout).toMatch(/^differs at {2}\$\.payload\.application\.status, \$\.payload\.tags\[1\], \$\.payload\.note$/m);
      expect(plain.stdout).toContain('"note": "\\u001b[31m"');
      expect(plain.stdout).not.toContain('\u001b');
      expect(await cli(['conflicts', 'show', '99'], env)).toMatchObject({ code: 1, stderr: 'error: no conflict with id 99\n' });
      // A conflict ingest kept because a number is written otherwise (digits past 2^53 that JSON.parse
      // rounds to one double): shown at that path, not as "the same JSON".
      w.prepare(`INSERT INTO events (id, event_type, source, received_at, delivery_id, envelope) VALUES ('evt-c2', 'application.status_changed', 'default', '2026-11-20T08:00:00.000Z', 'msg-3', '{"id":"evt-c2","payload":{"seq":9007199254740993}}')`).run();
      const big = Number(
        w.prepare(`INSERT INTO event_conflicts (event_id, source, received_at, delivery_id, envelope) VALUES ('evt-c2', 'default', '2026-11-20T09:00:00.000Z', 'msg-4', '{"id":"evt-c2","payload":{"seq":9007199254740992}}')`).run().lastInsertRowid,
      );
      expect(JSON.parse((await cli(['conflicts', 'show', String(big), '--json'], env)).stdout)).toMatchObject({ differing_paths: ['$.payload.seq'] });
    });
  });

  it('replay through processing runs an event\'s dead-lettered fold again in place: no dead letter is left listed beside the new run', async () => {
    await withOwnDatabase('dead-fold.db', async (own, w) => {
      const at = new Date(Date.now() - 3_600_000).toISOString();
      w.prepare(`INSERT INTO events (id, event_type, source, received_at, delivery_id, envelope) VALUES (?, 'application.created', 'default', ?, ?, '{}')`).run('evt-f1', at, 'msg-f1');
      w.prepare('UPDATE processing_cursor SET last_event_rowid = (SELECT max(rowid) FROM events)').run();
      const seed = jobSeeder(w);
      // Two dead folds of the event (an earlier replay's, then the latest), and another event's, which stays.
      const dead = (event_id: string, last_error: string) =>
        seed({ kind: 'process_event', payload: JSON.stringify({ event_id }), event_id, state: 'dead', run_at: at, attempts: 5, max_attempts: 5, last_error, finished_at: at });
      const older = dead('evt-f1', 'fold failed (older)');
      const newest = dead('evt-f1', 'fold failed');
      const other = dead('evt-f2', 'fold failed elsewhere');
      const r = await cli(['replay', '--id', 'evt-f1', '--processing', '--json'], { DATABASE_PATH: own });
      expect(r.code, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout)).toMatchObject({ selected: 1, processing: { queued: 1, already_queued: 0 } });
      const rows = w.prepare("SELECT id, state, attempts, last_error, finished_at, payload FROM jobs WHERE kind = 'process_event' ORDER BY id").all() as { id: number; payload: string }[];
      expect(rows.map((j) => ({ ...j, payload: JSON.parse(j.payload) }))).toEqual([
        { id: newest, state: 'pending', attempts: 0, last_error: null, finished_at: null, payload: { event_id: 'evt-f1', refetch: true } },
        { id: other, state: 'dead', attempts: 5, last_error: 'fold failed elsewhere', finished_at: at, payload: { event_id: 'evt-f2' } },
      ]);
      expect(rows.some((j) => j.id === older)).toBe(false);
      const listed = JSON.parse((await cli(['dead-letters', 'list', '--json'], { DATABASE_PATH: own })).stdout) as { id: number }[];
      expect(listed.map((j) => j.id)).toEqual([other]);
    });
  });

  it('replay through processing counts an event that processing has not taken yet as already queued', async () => {
    // A database of its own, with no receiver running: stored events wait past the processing cursor.
    await withOwnDatabase('waiting.db', async (own, w) => {
      const insert = w.prepare(
        `INSERT INTO events (id, event_type, source, received_at, delivery_id, envelope) VALUES (?, 'application.created', 'default', ?, ?, '{}')`,
      );
      for (const id of ['evt-w1', 'evt-w2', 'evt-w3']) insert.run(id, new Date().toISOString(), `msg-${id}`);
      // Processing has taken the first one.
      w.prepare("UPDATE processing_cursor SET last_event_rowid = (SELECT rowid FROM events WHERE id = 'evt-w1')").run();
      const r = await cli(['replay', '--all', '--processing', '--dry-run', '--json'], { DATABASE_PATH: own });
      expect(r.code, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout)).toMatchObject({ selected: 3, processing: { queued: 1, already_queued: 2 } });
      // The plain lines put what is left out, and why, after what is queued, never under the verb.
      const file = join(dir, 'waiting-config.json');
      writeFileSync(file, JSON.stringify({ sinks: [{ name: 'archive', type: 'file', path: join(dir, 'waiting.ndjson') }] }));
      const plain = await cli(['replay', '--all', '--processing', '--sink', 'archive', '--dry-run'], { DATABASE_PATH: own, CONFIG_FILE: file });
      expect(plain.code, plain.stderr).toBe(0);
      expect(plain.stdout).toMatch(/^would queue evt-w1 application\.created: processing; skipped: sink archive \(not settled yet\)$/m);
      expect(plain.stdout).toMatch(/^nothing for evt-w2 application\.created; skipped: processing \(not processed yet: it will be\), sink archive \(not settled yet\)$/m);
      const status = await cli(['status'], { DATABASE_PATH: own });
      expect(status.stdout).toMatch(/^processing {5}2 events waiting, oldest stored \d+ \w+ ago$/m);
    });
  });

  it('a write lock held past the busy timeout is said as such, not as SQLite\'s "database is locked"', async () => {
    await withOwnDatabase('locked.db', async (own, w) => {
      w.prepare(`INSERT INTO events (id, event_type, source, received_at, delivery_id, envelope) VALUES ('evt-l1', 'application.created', 'default', ?, 'msg-l1', '{}')`).run(new Date().toISOString());
      w.prepare("UPDATE processing_cursor SET last_event_rowid = (SELECT max(rowid) FROM events)").run();
      w.exec('BEGIN IMMEDIATE');
      try {
        const r = await cli(['replay', '--all'], { DATABASE_PATH: own });
        expect(r.code).toBe(1);
        expect(r.stderr).toBe('error: the database stayed locked by another process for more than 5 s (a long write: a receiver under load, or another command such as `replay` or `prune`): try again\n');
      } finally {
        w.exec('ROLLBACK');
      }
    });
  });

  it('prune deletes finished jobs older than --older-than (a dry run first), and keeps dead letters and jobs still to run', async () => {
    await withOwnDatabase('prune.db', async (own, w) => {
      const seed = jobSeeder(w);
      const insert = (event_id: string, state: 'done' | 'dead' | 'pending', at: string, finished_at: string | null) => seed({ kind: 'sink:a', event_id, state, run_at: at, attempts: 1, max_attempts: 3, finished_at });
      const ago = (days: number) => new Date(Date.now() - days * 86_400_000).toISOString();
      for (let i = 0; i < 3; i++) insert(`old-${i}`, 'done', ago(10), ago(10));
      insert('recent', 'done', ago(1), ago(1));
      insert('dead', 'dead', ago(10), ago(10));
      insert('pending', 'pending', ago(10), null);
      const dry = await cli(['prune', '--older-than', '7d', '--dry-run', '--json'], { DATABASE_PATH: own });
      expect(dry.code, dry.stderr).toBe(0);
      expect(JSON.parse(dry.stdout)).toMatchObject({ dry_run: true, jobs: 3 });
      expect(w.prepare('SELECT count(*) FROM jobs').pluck().get()).toBe(6);
      const real = await cli(['prune', '--older-than', '7d'], { DATABASE_PATH: own });
      expect(real.code, real.stderr).toBe(0);
      expect(real.stdout).toMatch(/^deleted 3 finished jobs \(state done, finished before \d{4}-\d\d-\d\dT[\d:.]+Z\); jobs still to run and dead letters are kept\n$/);
      expect(w.prepare('SELECT event_id FROM jobs ORDER BY id').pluck().all()).toEqual(['recent', 'dead', 'pending']);
      const tooShort = await cli(['prune', '--older-than', '30m'], { DATABASE_PATH: own });
      expect(tooShort).toMatchObject({ code: 2, stderr: expect.stringMatching(/--older-than.*expected at least 1h, got "30m"/) });
      const tooLong = await cli(['prune', '--older-than', '999999999d'], { DATABASE_PATH: own });
      expect(tooLong).toMatchObject({ code: 2, stderr: expect.stringMatching(/--older-than.*expected at most 3650d, got "999999999d"/) });
    });
  });

  it('replay --dry-run lists every event on stdout also when stderr is a terminal (where a real run shows a progress bar)', async () => {
    await withOwnDatabase('dry-tty.db', async (own, w) => {
      const insert = w.prepare(`INSERT INTO events (id, event_type, source, received_at, delivery_id, envelope) VALUES (?, 'application.created', 'default', ?, ?, '{}')`);
      for (const id of ['evt-d1', 'evt-d2']) insert.run(id, new Date().toISOString(), `msg-${id}`);
      w.prepare("UPDATE processing_cursor SET last_event_rowid = (SELECT max(rowid) FROM events)").run();
      const out: string[] = [];
      const bar: string[] = [];
      const stderr = new Writable({ write: (chunk: Buffer, _enc, done) => (bar.push(chunk.toString()), done()) });
      const { runCli } = await import('../../src/cli/program.js');
      const outcome = await runCli(['replay', '--all', '--dry-run', '--database', own], { env: {}, out: (t) => out.push(t), err: (t) => bar.push(t), isTTY: true, stderr });
      expect(outcome.code).toBe(0);
      expect(out).toEqual(['would queue evt-d1 application.created: processing', 'would queue evt-d2 application.created: processing', 'dry run: 2 events selected; processing: 2 would queue']);
      expect(bar.join('')).toBe('');
    });
  });

  it('replay --wait counts a replayed job that finished and was pruned meanwhile as done, not as unfinished until the timeout', async () => {
    await withOwnDatabase('wait-prune.db', async (own, w) => {
      w.prepare(`INSERT INTO events (id, event_type, source, received_at, delivery_id, envelope) VALUES ('evt-p1', 'application.created', 'default', ?, 'msg-p1', '{}')`).run(new Date().toISOString());
      w.prepare("UPDATE processing_cursor SET last_event_rowid = (SELECT max(rowid) FROM events)").run();
      const child = runTs('src/cli/main.ts', ['replay', '--id', 'evt-p1', '--wait', '--timeout', '20', '--json'], { DATABASE_PATH: own });
      const job = await until(() => w.prepare("SELECT id FROM jobs WHERE kind = 'process_event'").pluck().get() as number | undefined, 'the replayed job');
      // Its fold ran (a receiver's workers), and `prune` deleted it before the wait looked again.
      w.prepare('DELETE FROM jobs WHERE id = ?').run(job);
      const { code } = await child.exited;
      expect(code, child.stderr.join('')).toBe(0);
      expect(JSON.parse(child.stdout.join(''))).toMatchObject({ finished: { done: 1, failed: 0 } });
    });
  });

  it('replay --wait that times out still prints its counts (unfinished, timed_out in --json) and exits 1', async () => {
    // A database of its own with no receiver: the replayed fold never runs.
    await withOwnDatabase('no-workers.db', async (own, w) => {
      w.prepare(`INSERT INTO events (id, event_type, source, received_at, delivery_id, envelope) VALUES ('evt-t1', 'application.created', 'default', ?, 'msg-t1', '{}')`).run(new Date().toISOString());
      w.prepare("UPDATE processing_cursor SET last_event_rowid = (SELECT rowid FROM events WHERE id = 'evt-t1')").run();
      const r = await cli(['replay', '--id', 'evt-t1', '--wait', '--timeout', '1', '--json'], { DATABASE_PATH: own });
      expect(r.code).toBe(1);
      expect(JSON.parse(r.stdout)).toMatchObject({ selected: 1, processing: { queued: 1 }, finished: { done: 0, failed: 0, unfinished: 1, timed_out: true } });
      expect(r.stderr).toMatch(/^error: --wait: 1 of 1 replayed jobs still unfinished after 1 s \(a result read may be waiting for the 30 s poll spacing/);
    });
  });

  it('sinks list shows each failing sink\'s latest failure: what to act on', async () => {
    const d = one<{ event_id: string; state: string; last_error: string | null; last_attempt_at: string | null }>(
      "SELECT event_id, state, last_error, last_attempt_at FROM deliveries WHERE sink = 'archive' ORDER BY event_id LIMIT 1",
    );
    const at = new Date(Date.now() - 5 * 60_000).toISOString();
    db.prepare("UPDATE deliveries SET state = 'retrying', last_error = ?, last_attempt_at = ? WHERE event_id = ? AND sink = 'archive'").run(
      'cannot append to /srv/out.ndjson: EPERM',
      at,
      d.event_id,
    );
    try {
      const cfg = { DATABASE_PATH: dbPath, CONFIG_FILE: env.CONFIG_FILE! };
      const listed = await cli(['sinks', 'list', '--json'], cfg);
      expect(listed.code, listed.stderr).toBe(0);
      const rows = JSON.parse(listed.stdout) as { name: string; failing: number; last_error: unknown }[];
      expect(rows.find((r) => r.name === 'archive')).toMatchObject({
        failing: 1,
        last_error: { error: 'cannot append to /srv/out.ndjson: EPERM', status_code: null, at, event_id: d.event_id },
      });
      expect(rows.find((r) => r.name === 'scores')?.last_error).toBeNull();
      const plain = await cli(['sinks', 'list'], cfg);
      expect(plain.stdout).toMatch(/cannot append to \/srv\/out\.ndjson: EPERM \(5 min ago\)/);
    } finally {
      db.prepare('UPDATE deliveries SET state = ?, last_error = ?, last_attempt_at = ? WHERE event_id = ? AND sink = ?').run(d.state, d.last_error, d.last_attempt_at, d.event_id, 'archive');
    }
  });

  it('sinks list shows a sink a 410 disabled; sinks enable re-enables it, and names the known sinks for an unknown one (exit 2)', async () => {
    db.prepare(
      `INSERT INTO sink_state (sink, disabled_at, disabled_reason, disabled_status, disabled_target, updated_at)
       VALUES ('scores', ?, 'the consumer answered 410 Gone', 410, 'x', ?)
       ON CONFLICT (sink) DO UPDATE SET disabled_at = excluded.disabled_at, disabled_reason = excluded.disabled_reason`,
    ).run(new Date().toISOString(), new Date().toISOString());
    const cfg = { DATABASE_PATH: dbPath, CONFIG_FILE: env.CONFIG_FILE! };
    const listed = await cli(['sinks', 'list', '--json'], cfg);
    expect(listed.code, listed.stderr).toBe(0);
    expect((JSON.parse(listed.stdout) as { name: string; enabled: boolean }[]).map((r) => [r.name, r.enabled])).toEqual([
      ['archive', true],
      ['scores', false],
    ]);
    const unknown = await cli(['sinks', 'enable', 'nosuch'], cfg);
    expect({ code: unknown.code, stderr: unknown.stderr }).toEqual({ code: 2, stderr: 'error: no sink named "nosuch" (known: archive, scores)\n' });
    const enabled = await cli(['sinks', 'enable', 'scores'], cfg);
    expect(enabled.code, enabled.stderr).toBe(0);
    expect(enabled.stdout).toBe('sink scores enabled; its waiting deliveries go out now\n');
    expect(one<{ disabled_at: string | null }>("SELECT disabled_at FROM sink_state WHERE sink = 'scores'").disabled_at).toBeNull();
    expect((await cli(['sinks', 'enable', 'scores'], cfg)).stdout).toBe('sink scores was not disabled\n');
  });

  it('replay and dead-letters retry to a sink a 410 disabled say that what they queued waits until it is enabled', async () => {
    const at = new Date().toISOString();
    db.prepare(
      `INSERT INTO sink_state (sink, disabled_at, disabled_reason, disabled_status, disabled_target, updated_at)
       VALUES ('archive', ?, 'HTTP 410 Gone from https://consumer.example', 410, ?, ?)
       ON CONFLICT (sink) DO UPDATE SET disabled_at = excluded.disabled_at, disabled_reason = excluded.disabled_reason, disabled_target = excluded.disabled_target`,
    ).run(at, sinkFile, at);
    const cfg = { DATABASE_PATH: dbPath, CONFIG_FILE: env.CONFIG_FILE! };
    const warning = `warning: sink archive is disabled since ${at} (HTTP 410 Gone from https://consumer.example): its deliveries wait until \`sinks enable archive\` (or a change of its URL in CONFIG_FILE)\n`;
    try {
      const replayed = await cli(['replay', '--sink', 'archive', '--id', 'evt-a1'], cfg);
      expect(replayed.code, replayed.stderr).toBe(0);
      expect(replayed.stderr).toBe(warning);
      // A dead letter of the sink, retried: the same.
      db.prepare("UPDATE jobs SET state = 'dead', last_error = 'HTTP 500' WHERE kind = 'sink:archive' AND event_id = 'evt-a1' AND state = 'pending'").run();
      const retried = await cli(['dead-letters', 'retry', '--kind', 'sink:archive'], cfg);
      expect(retried.code, retried.stderr).toBe(0);
      expect(retried.stderr).toBe(warning);
      // Another sink's replay says nothing of it.
      expect((await cli(['replay', '--sink', 'scores', '--id', 'evt-a1'], cfg)).stderr).toBe('');
    } finally {
      expect((await cli(['sinks', 'enable', 'archive'], cfg)).code).toBe(0);
      await until(() => one<{ n: number }>("SELECT COUNT(*) AS n FROM jobs WHERE state IN ('pending', 'running')").n === 0, 'an idle queue');
    }
  });

  it('sinks list says what the server would refuse in CONFIG_FILE (a misspelt top-level key, a file sink into the database), not "no sinks"', async () => {
    const badTop = join(dir, 'bad-top.json');
    writeFileSync(badTop, JSON.stringify({ sink: [{ name: 'crm', type: 'stdout' }] }));
    const top = await cli(['sinks', 'list'], { DATABASE_PATH: dbPath, CONFIG_FILE: badTop });
    expect(top.stderr).toContain('warning: CONFIG_FILE (top level): Unrecognized key: "sink"; did you mean "sinks"? (allowed keys: sources, sinks) (sinks shown from the database only)');
    const intoDb = join(dir, 'into-db.json');
    writeFileSync(intoDb, JSON.stringify({ sinks: [{ name: 'oops', type: 'file', path: dbPath }] }));
    const db2 = await cli(['sinks', 'list', '--json'], { DATABASE_PATH: dbPath, CONFIG_FILE: intoDb });
    expect(db2.stderr).toContain("warning: CONFIG_FILE sinks.0.path: is the receiver's database or one of its files (DATABASE_PATH)");
    // The database named by --database counts, as DATABASE_PATH does.
    const viaOption = await cli(['sinks', 'list', '--database', dbPath], { CONFIG_FILE: intoDb });
    expect(viaOption.stderr).toContain("warning: CONFIG_FILE sinks.0.path: is the receiver's database or one of its files (DATABASE_PATH)");
    // And a command that acts on sinks refuses such a configuration, as the server does.
    const enable = await cli(['sinks', 'enable', 'oops'], { DATABASE_PATH: dbPath, CONFIG_FILE: intoDb });
    expect(enable.code).toBe(1);
    expect(enable.stderr).toContain("CONFIG_FILE sinks.0.path: is the receiver's database or one of its files (DATABASE_PATH)");
  });

  it('sinks list warns of an events pattern that matches no documented event type (most likely a typo)', async () => {
    const typoConfig = join(dir, 'typo-config.json');
    writeFileSync(typoConfig, JSON.stringify({ sinks: [{ name: 'crm', type: 'file', path: join(dir, 'typo.ndjson'), events: ['interview.complete', 'insights.*'] }] }));
    const listed = await cli(['sinks', 'list'], { DATABASE_PATH: dbPath, CONFIG_FILE: typoConfig });
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stderr).toBe('warning: sink crm: events "interview.complete" match no event type the service documents (spec 6.4), only new types of that name\n');
  });

  it('sinks list and enable need no sink secret: a sink whose secret variable this shell lacks is still configured', async () => {
    const crmConfig = join(dir, 'crm-config.json');
    writeFileSync(crmConfig, JSON.stringify({ sinks: [{ name: 'crm', type: 'http', url: 'https://crm.example/hook', secret: { env: 'CRM_SINK_SECRET' } }] }));
    db.prepare(
      `INSERT INTO sink_state (sink, disabled_at, disabled_reason, disabled_status, disabled_target, updated_at)
       VALUES ('crm', ?, 'the consumer answered 410 Gone', 410, 'https://crm.example/hook', ?)`,
    ).run(new Date().toISOString(), new Date().toISOString());
    const cfg = { DATABASE_PATH: dbPath, CONFIG_FILE: crmConfig };
    const listed = await cli(['sinks', 'list', '--json'], cfg);
    expect({ code: listed.code, stderr: listed.stderr }).toEqual({ code: 0, stderr: '' });
    expect((JSON.parse(listed.stdout) as { name: string; configured: boolean; enabled: boolean }[]).find((r) => r.name === 'crm')).toMatchObject({
      configured: true,
      enabled: false,
    });
    const enabled = await cli(['sinks', 'enable', 'crm'], cfg);
    expect({ code: enabled.code, stderr: enabled.stderr, stdout: enabled.stdout }).toEqual({ code: 0, stderr: '', stdout: 'sink crm enabled; its waiting deliveries go out now\n' });
    // A secret given but malformed is still a mistake to name.
    writeFileSync(crmConfig, JSON.stringify({ sinks: [{ name: 'crm', type: 'http', url: 'https://crm.example/hook', secret: { env: 'CRM_SINK_SECRET' } }] }));
    const bad = await cli(['sinks', 'enable', 'crm'], { ...cfg, CRM_SINK_SECRET: 'not-a-secret' });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/CONFIG_FILE sinks\.0\.secret: must start with "whsec_"/);
  });

  it('lists dead letters and runs them again', async () => {
    // A fold of evt-b1 that died: its own, not the job an earlier test's replay through processing left.
    const at = new Date().toISOString();
    const job = {
      id: jobSeeder(db)({
        kind: 'process_event', payload: '{"event_id":"evt-b1"}', event_id: 'evt-b1', state: 'dead', run_at: at,
        attempts: 25, last_error: 'hiring API answered 500 (simulated)', finished_at: at,
      }),
    };
    const list = await cli(['dead-letters', 'list', '--json'], { DATABASE_PATH: dbPath });
    expect(list.code, list.stderr).toBe(0);
    expect(JSON.parse(list.stdout)).toEqual([expect.objectContaining({ id: job.id, kind: 'process_event', event_id: 'evt-b1', last_error: 'hiring API answered 500 (simulated)' })]);
    const retry = await cli(['dead-letters', 'retry', '--id', String(job.id)], { DATABASE_PATH: dbPath });
    expect(retry.code, retry.stderr).toBe(0);
    expect(retry.stdout).toMatch(/^1 dead-lettered job queued again/);
    await until(() => one<{ state: string }>('SELECT state FROM jobs WHERE id = ?', job.id).state === 'done', 'the retried job to run');
    const none = await cli(['dead-letters', 'retry', '--kind', 'fetch_result'], { DATABASE_PATH: dbPath });
    expect(none).toMatchObject({ code: 0, stdout: expect.stringMatching(/no dead letter matched/) });
    // An id asked for by name that is no dead letter (the job is done now, or never existed): exit 1, named.
    const byId = await cli(['dead-letters', 'retry', '--id', String(job.id), '--id', '999999'], { DATABASE_PATH: dbPath });
    expect(byId.code).toBe(1);
    expect(byId.stderr).toBe(`error: job ${job.id} is not a dead letter (no such job, or it is not dead)\nerror: job 999999 is not a dead letter (no such job, or it is not dead)\n`);
    // Dead, but of another kind than --kind asks: nothing retried, so not a success either.
    db.prepare("UPDATE jobs SET state = 'dead' WHERE id = ?").run(job.id);
    const otherKind = await cli(['dead-letters', 'retry', '--id', String(job.id), '--kind', 'fetch_result'], { DATABASE_PATH: dbPath });
    expect(otherKind).toMatchObject({ code: 1, stderr: `error: job ${job.id} is not a dead letter matching the other filters (no such job, or it is not dead)\n` });
    db.prepare("UPDATE jobs SET state = 'done' WHERE id = ?").run(job.id);
  });

  it('replay --id names an id that is not stored and exits 1, and still replays the others', async () => {
    const r = await cli(['replay', '--id', 'evt-a1', '--id', 'evt-typo', '--processing', '--dry-run', '--json'], { DATABASE_PATH: dbPath });
    expect(r.code).toBe(1);
    expect(JSON.parse(r.stdout)).toMatchObject({ selected: 1, not_stored: ['evt-typo'] });
    expect(r.stderr).toBe('error: no stored event has id "evt-typo"\n');
  });

  it('replay --source, --application or --type naming nothing stored says so (a typo is not a silent 0 selected)', async () => {
    const [source, app, known, type, sink] = await Promise.all([
      cli(['replay', '--all', '--source', 'defualt', '--dry-run'], { DATABASE_PATH: dbPath }),
      cli(['replay', '--application', 'ext-typo', '--dry-run'], { DATABASE_PATH: dbPath }),
      cli(['replay', '--application', 'ext-b', '--source', 'default', '--dry-run'], { DATABASE_PATH: dbPath }),
      cli(['replay', '--type', 'interview.complete', '--type', 'application.*', '--since', '2000-01-01', '--until', '2000-01-02', '--dry-run'], { DATABASE_PATH: dbPath }),
      // A sink's job source (dead-letters takes it): no event has it, which replay says as such.
      cli(['replay', '--source', 'sink:archive', '--dry-run'], { DATABASE_PATH: dbPath }),
    ]);
    expect({ code: sink.code, stderr: sink.stderr }).toEqual({
      code: 0,
      stderr: 'warning: no event has a sink\'s source such as "sink:archive": to send events to that sink, choose them otherwise and add --sink archive\n',
    });
    // Only the type no stored event has is named (application.* matches stored ones, outside the window).
    expect({ code: type.code, stderr: type.stderr }).toEqual({ code: 0, stderr: expect.stringMatching(/^warning: no stored event has type "interview\.complete" \(stored types: application\.created, [^)]*\)\n$/) });
    expect({ code: source.code, stderr: source.stderr }).toEqual({ code: 0, stderr: 'warning: no stored event has source "defualt" (stored sources: default)\n' });
    expect(source.stdout).toMatch(/^dry run: 0 events selected/m);
    expect({ code: app.code, stderr: app.stderr }).toEqual({ code: 0, stderr: 'warning: no application has id or external_id "ext-typo"\n' });
    expect({ code: known.code, stderr: known.stderr }).toEqual({ code: 0, stderr: '' });
    expect(known.stdout).toMatch(/^dry run: 1 event selected/m);
  });

  it('a retried sink dead letter shows as pending in deliveries at once', async () => {
    const d = one<{ event_id: string; sink: string }>('SELECT event_id, sink FROM deliveries ORDER BY event_id LIMIT 1');
    const job = one<{ id: number }>('SELECT id FROM jobs WHERE kind = ? AND event_id = ? ORDER BY id DESC LIMIT 1', `sink:${d.sink}`, d.event_id);
    db.prepare("UPDATE jobs SET state = 'dead', last_error = 'consumer down (simulated)' WHERE id = ?").run(job.id);
    db.prepare("UPDATE deliveries SET state = 'dead', last_error = 'consumer down (simulated)' WHERE event_id = ? AND sink = ?").run(d.event_id, d.sink);
    // With the configuration that has the sink: no warning.
    const retry = await cli(['dead-letters', 'retry', '--kind', `sink:${d.sink}`], { DATABASE_PATH: dbPath, CONFIG_FILE: env.CONFIG_FILE! });
    expect(retry.code, retry.stderr).toBe(0);
    expect(retry.stderr).toBe('');
    const row = one<{ state: string; last_error: string | null }>('SELECT state, last_error FROM deliveries WHERE event_id = ? AND sink = ?', d.event_id, d.sink);
    expect(row.state).not.toBe('dead');
    expect(row.last_error).toBeNull();
  });

  it('dead-letters discard deletes the dead letters meant to stay unsent (a dry run first), keeping what they failed on in deliveries', async () => {
    await withOwnDatabase('discard.db', async (own, w) => {
      const at = new Date().toISOString();
      const seed = jobSeeder(w);
      const dead = (kind: string, event_id: string) => seed({ kind, event_id, state: 'dead', run_at: at, attempts: 3, max_attempts: 3, last_error: 'sink is no longer configured', finished_at: at });
      const old1 = dead('sink:old-crm', 'evt-d1');
      dead('sink:old-crm', 'evt-d2');
      const read = dead('fetch_result', 'evt-d3');
      // A read whose event is settled (sent as given_up), and one whose event still awaits it.
      w.prepare(`INSERT INTO event_processing (event_id, state, resource, updated_at) VALUES ('evt-d3', 'settled', 'interview', ?), ('evt-d4', 'awaiting_result', 'interview', ?)`).run(at, at);
      const stranded = dead('fetch_result', 'evt-d4');
      w.prepare(`INSERT INTO deliveries (event_id, sink, message_id, state, attempts, last_error, queued_at, created_at, updated_at) VALUES ('evt-d1', 'old-crm', 'msg_d1', 'dead', 3, 'sink is no longer configured', ?, ?, ?)`).run(at, at, at);
      const env = { DATABASE_PATH: own };
      const jobs = () => w.prepare('SELECT id, kind FROM jobs ORDER BY id').all();

      expect(await cli(['dead-letters', 'discard'], env)).toMatchObject({ code: 2, stderr: expect.stringMatching(/^error: choose what to discard: --id/) });
      const dry = await cli(['dead-letters', 'discard', '--kind', 'sink:old-crm', '--dry-run', '--json'], env);
      expect(dry.code, dry.stderr).toBe(0);
      expect(JSON.parse(dry.stdout)).toEqual({ dry_run: true, discarded: 2, by_kind: { 'sink:old-crm': 2 }, kept: [] });
      expect(jobs()).toHaveLength(4);

      const gone = await cli(['dead-letters', 'discard', '--kind', 'sink:old-crm'], env);
      expect({ code: gone.code, stderr: gone.stderr }).toEqual({ code: 0, stderr: '' });
      expect(gone.stdout).toMatch(/^discarded 2 dead letters \(sink:old-crm 2\); they will not run again/);
      expect(jobs()).toEqual([
        { id: read, kind: 'fetch_result' },
        { id: stranded, kind: 'fetch_result' },
      ]);
      // The failure stays on record.
      expect(w.prepare("SELECT state, last_error FROM deliveries WHERE event_id = 'evt-d1'").get()).toEqual({ state: 'dead', last_error: 'sink is no longer configured' });

      // The read of an event still awaiting it is kept, whatever the selection: the only trace of it.
      const all = await cli(['dead-letters', 'discard', '--kind', 'fetch_result', '--json'], env);
      expect(all.code, all.stderr).toBe(0);
      expect(JSON.parse(all.stdout)).toEqual({ dry_run: false, discarded: 1, by_kind: { fetch_result: 1 }, kept: [{ id: stranded, kind: 'fetch_result', event_id: 'evt-d4' }] });
      expect(all.stderr).toBe(`kept job ${stranded} (fetch_result): its event evt-d4 is not settled, and this dead letter is all that says so; retry it (dead-letters retry --id ${stranded}) or replay the event\n`);
      expect(jobs()).toEqual([{ id: stranded, kind: 'fetch_result' }]);

      // By id, named twice, with one that is not a dead letter (any more): that one is named, exit 1, dry run or not.
      for (const dryRun of [['--dry-run'], []]) {
        const byId = await cli(['dead-letters', 'discard', '--id', String(old1), '--id', `${stranded},${stranded}`, ...dryRun], env);
        expect(byId.code).toBe(1);
        expect(byId.stderr).toMatch(new RegExp(`\\nerror: job ${old1} is not a dead letter \\(no such job, or it is not dead\\)\\n$`));
      }
      expect(jobs()).toEqual([{ id: stranded, kind: 'fetch_result' }]);
    });
  });

  it('dead-letters --source means the events\' source, as in replay: a sink delivery of an event from that source matches', async () => {
    await withOwnDatabase('by-source.db', async (own, w) => {
      const at = new Date().toISOString();
      const event = w.prepare(`INSERT INTO events (id, event_type, source, received_at, delivery_id, envelope) VALUES (?, 'application.created', ?, ?, ?, '{}')`);
      event.run('evt-acme', 'acme', at, 'msg-acme');
      event.run('evt-globex', 'globex', at, 'msg-globex');
      const seed = jobSeeder(w);
      const dead = (kind: string, event_id: string, source?: string) => seed({ kind, event_id, source, state: 'dead', run_at: at, attempts: 3, max_attempts: 3, last_error: 'x', finished_at: at });
      const acmeSink = dead('sink:crm', 'evt-acme');
      const acmeRead = dead('fetch_result', 'evt-acme', 'acme');
      dead('sink:crm', 'evt-globex');
      const env = { DATABASE_PATH: own };
      const listed = await cli(['dead-letters', 'list', '--source', 'acme', '--json'], env);
      expect((JSON.parse(listed.stdout) as { id: number }[]).map((r) => r.id).sort()).toEqual([acmeSink, acmeRead].sort());
      // The sink's own job source still selects that sink's jobs.
      expect((JSON.parse((await cli(['dead-letters', 'list', '--source', 'sink:crm', '--json'], env)).stdout) as unknown[]).length).toBe(2);
      // A dry run first: counts, changes nothing (by event too: a fold and a delivery of it, through two indexes).
      const dry = await cli(['dead-letters', 'retry', '--source', 'acme', '--dry-run', '--json'], env);
      expect(JSON.parse(dry.stdout)).toEqual({ dry_run: true, retried: 2 });
      dead('process_event', 'evt-acme', 'acme');
      expect(JSON.parse((await cli(['dead-letters', 'retry', '--event', 'evt-acme', '--dry-run', '--json'], env)).stdout)).toEqual({ dry_run: true, retried: 3 });
      expect(w.prepare("SELECT count(*) FROM jobs WHERE state = 'dead'").pluck().get()).toBe(4);
      const retried = await cli(['dead-letters', 'retry', '--event', 'evt-acme', '--json'], env);
      expect(JSON.parse(retried.stdout)).toEqual({ dry_run: false, retried: 3 });
      expect(w.prepare("SELECT event_id, kind FROM jobs WHERE state = 'dead'").all()).toEqual([{ event_id: 'evt-globex', kind: 'sink:crm' }]);
      // A --source no stored event has (a typo, `Acme` for `acme`) is said with the stored ones, not
      // left as "no dead letters"; a stored source with none matched, or a sink's, says nothing.
      const warning = 'warning: no stored event has source "Acme" (stored sources: acme, globex)\n';
      for (const args of [['list'], ['list', '--json'], ['retry', '--dry-run'], ['retry'], ['discard', '--dry-run'], ['discard']]) {
        const typo = await cli(['dead-letters', ...args, '--source', 'Acme'], env);
        expect({ args, code: typo.code, stderr: typo.stderr }).toEqual({ args, code: 0, stderr: warning });
      }
      for (const source of ['acme', 'sink:crm']) expect((await cli(['dead-letters', 'list', '--source', source, '--kind', 'process_event'], env)).stderr).toBe('');
      // A sink no job and no delivery record names (`crn` for `crm`) is said with the sinks known, not left as "no dead letters".
      const sinkTypo = await cli(['dead-letters', 'list', '--source', 'sink:crn'], env);
      expect({ code: sinkTypo.code, stderr: sinkTypo.stderr }).toEqual({ code: 0, stderr: expect.stringMatching(/^warning: no job or delivery record names sink "crn" \(sinks known: [^)]*\)\n$/) });
    });
  });

  it('dead-letters retry gives retried sink deliveries the max_attempts configured now, not the one they were queued with', async () => {
    await withOwnDatabase('max-attempts.db', async (own, w) => {
      const at = new Date().toISOString();
      const crm = jobSeeder(w)({ kind: 'sink:crm', payload: '{"event_id":"evt-m1","sink":"crm"}', event_id: 'evt-m1', state: 'dead', run_at: at, attempts: 3, max_attempts: 3, last_error: 'HTTP 503', finished_at: at });
      const config = join(dir, 'max-attempts.json');
      writeFileSync(config, JSON.stringify({ sinks: [{ name: 'crm', type: 'http', url: 'https://crm.example/hook', secret: { env: 'CRM_SINK_SECRET' }, max_attempts: 50 }] }));
      const retry = await cli(['dead-letters', 'retry', '--kind', 'sink:crm'], { DATABASE_PATH: own, CONFIG_FILE: config });
      expect({ code: retry.code, stderr: retry.stderr }).toEqual({ code: 0, stderr: '' });
      expect(w.prepare('SELECT state, attempts, max_attempts FROM jobs WHERE id = ?').get(crm)).toEqual({ state: 'pending', attempts: 0, max_attempts: 50 });
    });
  });

  it('dead-letters retry of a sink the configuration no longer has says its jobs will wait', async () => {
    const d = one<{ event_id: string; sink: string }>('SELECT event_id, sink FROM deliveries ORDER BY event_id LIMIT 1');
    const job = one<{ id: number }>('SELECT id FROM jobs WHERE kind = ? AND event_id = ? ORDER BY id DESC LIMIT 1', `sink:${d.sink}`, d.event_id);
    db.prepare("UPDATE jobs SET state = 'dead', last_error = 'consumer down (simulated)' WHERE id = ?").run(job.id);
    const { dir, cleanup } = tempDir('cli-nosink-');
    try {
      const other = join(dir, 'config.json');
      writeFileSync(other, JSON.stringify({ sinks: [{ name: 'elsewhere', type: 'file', path: join(dir, 'out.ndjson') }] }));
      const retry = await cli(['dead-letters', 'retry', '--kind', `sink:${d.sink}`], { DATABASE_PATH: dbPath, CONFIG_FILE: other });
      expect(retry.code, retry.stderr).toBe(0);
      expect(retry.stderr).toBe(
        `warning: no sink named ${JSON.stringify(d.sink)} is configured in CONFIG_FILE (known: elsewhere): its jobs stay pending until a receiver with that sink runs\n`,
      );
    } finally {
      cleanup();
    }
  });

  it('replays every event to every sink and through processing at once, --wait counting each job and delivery once', async () => {
    await until(() => one<{ n: number }>("SELECT COUNT(*) AS n FROM jobs WHERE state IN ('pending', 'running')").n === 0, 'an idle queue');
    const before = sinkLines().length;
    const r = await cli(['replay', '--all', '--sink', 'all', '--processing', '--wait', '--json', '--timeout', '20'], { DATABASE_PATH: dbPath, CONFIG_FILE: env.CONFIG_FILE! });
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({
      selected: 4,
      processing: { queued: 4, already_queued: 0 },
      sinks: { archive: { queued: 4, not_wanted: 0, not_settled: 0 }, scores: { queued: 0, not_wanted: 4 } },
      finished: { done: 8, failed: 0 },
    });
    const lines = sinkLines();
    // At least once: the replayed four are there (a settle of the replayed processing may fan out again).
    expect(lines.length).toBeGreaterThanOrEqual(before + 4);
    expect(new Set(lines.slice(before).map((l) => l.id))).toEqual(new Set(['evt-a1', 'evt-a2', 'evt-a3', 'evt-b1']));
    expect(all("SELECT state, COUNT(*) AS n FROM deliveries WHERE sink = 'archive' GROUP BY state")).toEqual([{ state: 'delivered', n: 4 }]);
  });

  it('replay --sink <name> --missing sends a sink only the events it has no record of (as a sink out of the configuration when they settled left them)', async () => {
    await until(() => one<{ n: number }>("SELECT COUNT(*) AS n FROM jobs WHERE state IN ('pending', 'running')").n === 0, 'an idle queue');
    // evt-b1 settled while archive was not configured: no job, no deliveries row. evt-a2's delivery died.
    db.prepare("DELETE FROM deliveries WHERE sink = 'archive' AND event_id = 'evt-b1'").run();
    db.prepare("DELETE FROM jobs WHERE kind = 'sink:archive' AND event_id = 'evt-b1'").run();
    db.prepare("UPDATE deliveries SET state = 'dead', last_error = 'HTTP 503' WHERE sink = 'archive' AND event_id = 'evt-a2'").run();
    const cfg = { DATABASE_PATH: dbPath, CONFIG_FILE: env.CONFIG_FILE! };

    const noSink = await cli(['replay', '--missing'], cfg);
    expect({ code: noSink.code, stderr: noSink.stderr }).toEqual({ code: 2, stderr: expect.stringMatching(/^error: --missing needs --sink/) });

    // Every sink: scores has no record of any of the four either, but its filter wants none of
    // them, so only evt-b1 counts; --limit counts only such events (the oldest three would
    // otherwise fill it with events no sink would take).
    const dry = await cli(['replay', '--sink', 'all', '--missing', '--limit', '1', '--dry-run', '--json'], cfg);
    expect(dry.code, dry.stderr).toBe(0);
    expect(JSON.parse(dry.stdout)).toMatchObject({
      dry_run: true,
      selected: 1,
      sinks: { archive: { queued: 1, not_wanted: 0, not_settled: 0, has_record: 0 }, scores: { queued: 0, not_wanted: 1, has_record: 0 } },
    });
    // Only to sinks: processing is not run again.
    expect(JSON.parse(dry.stdout).processing).toEqual({ queued: 0, already_queued: 0 });

    const before = sinkLines().length;
    const r = await cli(['replay', '--sink', 'archive', '--missing', '--wait', '--json', '--timeout', '20'], cfg);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ selected: 1, sinks: { archive: { queued: 1, has_record: 0 } }, finished: { done: 1, failed: 0 } });
    expect(sinkLines().slice(before).map((l) => l.id)).toEqual(['evt-b1']);
    expect(one("SELECT state FROM deliveries WHERE sink = 'archive' AND event_id = 'evt-b1'")).toEqual({ state: 'delivered' });
    // The dead one is a dead letter's business (dead-letters retry), not a missing one.
    expect(one("SELECT state FROM deliveries WHERE sink = 'archive' AND event_id = 'evt-a2'")).toEqual({ state: 'dead' });
    const again = await cli(['replay', '--sink', 'archive', '--missing'], cfg);
    expect(again.stdout).toBe('0 events selected; sink archive: 0 queued\n');
  });
});
