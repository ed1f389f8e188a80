import { readFileSync, writeFileSync, existsSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cli } from '../cli/helpers.js';
import { tempDir } from '../helpers/receiver.js';
import { ACME_KEY, startPair, type Pair } from '../helpers/pair.js';

/**
 * A whole-host redirect in front of the hiring API (a load balancer's http→https 301, a moved
 * host): every scoring read answers it. It is the source's configuration, as a refused key is:
 * its reads pause, nothing is given up, and they complete once the service answers again. Each
 * read's first redirect only puts it back one probe period (it may be that read's alone); the
 * source pauses at a read's second, when nothing of the source was answered in between.
 */

const FIVE_MINUTES = 5 * 60_000;

let pair: Pair | undefined;
let stub: Server | undefined;
const cleanups: (() => void)[] = [];
afterEach(async () => {
  await pair?.close();
  pair = undefined;
  stub?.close();
  stub = undefined;
  cleanups.splice(0).forEach((c) => c());
});

const LOCATION_SECRET = 'tok-LOCSECRET';

/**
 * A stub of the API host on 127.0.0.1: while `redirecting`, every request (or, with `only`, those
 * whose path starts with it) is answered 301 to https://api.moved.example (with a query that must
 * never be shown); the others are passed to the sandbox.
 */
async function startStub(sandboxUrl: () => string, redirecting: boolean) {
  // `relative`: the Location is a path on the same host (`/api/v2/...?access_token=...`).
  const state = { redirecting, only: null as string | null, relative: false, redirects: 0 };
  stub = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (state.redirecting && (state.only === null || req.url!.startsWith(state.only))) {
        state.redirects++;
        const query = `?login_hint=jane%40example.com&access_token=${LOCATION_SECRET}`;
        res.writeHead(301, { location: state.relative ? `/moved${req.url}${query}` : `https://api.moved.example${req.url}${query}` }).end();
        return;
      }
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string' && k !== 'host' && k !== 'connection') headers[k] = v;
      fetch(`${sandboxUrl()}${req.url}`, { method: req.method!, headers, ...(chunks.length > 0 ? { body: Buffer.concat(chunks) } : {}) })
        .then(async (answer) => {
          const out: Record<string, string> = {};
          for (const k of ['content-type', 'retry-after']) {
            const v = answer.headers.get(k);
            if (v !== null) out[k] = v;
          }
          res.writeHead(answer.status, out).end(Buffer.from(await answer.arrayBuffer()));
        })
        .catch(() => res.writeHead(502).end());
    });
  });
  await new Promise<void>((r) => stub!.listen(0, '127.0.0.1', () => r()));
  return { url: `http://127.0.0.1:${(stub.address() as AddressInfo).port}`, state };
}

/** A pair whose receiver reads the API through the stub and writes every message to a file sink. */
async function stubbedPair(redirecting: boolean, env: Record<string, string> = {}) {
  const { dir, cleanup } = tempDir('redirect-');
  cleanups.push(cleanup);
  let sandboxUrl = '';
  const api = await startStub(() => sandboxUrl, redirecting);
  const file = join(dir, 'config.json');
  const out = join(dir, 'out.ndjson');
  writeFileSync(file, JSON.stringify({ sinks: [{ name: 'archive', type: 'file', path: out }] }));
  const p = await startPair({ env: { CONFIG_FILE: file, HIRING_API_URL: api.url, ...env } });
  pair = p;
  sandboxUrl = p.sandboxUrl;
  const messages = async () => {
    await p.receiver.app.fanOut.runUntilIdle();
    return existsSync(out) ? readFileSync(out, 'utf8').trimEnd().split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, any>) : [];
  };
  /** Applications whose (v2, or with `legacy` v1) interview completes; the reads run. */
  const complete = async (n: number, legacy = false) => {
    const c = p.sandbox.control;
    const apps = Array.from({ length: n }, () => c.createApplication({ jobId: c.createJob({ legacy }).id }));
    apps.forEach((a) => c.completeInterview(a.id));
    await p.settle();
    return apps;
  };
  return { p, api, messages, complete, dir };
}

