import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { dirname, join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/util/clock.js';
import { listenApi } from '../helpers/apiServer.js';
import { startReceiver, tempDir, type TestReceiver } from '../helpers/receiver.js';
import { envelope, newSecret, postSigned } from '../helpers/signing.js';

const servers: Server[] = [];
let r: TestReceiver | undefined;
const { dir, cleanup } = tempDir('colliding-ids-');
afterAll(async () => {
  await r?.close();
  for (const s of servers) s.close();
  cleanup();
});

/** An organization's hiring API: every interview read is ready with `score`; each request's key is kept. */
const api = (score: number, keys: string[]) =>
  listenApi(servers, (req, res) => {
    keys.push(String(req.headers.authorization));
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ status: 'completed', overall_score: score, is_eligible: true, ineligibility_reasons: [], summary: `scored ${score}` }));
  });

describe('the same application id in two organizations', () => {
  it("an event of one source naming an application whose results another source reads gets no result: not read with its key, and its sinks are not sent the other organization's", async () => {
    const clock = new ManualClock(Date.parse('2026-11-01T09:00:00Z'));
    const acmeSecret = newSecret();
    const globexSecret = newSecret();
    const acmeKeys: string[] = [];
    const globexKeys: string[] = [];
    const cfg = join(dir, 'sources.json');
    const globexFile = join(dir, 'globex.ndjson');
    writeFileSync(
      cfg,
      JSON.stringify({
        sources: [
          { name: 'acme', secrets: [acmeSecret], api_url: await api(4, acmeKeys), api_key: 'sk-acme.key' },
          { name: 'globex', secrets: [globexSecret], api_url: await api(1, globexKeys), api_key: 'sk-globex.key' },
        ],
        sinks: [{ name: 'globex-only', type: 'file', path: globexFile, sources: ['globex'] }],
      }),
    );
    r = await startReceiver({ CONFIG_FILE: cfg }, { clock });
    await r.app.worker.stop();
    await r.app.fanOut.stop();
    const first = envelope({ event_type: 'interview.completed', created_at: new Date(clock.now()).toISOString() });
    const appId = (first.payload as { application: { id: string } }).application.id;
    const post = async (secret: string, body: Record<string, unknown>) =>
      expect((await postSigned(r!.url, secret, JSON.stringify(body), { timestampSeconds: Math.floor(clock.now() / 1000) })).status).toBe(200);

    await post(acmeSecret, first);
    await r.app.worker.runUntilIdle();
    clock.advance(60_000);
    // Globex's event names the same application id (another candidate of another organization).
    const second = envelope({ event_type: 'interview.completed', created_at: new Date(clock.now()).toISOString() });
    (second.payload as { application: { id: string } }).application.id = appId;
    await post(globexSecret, second);
    for (let i = 0; i < 5; i++) {
      await r.app.worker.runUntilIdle();
      await r.app.fanOut.runUntilIdle();
      clock.advance(61_000);
    }

    expect(acmeKeys).toEqual(['Bearer sk-acme.key']);
    expect(globexKeys).toEqual([]);
    const db = new BetterSqlite3(r.dbPath, { readonly: true });
    try {
      // Acme's result stays Acme's.
      expect(db.prepare('SELECT source, state, overall_score FROM interview_results WHERE application_id = ?').get(appId)).toEqual({ source: 'acme', state: 'ready', overall_score: 4 });
      expect(db.prepare("SELECT count(*) AS n FROM jobs WHERE state <> 'done'").get()).toEqual({ n: 0 });
    } finally {
      db.close();
    }
    const lines = readFileSync(globexFile, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { id: string; source: string; result: unknown });
    expect(lines.map((l) => [l.id, l.source, l.result])).toEqual([[second.id, 'globex', null]]);
    expect(r.logs.lines.some((l) => l.msg === "an event names an application whose results another source reads (ids collide across organizations): not read with this source's key; its message carries no result" && l.source === 'globex' && l.results_source === 'acme')).toBe(true);
  });

  it('a source renamed in CONFIG_FILE: the results its events opened under the old name are read under the new one', async () => {
    const clock = new ManualClock(Date.parse('2026-11-01T09:00:00Z'));
    const secret = newSecret();
    const keys: string[] = [];
    const url = await api(3, keys);
    const cfg = join(dir, 'renamed.json');
    const sources = (name: string) => JSON.stringify({ sources: [{ name, secrets: [secret], api_url: url, api_key: 'sk-acme.key' }] });
    writeFileSync(cfg, sources('acme-old'));
    const before = await startReceiver({ CONFIG_FILE: cfg }, { clock });
    await before.app.worker.stop();
    const first = envelope({ event_type: 'interview.completed', created_at: new Date(clock.now()).toISOString() });
    const appId = (first.payload as { application: { id: string } }).application.id;
    expect((await postSigned(before.url, secret, JSON.stringify(first), { timestampSeconds: Math.floor(clock.now() / 1000) })).status).toBe(200);
    await before.app.worker.runUntilIdle();
    await before.app.stop();

    writeFileSync(cfg, sources('acme'));
    clock.advance(60_000);
    const after = await startReceiver({ CONFIG_FILE: cfg, DATABASE_PATH: before.dbPath }, { clock });
    try {
      await after.app.worker.stop();
      const second = envelope({ event_type: 'interview.completed', created_at: new Date(clock.now()).toISOString() });
      (second.payload as { application: { id: string } }).application.id = appId;
      expect((await postSigned(after.url, secret, JSON.stringify(second), { timestampSeconds: Math.floor(clock.now() / 1000) })).status).toBe(200);
      await after.app.worker.runUntilIdle();
      expect(keys).toEqual(['Bearer sk-acme.key', 'Bearer sk-acme.key']);
      const db = new BetterSqlite3(before.dbPath, { readonly: true });
      try {
        expect(db.prepare('SELECT source, state FROM interview_results WHERE application_id = ?').get(appId)).toEqual({ source: 'acme', state: 'ready' });
        expect(db.prepare('SELECT resource, state FROM event_processing WHERE event_id = ?').get(second.id)).toEqual({ resource: 'interview', state: 'settled' });
      } finally {
        db.close();
      }
    } finally {
      await after.close();
      rmSync(dirname(before.dbPath), { recursive: true, force: true });
    }
  });
});
