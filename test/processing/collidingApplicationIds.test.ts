import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { dirname, join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/util/clock.js';
import { resultDigest } from '../../src/util/resultDigest.js';
import { cli } from '../cli/helpers.js';
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

/** A CONFIG_FILE with Acme (scores 4) and Globex (scores 1), each API keeping the keys it is sent, and `sink`. */
async function twoOrganizations(name: string, sink: Record<string, unknown>, acmeKeys: string[] = [], globexKeys: string[] = []) {
  const acmeSecret = newSecret();
  const globexSecret = newSecret();
  const cfg = join(dir, name);
  writeFileSync(
    cfg,
    JSON.stringify({
      sources: [
        { name: 'acme', secrets: [acmeSecret], api_url: await api(4, acmeKeys), api_key: 'sk-acme.key' },
        { name: 'globex', secrets: [globexSecret], api_url: await api(1, globexKeys), api_key: 'sk-globex.key' },
      ],
      sinks: [sink],
    }),
  );
  return { cfg, acmeSecret, globexSecret };
}

describe('the same application id in two organizations', () => {
  it("an event of one source naming an application whose results another source reads gets no result: not read with its key, and its sinks are not sent the other organization's", async () => {
    const clock = new ManualClock(Date.parse('2026-11-01T09:00:00Z'));
    const acmeKeys: string[] = [];
    const globexKeys: string[] = [];
    const globexFile = join(dir, 'globex.ndjson');
    const { cfg, acmeSecret, globexSecret } = await twoOrganizations('sources.json', { name: 'globex-only', type: 'file', path: globexFile, sources: ['globex'] }, acmeKeys, globexKeys);
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

  // A database from before results were kept apart: the other organization's event was settled
  // with this one's result, and its sinks were sent it. A replay of it now reads nothing and
  // settles it with no result, but as the same revision (no digest, nothing "changed"): its sinks
  // were not told, and a message sent again said result null under the webhook-id that carried
  // the other organization's result, which a consumer deduplicates away.
  it("a replay of an event settled before with the other organization's result sends its next revision, with no result", async () => {
    // The replay's job is queued on the CLI's clock, the system's: this one starts there.
    const clock = new ManualClock(Date.now());
    const sinkFile = join(dir, 'all-replay.ndjson');
    const { cfg, acmeSecret, globexSecret } = await twoOrganizations('sources-replay.json', { name: 'everything', type: 'file', path: sinkFile });
    const rec = await startReceiver({ CONFIG_FILE: cfg }, { clock });
    try {
      await rec.app.worker.stop();
      await rec.app.fanOut.stop();
      const first = envelope({ event_type: 'interview.completed', created_at: new Date(clock.now()).toISOString() });
      const appId = (first.payload as { application: { id: string } }).application.id;
      const post = async (secret: string, body: Record<string, unknown>) =>
        expect((await postSigned(rec.url, secret, JSON.stringify(body), { timestampSeconds: Math.floor(clock.now() / 1000) })).status).toBe(200);
      const drain = async () => {
        for (let i = 0; i < 3; i++) {
          await rec.app.worker.runUntilIdle();
          await rec.app.fanOut.runUntilIdle();
          clock.advance(61_000);
        }
      };
      await post(acmeSecret, first);
      await drain();
      const second = envelope({ event_type: 'interview.completed', created_at: new Date(clock.now()).toISOString() });
      (second.payload as { application: { id: string } }).application.id = appId;
      await post(globexSecret, second);
      await drain();
      // As an earlier version left it: Globex's event settled with Acme's result, as its message said.
      const w = new BetterSqlite3(rec.dbPath);
      try {
        const row = w.prepare('SELECT state, reason, data FROM interview_results WHERE application_id = ?').get(appId) as { state: 'ready'; reason: string | null; data: string | null };
        w.prepare("UPDATE event_processing SET resource = 'interview', result_digest = ? WHERE event_id = ?").run(resultDigest(row), second.id);
      } finally {
        w.close();
      }

      const replay = await cli(['replay', '--id', String(second.id)], { DATABASE_PATH: rec.dbPath, CONFIG_FILE: cfg });
      expect(replay.code, replay.stderr).toBe(0);
      await drain();

      const lines = readFileSync(sinkFile, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { id: string; revision: number; result: unknown });
      const ofSecond = lines.filter((l) => l.id === second.id).map((l) => [l.revision, l.result]);
      expect(ofSecond).toEqual([
        [1, null],
        [2, null],
      ]);
    } finally {
      await rec.close();
    }
  });
});