/** Three reads (two v2, one v1) through a stub that redirects every request. */
async function redirectedPair() {
  const { p, api, messages, dir } = await stubbedPair(true);
  const c = p.sandbox.control;
  const apps = [
    c.createApplication({ jobId: c.createJob({}).id }),
    c.createApplication({ jobId: c.createJob({}).id }),
    // The v1 (legacy) read goes the same way.
    c.createApplication({ jobId: c.createJob({ legacy: true }).id }),
  ];
  apps.forEach((a) => c.completeInterview(a.id));
  await p.settle();
  return { p, api, apps, messages, dir };
}

const all = (p: Pair, sql: string, ...args: unknown[]) => p.receiver.app.database.ingestSqlite.prepare(sql).all(...args) as Record<string, any>[];
const resultState = (p: Pair, id: string) =>
  (all(p, 'SELECT state FROM interview_results WHERE application_id = ? UNION ALL SELECT state FROM legacy_interview_results WHERE application_id = ?', id, id)[0] ?? {}).state;
const withResult = (ms: Record<string, any>[]) => ms.filter((m) => m.result !== undefined && m.result !== null);

/** The host answers again (the redirect removed): a probe is answered, the pause lifts, and every read completes. */
async function expectResumed(p: Pair, api: { state: { redirecting: boolean } }, apps: { id: string }[]) {
  api.state.redirecting = false;
  for (let i = 0; i < 20 && apps.some((a) => resultState(p, a.id) !== 'ready'); i++) {
    p.clock.advance(60_000);
    await p.settle();
  }
  for (const a of apps) expect(resultState(p, a.id)).toBe('ready');
  expect(all(p, 'SELECT * FROM source_pauses')).toEqual([]);
  expect(all(p, "SELECT count(*) AS n FROM jobs WHERE state = 'dead'")).toEqual([{ n: 0 }]);
}

/** What a redirect of every read leaves: a pause as a refused key's, nothing given up or dead. */
async function expectPaused(p: Pair, api: { state: { redirects: number } }, messages: () => Promise<Record<string, any>[]>) {
  // Each read met the redirect once, its first: put back one probe period, nothing paused yet.
  expect(api.state.redirects).toBe(3);
  expect(p.receiver.logs.lines.filter((l) => l.level === 40 && /tried again once/.test(String(l.msg)))).not.toEqual([]);
  expect(all(p, 'SELECT * FROM source_pauses')).toEqual([]);
  expect(all(p, "SELECT attempts, run_at FROM jobs WHERE kind = 'fetch_result' AND state = 'pending'")).toEqual(
    [0, 0, 0].map(() => ({ attempts: 0, run_at: new Date(p.clock.now() + FIVE_MINUTES).toISOString() })),
  );
  // One period on, the first read tried again meets it with nothing of the source answered in
  // between: the source is redirected as a whole and paused; the other reads are not tried again.
  p.clock.advance(FIVE_MINUTES);
  await p.settle();
  expect(api.state.redirects).toBe(4);
  expect(all(p, "SELECT count(*) AS n FROM jobs WHERE state = 'dead'")).toEqual([{ n: 0 }]);
  expect(all(p, "SELECT attempts FROM jobs WHERE kind = 'fetch_result' AND state = 'pending'").map((r) => r.attempts)).toEqual([0, 0, 0]);
  const pauses = all(p, 'SELECT source, status, detail FROM source_pauses');
  expect(pauses).toEqual([{ source: 'default', status: 301, detail: expect.stringMatching(/HTTP 301 redirect not followed \(to https:\/\/api\.moved\.example\/… \(url sha256 [0-9a-f]{12}\)\)$/) }]);
  // No given_up, nor any result, went to the sinks: the results exist at the service.
  expect(withResult(await messages())).toEqual([]);
  for (const id of all(p, 'SELECT id FROM applications').map((r) => r.id as string)) expect(resultState(p, id)).toBe('processing');

  const ready = (await (await fetch(`${p.receiver.url}/readyz`)).json()) as Record<string, unknown>;
  expect(ready).toMatchObject({ status: 'ready', paused_sources: [{ source: 'default', status: 301 }] });
  const metrics = await (await fetch(`${p.receiver.url}/metrics`)).text();
  expect(metrics).toMatch(/receiver_source_paused\{source="default"\} 1/);
  const logged = p.receiver.logs.lines.filter((l) => l.level === 50 && l.source === 'default');
  expect(logged.map((l) => l.msg)).toEqual([expect.stringMatching(/redirect.*paused until HIRING_API_URL/)]);
  expect(String(logged[0]!.err)).toMatch(/to https:\/\/api\.moved\.example\/…/);
  // The Location's query (tokens, the user's address) and the key are never shown.
  const raw = p.receiver.logs.raw.join('\n');
  for (const leak of [LOCATION_SECRET, 'jane', ACME_KEY]) {
    expect(raw).not.toContain(leak);
    expect(JSON.stringify(pauses)).not.toContain(leak);
  }
}

