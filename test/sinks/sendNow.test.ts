import Database from 'better-sqlite3';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/openDatabase.js';
import { ManualClock } from '../../src/util/clock.js';
import { cli, until } from '../cli/helpers.js';
import { jobSeeder } from '../helpers/jobs.js';
import { startReceiver, tempDir, type TestReceiver } from '../helpers/receiver.js';
import { envelope, newSecret, postSigned } from '../helpers/signing.js';
import { startConsumer, type Consumer, type Reply } from './helpers.js';

// A sink's consumer was down and is back: `sinks send-now` sends what waits for a later attempt
// at once, next to the running receiver, instead of at each delivery's next attempt (up to an
// hour away, or what a Retry-After said).

let r: TestReceiver | undefined;
let consumer: Consumer | undefined;
const { dir, cleanup } = tempDir('send-now-');
afterEach(async () => {
  await r?.close();
  r = undefined;
  await consumer?.close();
});
afterAll(cleanup);

const SINK_SECRET = newSecret();

/** A running receiver (its loops on, on 127.0.0.1) whose one sink `crm` posts to a consumer answering `answer()`. */
async function running(answer: () => Reply, sinkOptions: Record<string, unknown> = {}) {
  // Near real time: the CLI (a child process) reads the real clock.
  const clock = new ManualClock(Date.now());
  consumer = await startConsumer({ '/crm': SINK_SECRET });
  consumer.reply(() => answer());
  const config = join(dir, `config-${Date.now()}.json`);
  writeFileSync(config, JSON.stringify({ sinks: [{ name: 'crm', type: 'http', url: `${consumer.url}/crm`, secret: SINK_SECRET, concurrency: 1, ...sinkOptions }] }));
  const secret = newSecret();
  r = await startReceiver({ WEBHOOK_SECRET: secret, CONFIG_FILE: config }, { clock });
  const rec = r;
  const post = async () => {
    const body = JSON.stringify(envelope({ created_at: new Date(clock.now()).toISOString() }));
    expect((await postSigned(rec.url, secret, body, { timestampSeconds: Math.floor(clock.now() / 1000) })).status).toBe(200);
  };
  const deliveries = () => {
    const db = new Database(rec.dbPath, { readonly: true });
    try {
      return db.prepare("SELECT state, count(*) AS n FROM deliveries WHERE sink = 'crm' GROUP BY state ORDER BY state").all() as { state: string; n: number }[];
    } finally {
      db.close();
    }
  };
  return { clock, post, deliveries, rec, env: { DATABASE_PATH: rec.dbPath, CONFIG_FILE: config } };
}

/** The sink crm's jobs at 'pending' (what the command counts as pending in all). */
function pendingJobs(dbPath: string): number {
  const db = new Database(dbPath, { readonly: true });
  try {
    return db.prepare("SELECT COUNT(*) FROM jobs WHERE kind = 'sink:crm' AND state = 'pending'").pluck().get() as number;
  } finally {
    db.close();
  }
}

