import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { freePort } from '../helpers/childServer.js';
import { newSecret } from '../helpers/signing.js';
import { count, withDb } from './helpers/db.js';
import { deliver, makeClient, makeEvent } from './helpers/events.js';
import { holdWriteLock } from './helpers/locker.js';
import { startReceiverProcess, stopReceiverProcess } from './helpers/receiverProcess.js';
import { registerSecret, reportFigures, sleep, workspace } from './helpers/run.js';

const WRITE_TIMEOUT_MS = 5000; // the default: not set in the receiver's environment

const { dir, cleanups } = workspace('reliability-lock-');

interface Sent {
  id: string;
  env: Record<string, unknown>;
  sentAt: number;
  answeredAt: number;
  status: number;
}

describe('write lock held by another process', () => {
  it('held 3 s then 12 s: no 2xx before the lock is let go, every 2xx committed, 503 past WRITE_TIMEOUT_MS (5 s default), 503s not stored, recovery after', async () => {
    const secret = newSecret();
    registerSecret(secret);
    const dbPath = join(dir, 'receiver.db');
    const receiver = await startReceiverProcess('lock-held', {
      WEBHOOK_SECRET: secret,
      HIRING_API_URL: 'http://127.0.0.1:9',
      HIRING_API_KEY: 'sk-lock0001.lockHeldKey0000000000000',
      DATABASE_PATH: dbPath,
      PORT: String(await freePort()),
    });
    cleanups.push(() => stopReceiverProcess(receiver));
    const agent = makeClient(128);
    cleanups.push(() => agent.destroy());

    let n = 0;
    const send = async (tag: string): Promise<Sent> => {
      const env = makeEvent('application.created', n++, tag);
      const sentAt = Date.now();
      let status = 0;
      try {
        status = (await deliver(agent, receiver.url, secret, env, 20_000)).status;
      } catch {
        status = -1; // network error: must not happen here
      }
      return { id: env.id as string, env, sentAt, answeredAt: Date.now(), status };
    };
    /** A delivery every `everyMs` for `forMs`, each on its own (open loop). */
    const stream = async (tag: string, forMs: number, everyMs: number) => {
      const out: Promise<Sent>[] = [];
      const end = Date.now() + forMs;
      while (Date.now() < end) {
        out.push(send(tag));
        await sleep(everyMs);
      }
      return Promise.all(out);
    };

    for (let i = 0; i < 10; i++) expect((await send('lock-warm')).status).toBe(200);

    const phase = async (holdMs: number, everyMs: number) => {
      const lock = holdWriteLock(dbPath, holdMs);
      const lockedAt = await lock.locked;
      const sent = await stream(`lock-${holdMs}`, holdMs + 300, everyMs);
      const releasingAt = await lock.releasing;
      expect(await lock.exited).toBe(0);
      const during = sent.filter((s) => s.sentAt >= lockedAt && s.sentAt < releasingAt);
      return { lockedAt, releasingAt, sent, during };
    };
    const short = await phase(3000, 100);
    const long = await phase(12_000, 200);
    const all = [...short.sent, ...long.sent];

    // Recovery: fresh deliveries are answered at once, and the refused ones go through when redelivered.
    const fresh = await Promise.all(Array.from({ length: 20 }, () => send('lock-after')));
    const refused = all.filter((s) => s.status === 503);
    const storedBeforeRedelivery = withDb(dbPath, (db) => refused.filter((s) => count(db, 'SELECT COUNT(*) FROM events WHERE id = ?', s.id) > 0).length);
    const redelivered = await Promise.all(refused.map((s) => deliver(agent, receiver.url, secret, s.env)));

    const stored = (ids: string[]) => withDb(dbPath, (db) => ids.filter((id) => count(db, 'SELECT COUNT(*) FROM events WHERE id = ?', id) === 1));
    const ok = all.filter((s) => s.status === 200);
    const early2xx = [short, long].flatMap((p) => p.during.filter((s) => s.status === 200 && s.answeredAt < p.releasingAt));
    const latency = (s: Sent) => s.answeredAt - s.sentAt;
    // Events: the streams' and the fresh ones after; acknowledged at the first try or when redelivered.
    const ackedIds = [...ok.map((s) => s.id), ...refused.filter((_, i) => redelivered[i]!.status === 200).map((s) => s.id), ...fresh.filter((s) => s.status === 200).map((s) => s.id)];
    const storedAcked = stored(ackedIds).length;
    reportFigures('lock-held', {
      events_sent: all.length + fresh.length,
      deliveries: all.length + fresh.length + redelivered.length,
      acknowledged: ackedIds.length,
      stored: storedAcked,
      answered_200_first_try: ok.length,
      refused_503: refused.length,
      other: all.filter((s) => s.status !== 200 && s.status !== 503).length,
      stored_first_try: stored(ok.map((s) => s.id)).length,
      acked_while_locked: early2xx.length,
      short_hold_max_latency_ms: Math.max(...short.during.map(latency)),
      long_hold_503_latency_ms: refused.length ? [Math.min(...refused.map(latency)), Math.max(...refused.map(latency))] : null,
      recovered: redelivered.filter((a) => a.status === 200).length,
      lost: ackedIds.length - storedAcked,
    });

    expect(all.filter((s) => s.status !== 200 && s.status !== 503)).toEqual([]);
    // 3 s is inside the bound: every delivery waits and is stored, none refused.
    expect(short.during.length).toBeGreaterThan(20);
    expect(short.sent.every((s) => s.status === 200)).toBe(true);
    // No 2xx is given while the other process still holds the lock (nothing can have been committed).
    expect(early2xx).toEqual([]);
    // Every 2xx was committed.
    expect(stored(ok.map((s) => s.id))).toHaveLength(ok.length);
    // 12 s is past the bound: the deliveries that waited 5 s got 503, after 5 s, and nothing of theirs was written.
    const longRefused = long.sent.filter((s) => s.status === 503);
    expect(longRefused.length).toBeGreaterThan(10);
    expect(storedBeforeRedelivery).toBe(0);
    expect(refused).toEqual(longRefused);
    for (const s of longRefused) {
      expect(latency(s)).toBeGreaterThanOrEqual(WRITE_TIMEOUT_MS - 100);
      expect(latency(s)).toBeLessThan(WRITE_TIMEOUT_MS + 2000);
      expect(s.sentAt).toBeLessThan(long.releasingAt - WRITE_TIMEOUT_MS + 200);
    }
    // Those sent within the last 5 s of the hold waited it out and were stored.
    expect(long.during.filter((s) => s.sentAt > long.releasingAt - WRITE_TIMEOUT_MS + 500).every((s) => s.status === 200)).toBe(true);
    // Recovery.
    expect(fresh.every((s) => s.status === 200 && latency(s) < 1000)).toBe(true);
    expect(redelivered.every((a) => a.status === 200 && (JSON.parse(a.body) as { outcome: string }).outcome === 'accepted')).toBe(true);
    expect(stored(refused.map((s) => s.id))).toHaveLength(refused.length);
    expect((await fetch(`${receiver.url}/readyz`)).status).toBe(200);
    expect(await stopReceiverProcess(receiver)).toEqual({ code: 0, signal: null });
  });
});