describe('a redirect of the scoring reads (a wrong HIRING_API_URL) pauses the source like a refused key', () => {
  it('nothing is given up or dead-lettered; the pause is seen; the reads complete once the host answers again', async () => {
    const { p, api, apps, messages } = await redirectedPair();
    await expectPaused(p, api, messages);
    const status = await cli(['status', '--json'], { DATABASE_PATH: `${p.receiver.dbPath}` });
    expect(status.code, status.stderr).toBe(0);
    const report = JSON.parse(status.stdout) as { paused_sources: { source: string; status: number }[]; dead_letters: number; results: Record<string, number> };
    expect(report).toMatchObject({ dead_letters: 0, results: { given_up: 0 }, paused_sources: [{ source: 'default', status: 301 }] });

    // The probe 5 minutes on still meets the redirect: paused again, still nothing given up.
    p.clock.advance(FIVE_MINUTES + 1);
    await p.settle();
    expect(api.state.redirects).toBe(5);
    expect(all(p, "SELECT count(*) AS n FROM jobs WHERE state = 'dead'")).toEqual([{ n: 0 }]);
    expect(all(p, 'SELECT status FROM source_pauses')).toEqual([{ status: 301 }]);

    await expectResumed(p, api, apps);
    const sent = withResult(await messages());
    expect(sent.map((m) => [m.application_id, m.revision, m.result.state]).sort()).toEqual(apps.map((a) => [a.id, 1, 'ready']).sort());
    expect(api.state.redirects).toBe(5);
  }, 60_000);

  it('a restart with HIRING_API_URL fixed resumes at once', async () => {
    const { p, api, apps, messages } = await redirectedPair();
    await expectPaused(p, api, messages);
    await p.restartReceiver({ HIRING_API_URL: p.sandboxUrl });
    await p.receiver.app.startWorkers();
    await p.receiver.app.worker.stop();
    await p.settle();
    p.clock.advance(30_000);
    await p.settle();
    for (const a of apps) expect(resultState(p, a.id)).toBe('ready');
    expect(all(p, 'SELECT * FROM source_pauses')).toEqual([]);
    expect(withResult(await messages()).map((m) => m.result.state)).toEqual(['ready', 'ready', 'ready']);
    expect(api.state.redirects).toBe(4);
  }, 60_000);
});

describe('the log of many reads redirected', () => {
  it('is one warn line for the source, not one per read (each read\'s Location digest differs), then one a minute with the count', async () => {
    const { p, api, complete } = await stubbedPair(true);
    const waitLines = (level: number) => p.receiver.logs.lines.filter((l) => l.level === level && /tried again once/.test(String(l.msg)));
    await complete(12);
    expect(api.state.redirects).toBe(12);
    // Twelve reads, twelve different Locations (each its own path): one error of the source.
    const texts = all(p, "SELECT last_error FROM jobs WHERE kind = 'fetch_result'").map((r) => r.last_error as string);
    expect(new Set(texts).size).toBe(12);
    expect(waitLines(40)).toHaveLength(1);
    expect(waitLines(20)).toHaveLength(11);
    // Each read's full text is kept, at debug and in last_error.
    expect(new Set(waitLines(20).map((l) => l.err)).size).toBe(11);
    // A minute on, another read redirected: one line again, with those logged at debug meanwhile.
    p.clock.advance(61_000);
    await complete(1);
    expect(waitLines(40).map((l) => l.failed_since_last_line)).toEqual([undefined, 11]);
  }, 60_000);
});