describe('sinks send-now', () => {
  it("sends a sink's waiting deliveries now, through the running receiver, though its consumer had asked it to wait an hour", async () => {
    let reply: Reply = { status: 503, headers: { 'retry-after': '3600' } };
    const { clock, post, deliveries, rec, env } = await running(() => reply);
    await post();
    await until(() => rec.logs.lines.some((l) => l.sink === 'crm' && String(l.msg).startsWith('asked to slow down (Retry-After)')), 'the consumer to ask for an hour');
    // Two more messages, held by the sink's wait: due, not sent.
    await post();
    await post();
    await until(() => deliveries().reduce((n, d) => n + d.n, 0) === 3, 'three deliveries queued');
    // The Retry-After line is logged before the first job is put back to wait: until then it is in
    // flight, neither waiting for a later attempt nor pending.
    await until(() => pendingJobs(rec.dbPath) === 3, 'the three jobs pending');
    expect(consumer!.on('/crm')).toHaveLength(1);

    // The consumer is back.
    reply = { status: 204 };
    const dry = await cli(['sinks', 'send-now', 'crm', '--dry-run', '--json'], env);
    expect(dry.code, dry.stderr).toBe(0);
    expect(JSON.parse(dry.stdout)).toEqual({ dry_run: true, sink: 'crm', made_due: 1, pending: 3 });
    const sent = await cli(['sinks', 'send-now', 'crm'], env);
    expect(sent.code, sent.stderr).toBe(0);
    expect(sent.stdout).toBe('sink crm: 1 delivery waiting for a later attempt made due now (3 deliveries pending in all); a running receiver sends them at its next poll\n');
    // The receiver's clock where the CLI's was.
    clock.set(Date.now());
    await until(() => deliveries().find((d) => d.state === 'delivered')?.n === 3, 'every delivery delivered');
    expect(consumer!.on('/crm').map((m) => m.message?.['type'])).toHaveLength(4);
    expect(rec.logs.lines.filter((l) => String(l.msg).startsWith('an operator said the remote is back'))).toEqual([expect.objectContaining({ level: 30, source: 'sink:crm' })]);
  });

  it("dead-letters retry of a sink's deliveries sends them through the running receiver, though the consumer's last answer asked it to wait an hour", async () => {
    let reply: Reply = { status: 503, headers: { 'retry-after': '3600' } };
    const { clock, post, deliveries, rec, env } = await running(() => reply, { max_attempts: 1 });
    await post();
    await until(() => deliveries().find((d) => d.state === 'dead')?.n === 1, 'the delivery dead-lettered, its last answer a Retry-After');
    expect(rec.logs.lines.some((l) => l.sink === 'crm' && String(l.msg).startsWith('asked to slow down (Retry-After)'))).toBe(true);

    reply = { status: 204 };
    const retried = await cli(['dead-letters', 'retry', '--kind', 'sink:crm'], env);
    expect(retried.code, retried.stderr).toBe(0);
    clock.set(Date.now());
    await until(() => deliveries().find((d) => d.state === 'delivered')?.n === 1, 'the delivery delivered');
    expect(consumer!.on('/crm')).toHaveLength(2);
  });

  it('enables a sink a 410 disabled, saying so, and names the known sinks for an unknown one (exit 2)', async () => {
    let reply: Reply = { status: 410 };
    const { post, deliveries, rec, env } = await running(() => reply);
    await post();
    await until(() => rec.logs.lines.some((l) => l.sink === 'crm' && l.level === 50 && /disabled|gone/i.test(String(l.msg))), 'the sink disabled');
    await until(() => deliveries().length > 0, 'the delivery recorded');
    // The line is logged before the worker puts the job back to pending: until then it is in
    // flight, not among the "pending in all" the command counts.
    await until(() => pendingJobs(rec.dbPath) === 1, 'the job back to pending');
    reply = { status: 204 };
    const unknown = await cli(['sinks', 'send-now', 'nosuch'], env);
    expect({ code: unknown.code, stderr: unknown.stderr }).toEqual({ code: 2, stderr: 'error: no sink named "nosuch" (known: crm)\n' });
    const sent = await cli(['sinks', 'send-now', 'crm'], env);
    expect(sent.code, sent.stderr).toBe(0);
    expect(sent.stdout).toMatch(/^sink crm: 0 deliveries waiting for a later attempt made due now \(1 delivery pending in all\); a running receiver sends them at its next poll\nsink crm was disabled since \S+ \(.*410.*\): enabled\n$/);
    await until(() => deliveries().find((d) => d.state === 'delivered')?.n === 1, 'the delivery delivered');
  });

  it('makes due every waiting delivery, also one whose job was stamped after the command began (a max_attempts step running meanwhile)', async () => {
    // What `dead-letters retry`'s max_attempts step (or a start's) does to the waiting jobs while a
    // send-now runs, stamped here ahead of the CLI's clock: their updated_at is later than its now.
    const dbPath = join(dir, 'stamped-later.db');
    const database = openDatabase(dbPath);
    const later = (ms: number) => new Date(Date.now() + ms).toISOString();
    const job = jobSeeder(database.sqlite);
    for (const [i, updatedAt] of [later(-60_000), later(3_600_000), later(3_600_000)].entries()) {
      job({ kind: 'sink:crm', event_id: `evt_${i}`, state: 'pending', run_at: later(3_600_000), attempts: 2, created_at: later(-60_000), updated_at: updatedAt });
    }
    database.sqlite.close();
    const config = join(dir, 'stamped-later.json');
    writeFileSync(config, JSON.stringify({ sinks: [{ name: 'crm', type: 'file', path: join(dir, 'stamped-later.ndjson') }] }));
    const sent = await cli(['sinks', 'send-now', 'crm'], { DATABASE_PATH: dbPath, CONFIG_FILE: config });
    expect(sent.code, sent.stderr).toBe(0);
    expect(sent.stdout).toMatch(/^sink crm: 3 deliveries waiting for a later attempt made due now \(3 deliveries pending in all\)/);
    const db = new Database(dbPath, { readonly: true });
    try {
      expect(db.prepare("SELECT COUNT(*) FROM jobs WHERE kind = 'sink:crm' AND run_at > ?").pluck().get(new Date().toISOString())).toBe(0);
    } finally {
      db.close();
    }
  });
});
