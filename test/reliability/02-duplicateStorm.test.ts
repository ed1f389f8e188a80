import { writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { freePort } from '../helpers/childServer.js';
import { newSecret } from '../helpers/signing.js';
import { count, sinkFileIds, stuckJobs, withDb } from './helpers/db.js';
import { deliver, makeClient, makeEvent, type EventKind } from './helpers/events.js';
import { startHiringStub } from './helpers/hiringStub.js';
import { startReceiverProcess, stopReceiverProcess, type ReceiverProcess } from './helpers/receiverProcess.js';
import { registerSecret, registerSensitive, reportFigures, seededRandom, shuffle, sleep, suiteSeed, workspace } from './helpers/run.js';

const EVENTS = 300;
const CONCURRENCY = 32;
/** Events whose first POST the http consumer refuses, so their message goes out twice. */
const REFUSED = 3;

const { dir, cleanups } = workspace('reliability-dup-');

describe('duplicate storm', () => {
  it(`${EVENTS} events each sent 3-5 times with fresh webhook-ids, concurrently and shuffled: one row, one accepted answer, one fetch and one sink message id per event`, async () => {
    const seed = suiteSeed();
    const random = seededRandom(seed);
    const secret = newSecret();
    const apiKey = `sk-dup${seed}.stormKey${Math.floor(random() * 1e9)}`;
    registerSecret(secret);
    registerSensitive('api_key', apiKey);
    const stub = await startHiringStub();
    cleanups.push(() => stub.close());
    // A consumer on 127.0.0.1 behind an http sink: the message id is what it sees as webhook-id.
    const hookSecret = newSecret();
    registerSecret(hookSecret);
    // It refuses the first POST of the first REFUSED events it sees (503, Retry-After: 1), so those
    // are sent again: a retry must carry the webhook-id of the first try, or the consumer would
    // take it for another message.
    const posts: { eventId: string; messageId: string }[] = [];
    const refusedPosts: { eventId: string; messageId: string }[] = [];
    const consumer = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const post = { eventId: (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id: string }).id, messageId: String(req.headers['webhook-id']) };
        if (refusedPosts.length < REFUSED && !refusedPosts.some((p) => p.eventId === post.eventId)) {
          refusedPosts.push(post);
          res.writeHead(503, { 'retry-after': '1' }).end();
          return;
        }
        posts.push(post);
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((r) => consumer.listen(0, '127.0.0.1', () => r()));
    cleanups.push(() => new Promise<void>((r) => (consumer.closeAllConnections(), consumer.close(() => r()))));
    const hookUrl = `http://127.0.0.1:${(consumer.address() as AddressInfo).port}/hook`;
    const dbPath = join(dir, 'receiver.db');
    const sinkPath = join(dir, 'archive.ndjson');
    const configPath = join(dir, 'config.json');
    writeFileSync(
      configPath,
      JSON.stringify({ sinks: [{ name: 'archive', type: 'file', path: sinkPath }, { name: 'hook', type: 'http', url: hookUrl, secret: hookSecret }] }),
    );
    const port = await freePort();
    const receiver: ReceiverProcess = await startReceiverProcess('duplicate-storm', {
      WEBHOOK_SECRET: secret,
      HIRING_API_URL: stub.url,
      HIRING_API_KEY: apiKey,
      CONFIG_FILE: configPath,
      DATABASE_PATH: dbPath,
      PORT: String(port),
    });
    cleanups.push(() => stopReceiverProcess(receiver));

    const kinds: EventKind[] = ['application.created', 'application.status_changed', 'interview.completed'];
    const events = Array.from({ length: EVENTS }, (_, i) => makeEvent(kinds[i % 3]!, i, `dup${seed}`));
    const copies = events.flatMap((e) => Array.from({ length: 3 + Math.floor(random() * 3) }, () => e));
    shuffle(copies, random);

    const outcomes = new Map<string, string[]>();
    let non200 = 0;
    const agent = makeClient(CONCURRENCY);
    cleanups.push(() => agent.destroy());
    let next = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < copies.length) {
          const e = copies[next++]!;
          const a = await deliver(agent, receiver.url, secret, e);
          if (a.status !== 200) non200++;
          const list = outcomes.get(e.id as string) ?? [];
          list.push((JSON.parse(a.body) as { outcome: string }).outcome);
          outcomes.set(e.id as string, list);
        }
      }),
    );

    // Processing and fan-out run in the receiver; wait until every event is in the file (bounded).
    const ids = events.map((e) => e.id as string);
    const deadline = Date.now() + 30_000;
    let fileIds: string[] = [];
    let open = 1;
    while (Date.now() < deadline) {
      fileIds = sinkFileIds(sinkPath);
      open = withDb(dbPath, (db) => count(db, "SELECT COUNT(*) FROM jobs WHERE state IN ('pending', 'running')"));
      if (open === 0 && new Set(fileIds).size >= ids.length && new Set(posts.map((p) => p.eventId)).size >= ids.length) break;
      await sleep(250);
    }
    // Each event folded once: the receiver counts every fold (event_processing would hide a second one).
    const metrics = await (await fetch(`${receiver.url}/metrics`)).text();
    const folds = Number(/^receiver_job_runs_total\{kind="process_event",outcome="done"\} (\d+)$/m.exec(metrics)?.[1] ?? 0);
    expect(await stopReceiverProcess(receiver)).toEqual({ code: 0, signal: null });

    const db = withDb(dbPath, (d) => ({
      eventRows: count(d, 'SELECT COUNT(*) FROM events'),
      perEvent: d.prepare('SELECT id, COUNT(*) AS n FROM events GROUP BY id HAVING n > 1').all(),
      settled: count(d, "SELECT COUNT(*) FROM event_processing WHERE state = 'settled'"),
      conflicts: count(d, 'SELECT COUNT(*) FROM event_conflicts'),
      deliveryRows: d.prepare("SELECT event_id, message_id, state FROM deliveries WHERE sink = 'archive'").all() as { event_id: string; message_id: string; state: string }[],
      hookRows: d.prepare("SELECT event_id, message_id, state FROM deliveries WHERE sink = 'hook'").all() as { event_id: string; message_id: string; state: string }[],
      stuck: stuckJobs(d, new Date().toISOString()),
    }));
    const fileSet = new Set(fileIds);
    const ackedIds = ids.filter((id) => (outcomes.get(id) ?? []).some((o) => o === 'accepted' || o === 'duplicate'));
    const storedIds = new Set(withDb(dbPath, (d) => d.prepare('SELECT id FROM events').pluck().all() as string[]));
    const messageIds = new Set(db.deliveryRows.map((r) => r.message_id));
    // What the consumer saw: every webhook-id it was sent, per event.
    const hookIdsPerEvent = new Map<string, Set<string>>();
    for (const p of [...refusedPosts, ...posts]) hookIdsPerEvent.set(p.eventId, (hookIdsPerEvent.get(p.eventId) ?? new Set()).add(p.messageId));
    const interviews = events.filter((e) => e.event_type === 'interview.completed').length;
    const accepted = [...outcomes.values()].map((o) => o.filter((x) => x === 'accepted').length);
    reportFigures('duplicate-storm', {
      seed,
      events_sent: EVENTS,
      deliveries: copies.length,
      deliveries_acknowledged: copies.length - non200,
      // Events: those with a 2xx answer, and of those, the ones stored.
      acknowledged: ackedIds.length,
      stored: ackedIds.filter((id) => storedIds.has(id)).length,
      processed: db.settled,
      folds,
      delivered: [...fileSet].filter((id) => ids.includes(id)).length,
      sink_lines: fileIds.length,
      sink_message_ids: messageIds.size,
      http_posts: posts.length,
      http_posts_refused_then_sent_again: refusedPosts.length,
      http_message_ids: new Set(posts.map((p) => p.messageId)).size,
      hiring_api_reads: stub.calls.length,
      lost: ackedIds.filter((id) => !storedIds.has(id) || !fileSet.has(id)).length,
    });

    expect(non200).toBe(0);
    expect(db.eventRows).toBe(EVENTS);
    expect(db.perEvent).toEqual([]);
    expect(db.conflicts).toBe(0);
    // Exactly one delivery of each event was the one that stored it; every other copy was a duplicate.
    expect(accepted.every((n) => n === 1)).toBe(true);
    expect([...outcomes.values()].flat().filter((o) => o !== 'accepted' && o !== 'duplicate')).toEqual([]);
    expect(db.settled).toBe(EVENTS);
    expect(folds).toBe(EVENTS);
    expect(stub.calls.length).toBe(interviews);
    // One sink message id per event, as the sinks see it: the http consumer took each event once,
    // under one webhook-id of its own (the same on the retry of a refused POST), and the file has
    // one line per event.
    expect([...hookIdsPerEvent.keys()].sort()).toEqual([...ids].sort());
    // Refused once and sent again (REFUSED of them), under the webhook-id of the first try.
    expect(refusedPosts).toHaveLength(REFUSED);
    expect([...hookIdsPerEvent.values()].every((set) => set.size === 1)).toBe(true);
    expect(new Set(posts.map((p) => p.messageId)).size).toBe(EVENTS);
    expect(posts).toHaveLength(EVENTS);
    expect(fileIds).toHaveLength(EVENTS);
    expect([...fileSet].sort()).toEqual([...ids].sort());
    // And the receiver's own record says the same, for both sinks.
    expect(db.deliveryRows).toHaveLength(EVENTS);
    expect(messageIds.size).toBe(EVENTS);
    expect(db.deliveryRows.every((r) => r.state === 'delivered')).toBe(true);
    expect(db.hookRows.filter((r) => r.state === 'delivered')).toHaveLength(EVENTS);
    expect(new Set(db.hookRows.map((r) => r.message_id))).toEqual(new Set(posts.map((p) => p.messageId)));
    expect(db.stuck).toMatchObject({ running: 0, pending: 0, dead: 0, eventsNotTaken: 0 });
  });
});