describe('a relative Location (a path on the same host)', () => {
  it('is said by the origin it resolves to, never its path or query', async () => {
    const { p, api, complete } = await stubbedPair(true);
    api.state.relative = true;
    const [app] = await complete(1);
    // Its first redirect puts it back; its second, with nothing answered between, pauses.
    expect(all(p, 'SELECT * FROM source_pauses')).toEqual([]);
    p.clock.advance(FIVE_MINUTES);
    await p.settle();
    const origin = api.url.replace(/[.]/g, '\\.');
    const said = new RegExp(`^interview: HTTP 301 redirect not followed \\(to ${origin}/… \\(url sha256 [0-9a-f]{12}\\)\\)$`);
    const [pause] = all(p, 'SELECT status, detail FROM source_pauses');
    expect(pause).toEqual({ status: 301, detail: expect.stringMatching(said) });
    expect(all(p, "SELECT last_error FROM jobs WHERE kind = 'fetch_result'")).toEqual([{ last_error: expect.stringMatching(said) }]);
    const logged = p.receiver.logs.lines.filter((l) => l.level === 50 && l.source === 'default');
    expect(logged.map((l) => String(l.err))).toEqual([expect.stringMatching(said)]);
    for (const text of [pause!.detail as string, p.receiver.logs.raw.join('\n')]) {
      for (const leak of [LOCATION_SECRET, 'jane', '/moved', 'relative Location']) expect(text).not.toContain(leak);
    }
    expect(resultState(p, app!.id)).toBe('processing');
  }, 60_000);
});

/**
 * A redirect of some reads only (only /api/v1/* moved, one application's URL) is those reads'
 * failure, not the source's: they end as dead letters (given_up, as any read that fails for good),
 * the source's other reads are not held. Only a source whose reads are redirected as a whole pauses.
 */
describe('a redirect of some reads only ends those reads; a whole host that starts redirecting still pauses', () => {
  const deadReads = (p: Pair) => all(p, "SELECT last_error FROM jobs WHERE kind = 'fetch_result' AND state = 'dead'");

  it('only /api/v1/* redirected: the v1 read is given up after its retry, the v2 reads are never held, and a dead-letter retry reads it', async () => {
    const { p, api, messages, complete } = await stubbedPair(true);
    api.state.only = '/api/v1/';
    const before = await complete(2);
    for (const a of before) expect(resultState(p, a.id)).toBe('ready');

    // The v1 read meets the redirect right after v2 reads were answered: it alone is tried again later.
    const [legacy] = await complete(1, true);
    expect(api.state.redirects).toBe(1);
    expect(all(p, 'SELECT * FROM source_pauses')).toEqual([]);
    expect(resultState(p, legacy!.id)).toBe('processing');
    // The source is not held meanwhile: new v2 reads are answered at once.
    const during = await complete(3);
    for (const a of during) expect(resultState(p, a.id)).toBe('ready');
    expect(all(p, 'SELECT * FROM source_pauses')).toEqual([]);

    // Its retry meets the redirect again, while the other reads were answered: a dead letter.
    p.clock.advance(FIVE_MINUTES + 1);
    await p.settle();
    expect(api.state.redirects).toBe(2);
    expect(deadReads(p)).toEqual([{ last_error: expect.stringMatching(/^legacy_interview: HTTP 301 redirect not followed \(to https:\/\/api\.moved\.example\/… .*only this read/) }]);
    expect(all(p, 'SELECT * FROM source_pauses')).toEqual([]);
    expect(resultState(p, legacy!.id)).toBe('given_up');
    const given = withResult(await messages()).filter((m) => m.application_id === legacy!.id);
    expect(given).toEqual([expect.objectContaining({ revision: 1, result: expect.objectContaining({ state: 'given_up', reason: expect.stringMatching(/^fetch failed: legacy_interview: HTTP 301 redirect not followed/) }) })]);
    expect(JSON.stringify(given)).not.toContain(LOCATION_SECRET);

    // Nothing loops: hours on, the source is not paused and the read is not tried again by itself.
    for (let h = 0; h < 3; h++) {
      p.clock.advance(3_600_000);
      await p.settle();
    }
    expect(api.state.redirects).toBe(2);
    expect(all(p, 'SELECT * FROM source_pauses')).toEqual([]);

    // The operator has the path fixed and retries the dead letter: it is read, and sent again.
    api.state.redirecting = false;
    expect(await p.receiver.app.queue.retryDeadLetters({ kind: 'fetch_result' })).toBe(1);
    p.clock.advance(30_000);
    await p.settle();
    expect(resultState(p, legacy!.id)).toBe('ready');
    const sent = withResult(await messages()).filter((m) => m.application_id === legacy!.id);
    expect(sent.map((m) => [m.revision, m.result.state])).toEqual([[1, 'given_up'], [2, 'ready']]);
  }, 60_000);

  it('steady mixed traffic, v1 reads side by side with v2 reads in one claim, in any order: never paused, v2 reads answered at once, v1 reads given up', async () => {
    // Four reads at once: a claim holds v1 and v2 reads, run side by side. Only the test's drains
    // run them: the workers' own loops, started with a concurrency, are stopped.
    const { p, api, messages } = await stubbedPair(true, { WORKER_CONCURRENCY: '4' });
    await Promise.all([p.receiver.app.worker.stop(), p.receiver.app.fanOut.stop()]);
    api.state.only = '/api/v1/';
    const c = p.sandbox.control;
    // A read a claim: 1 = a v1 read (redirected), 0 = a v2 read (answered).
    const orders = ['0100', '1000', '1001', '0110', '1100', '0011'];
    const v1: string[] = [];
    const v2: string[] = [];
    const pausedAt: number[] = [];
    // 40 minutes of mixed traffic, then 6 of v2 reads only (among which the last v1 reads are retried).
    for (let minute = 0; minute < 46; minute++) {
      const order = minute < 40 ? orders[minute % orders.length]! : '0000';
      const apps = [...order].map((k) => c.createApplication({ jobId: c.createJob({ legacy: k === '1' }).id }));
      apps.forEach((a) => c.completeInterview(a.id));
      await p.settle();
      [...order].forEach((k, i) => (k === '1' ? v1 : v2).push(apps[i]!.id));
      // Every v2 read is answered when it is due: the source never holds it.
      [...order].forEach((k, i) => k === '0' && expect(resultState(p, apps[i]!.id), `minute ${minute} (${order})`).toBe('ready'));
      if (all(p, 'SELECT * FROM source_pauses').length > 0) pausedAt.push(minute);
      p.clock.advance(60_000);
    }
    expect(pausedAt).toEqual([]);
    expect(p.receiver.logs.lines.filter((l) => /paused until/.test(String(l.msg)))).toEqual([]);
    // Each v1 read was tried twice (its first redirect put it back once), then given up as a dead letter.
    expect(api.state.redirects).toBe(2 * v1.length);
    for (const id of v1) expect(resultState(p, id)).toBe('given_up');
    const dead = deadReads(p);
    expect(dead).toHaveLength(v1.length);
    for (const d of dead) expect(d.last_error).toMatch(/^legacy_interview: HTTP 301 redirect not followed .*only this read/);
    const sent = withResult(await messages());
    expect(sent.filter((m) => v1.includes(m.application_id)).map((m) => m.result.state)).toEqual(v1.map(() => 'given_up'));
    expect(sent.filter((m) => v2.includes(m.application_id)).map((m) => m.result.state)).toEqual(v2.map(() => 'ready'));
    // Nothing is left waiting.
    expect(all(p, "SELECT kind, state FROM jobs WHERE state NOT IN ('done', 'dead')")).toEqual([]);
  }, 60_000);

  it('a v1 read redirected before anything was answered waits one period, then ends as a dead letter once v2 reads are answered; nothing is paused', async () => {
    const { p, api, complete } = await stubbedPair(true);
    api.state.only = '/api/v1/';
    const [legacy] = await complete(1, true);
    // Its first redirect: put back one period; the source is not paused, and the v2 reads are answered at once.
    expect(all(p, 'SELECT * FROM source_pauses')).toEqual([]);
    const apps = await complete(4);
    for (const a of apps) expect(resultState(p, a.id)).toBe('ready');
    // Its second, after those answers: given up, and no pause comes.
    for (let i = 0; i < 6; i++) {
      p.clock.advance(FIVE_MINUTES + 1);
      await p.settle();
    }
    for (const a of apps) expect(resultState(p, a.id)).toBe('ready');
    expect(resultState(p, legacy!.id)).toBe('given_up');
    expect(deadReads(p)).toHaveLength(1);
    expect(all(p, 'SELECT * FROM source_pauses')).toEqual([]);
    const redirects = api.state.redirects;
    const later = await complete(2);
    for (const a of later) expect(resultState(p, a.id)).toBe('ready');
    p.clock.advance(3_600_000);
    await p.settle();
    expect(api.state.redirects).toBe(redirects);
    expect(all(p, 'SELECT * FROM source_pauses')).toEqual([]);
  }, 60_000);

  it('a quiet source that answered before, one v1 read redirected and nothing else read in the period: paused, and the log line says it may be one moved path', async () => {
    const { p, api, complete } = await stubbedPair(true);
    api.state.only = '/api/v1/';
    for (const a of await complete(2)) expect(resultState(p, a.id)).toBe('ready');
    await complete(1, true);
    // Five quiet minutes, then one v2 read: the v1 read's retry meets the redirect with nothing answered since.
    p.clock.advance(FIVE_MINUTES);
    const [later] = await complete(1);
    expect(all(p, 'SELECT status FROM source_pauses')).toEqual([{ status: 301 }]);
    expect(resultState(p, later!.id)).toBe('processing');
    const logged = p.receiver.logs.lines.filter((l) => l.level === 50 && l.source === 'default');
    expect(logged.map((l) => l.msg)).toEqual([
      "reads of legacy_interview are redirected (not followed) and no other read of this source was answered meanwhile: fetching for this source is paused until a probe is answered; if its other reads are answered, only the redirected ones will be given up. Check whether the service moved this endpoint or HIRING_API_URL (or the source's api_url) is wrong",
    ]);
    expect(String(logged[0]!.err)).toMatch(/^legacy_interview: HTTP 301 redirect not followed \(to https:\/\/api\.moved\.example\/…/);
    // The probe: the v2 read is answered, the pause lifts; the v1 read is given up at its next run.
    p.clock.advance(FIVE_MINUTES + 1);
    await p.settle();
    p.clock.advance(FIVE_MINUTES + 1);
    await p.settle();
    expect(resultState(p, later!.id)).toBe('ready');
    expect(all(p, 'SELECT * FROM source_pauses')).toEqual([]);
  }, 60_000);

  it('the whole host starts redirecting while reads were being answered: the source pauses one period on, nothing is given up, for as long as it lasts', async () => {
    const { p, api, messages, complete } = await stubbedPair(false);
    const before = await complete(2);
    for (const a of before) expect(resultState(p, a.id)).toBe('ready');

    api.state.redirecting = true;
    const moved = [...(await complete(2)), ...(await complete(1, true))];
    // Each read's first redirect: put back one period, not paused yet.
    expect(api.state.redirects).toBe(3);
    expect(all(p, 'SELECT * FROM source_pauses')).toEqual([]);
    // Their second, with nothing of the source answered since: the source is redirected as a whole.
    p.clock.advance(FIVE_MINUTES);
    await p.settle();
    expect(all(p, 'SELECT status FROM source_pauses')).toEqual([{ status: 301 }]);
    // A day of probes, all redirected: still paused, nothing dead, nothing given up.
    for (let h = 0; h < 24; h++) {
      p.clock.advance(3_600_000);
      await p.settle();
    }
    expect(api.state.redirects).toBeGreaterThan(3);
    expect(all(p, 'SELECT status FROM source_pauses')).toEqual([{ status: 301 }]);
    expect(deadReads(p)).toEqual([]);
    for (const a of moved) expect(resultState(p, a.id)).toBe('processing');
    expect(withResult(await messages()).map((m) => m.result.state)).toEqual(['ready', 'ready']);

    await expectResumed(p, api, moved);
    expect(withResult(await messages()).map((m) => m.result.state)).toEqual(['ready', 'ready', 'ready', 'ready', 'ready']);
  }, 60_000);
});
