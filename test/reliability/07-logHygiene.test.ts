import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { freePort } from '../helpers/childServer.js';
import { newSecret, signDelivery } from '../helpers/signing.js';
import { deliver, makeClient, makeEvent, post } from './helpers/events.js';
import { startReceiverProcess, stopReceiverProcess } from './helpers/receiverProcess.js';
import { registerSecret, registerSensitive, reportFigures, runDir, sleep, workspace } from './helpers/run.js';

const { dir, cleanups } = workspace('reliability-logs-');

/** Each test's figures (`reportFigures` name) and the prefix of the log files it saves (`saveLogLines`, receiver processes). */
const LOG_OF_TEST: Record<string, string> = {
  'kill-loop': 'kill-loop-',
  'duplicate-storm': 'duplicate-storm',
  'slow-upstream': 'slow-upstream',
  'lock-held': 'lock-held',
  'disk-full': 'disk-full-inprocess',
  'hostile-fuzz': 'hostile-fuzz-inprocess',
  'hostile-proto': 'hostile-proto-inprocess',
  'hostile-50mb': 'hostile-50mb',
  'hostile-slow-client': 'hostile-slowloris',
};

/** Shapes that must never be in a log, whatever the run's values were. */
const PATTERNS: [string, RegExp][] = [
  ['whsec_ secret', /whsec_[A-Za-z0-9+/=]{8,}/],
  ['API key', /\bsk-[A-Za-z0-9]+\.[A-Za-z0-9]+/],
  // An HMAC-SHA256 in padded base64 (44 characters), with or without its `v1,`: the bare digest
  // (one the receiver computed, say) is as good as the header to whoever reads the log.
  ['signature', /(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{43}=/],
  ['candidate email', /[A-Za-z0-9._%+-]+@example\.(org|com|net)/],
  ['candidate phone', /\+44 ?7700 ?9\d{5}|\+1 ?\(?\d{3}\)? ?555-?01\d\d/],
];

async function listen(handler: Parameters<typeof createServer>[1]) {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe('log hygiene', () => {
  it('the logs of the whole suite (child stdout/stderr, in-process captures) and of the error paths here hold no secret, key, API key, signature, candidate email or phone', async () => {
    // Error paths that log the most, with secrets all around: a refused API key, a failing
    // http sink with its own signing secret, a forged delivery, a quarantined body full of PII,
    // and a start-up that fails on a bad secret and a bad key.
    const secret = newSecret();
    const sinkSecret = newSecret();
    const apiKey = 'sk-logs0001.revokedKeyXYZ0000000000';
    registerSecret(secret);
    registerSecret(sinkSecret);
    registerSensitive('api_key', apiKey);
    const refusingApi = await listen((_req, res) => res.writeHead(401, { 'content-type': 'application/json' }).end('[{"code":"authentication_failed","detail":"Invalid key.","attr":null}]'));
    const failingConsumer = await listen((_req, res) => res.writeHead(500).end('consumer down'));
    const configPath = join(dir, 'config.json');
    writeFileSync(
      configPath,
      JSON.stringify({
        sinks: [
          { name: 'archive', type: 'file', path: join(dir, 'archive.ndjson') },
          { name: 'crm', type: 'http', url: `${failingConsumer}/hook`, secret: sinkSecret },
        ],
      }),
    );
    const receiver = await startReceiverProcess('log-hygiene', {
      WEBHOOK_SECRET: secret,
      HIRING_API_URL: refusingApi,
      HIRING_API_KEY: apiKey,
      CONFIG_FILE: configPath,
      DATABASE_PATH: join(dir, 'receiver.db'),
      PORT: String(await freePort()),
    });
    cleanups.push(() => stopReceiverProcess(receiver));
    const agent = makeClient(4);
    cleanups.push(() => agent.destroy());
    expect((await deliver(agent, receiver.url, secret, makeEvent('interview.completed', 1, 'logs'))).status).toBe(200);
    expect((await deliver(agent, receiver.url, secret, makeEvent('application.created', 2, 'logs'))).status).toBe(200);
    const forged = signDelivery(newSecret(), JSON.stringify(makeEvent('application.created', 3, 'logs')));
    expect((await post(agent, receiver.url, '/webhooks', forged.headers, forged.body)).status).toBe(401);
    const notJson = 'candidate cand-logs-4@example.org +44 7700 900444 {not json';
    const q = signDelivery(secret, notJson);
    expect(JSON.parse((await post(agent, receiver.url, '/webhooks', q.headers, notJson)).body).outcome).toBe('quarantined');
    // Wait (bounded) for the refused key and the failing sink to be logged.
    const deadline = Date.now() + 15_000;
    const logText = () => readFileSync(receiver.log, 'utf8');
    while (Date.now() < deadline && !(logText().includes('API key refused') && logText().includes('"sink":"crm"'))) await sleep(100);
    expect(logText()).toContain('API key refused');
    expect(await stopReceiverProcess(receiver)).toEqual({ code: 0, signal: null });

    const badStart = await startReceiverProcess(
      'log-hygiene-bad-config',
      { WEBHOOK_SECRET: secret.slice(0, 20), HIRING_API_URL: refusingApi, HIRING_API_KEY: `${apiKey} `, DATABASE_PATH: join(dir, 'never.db'), PORT: '1' },
      { wait: false },
    );
    expect((await badStart.exited).code).toBe(1);
    expect(readFileSync(badStart.log, 'utf8')).toMatch(/config error: WEBHOOK_SECRET/);
    registerSensitive('secret', secret.slice(0, 20));

    // Scan everything the suite left.
    const root = runDir();
    const logDir = join(root, 'logs');
    const files = readdirSync(logDir).filter((f) => f.endsWith('.log'));
    const sensitive = existsSync(join(root, 'sensitive.ndjson'))
      ? readFileSync(join(root, 'sensitive.ndjson'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { kind: string; value: string })
      : [];
    const exact = [...new Map(sensitive.filter((s) => s.value.length >= 12).map((s) => [s.value, s])).values()];
    const findings: string[] = [];
    let lines = 0;
    let bytes = 0;
    const linesOf = new Map<string, number>();
    for (const f of files) {
      const text = readFileSync(join(logDir, f), 'utf8');
      bytes += text.length;
      text.split('\n').forEach((line, i) => {
        if (!line) return;
        lines++;
        linesOf.set(f, (linesOf.get(f) ?? 0) + 1);
        for (const [what, re] of PATTERNS) if (re.test(line)) findings.push(`${f}:${i + 1}: ${what}: ${line.slice(0, 200)}`);
        for (const s of exact) if (line.includes(s.value)) findings.push(`${f}:${i + 1}: ${s.kind} ${s.value.slice(0, 8)}...: ${line.slice(0, 200)}`);
      });
    }
    // The suite's figures, for the README.
    const figDir = join(root, 'figures');
    const figures = existsSync(figDir) ? readdirSync(figDir).map((f) => JSON.parse(readFileSync(join(figDir, f), 'utf8')) as Record<string, unknown>) : [];
    reportFigures('log-hygiene', { files: files.length, lines, megabytes: +(bytes / 1048576).toFixed(1), sensitive_values: exact.length, findings: findings.length });
    // Totals over the tests that send a stream of events, each reporting the same fields in the
    // same unit (events): sent, acknowledged (a 2xx at the first try or a redelivery), stored (of
    // those acknowledged), delivered (of those acknowledged, where the test has a sink), lost.
    const streams = figures.filter((f) => typeof f.events_sent === 'number');
    const sum = (k: string) => streams.reduce((a, f) => a + (typeof f[k] === 'number' ? (f[k] as number) : 0), 0);
    const total = {
      test: 'suite-total',
      tests_reporting: streams.map((f) => String(f.test)).sort(),
      events_sent: sum('events_sent'),
      acknowledged: sum('acknowledged'),
      stored: sum('stored'),
      delivered: sum('delivered'),
      delivered_of_tests_with_a_sink: streams.filter((f) => typeof f.delivered === 'number').map((f) => String(f.test)).sort(),
      lost: sum('lost'),
    };
    console.log(JSON.stringify(total));
    // Each test asserts its own criteria; here only that every stream test reported in the total's
    // unit (so the README's totals add like with like) and that none of them lost an event.
    for (const f of streams) {
      expect(typeof f.acknowledged === 'number' && typeof f.stored === 'number' && typeof f.lost === 'number', `${String(f.test)} reports events acknowledged, stored and lost`).toBe(true);
    }
    expect(total.lost).toBe(0);

    expect(findings.slice(0, 20)).toEqual([]);
    expect(lines).toBeGreaterThanOrEqual(10);
    // The scan saw the error paths above.
    expect(files).toEqual(expect.arrayContaining(['log-hygiene.log', 'log-hygiene-bad-config.log']));
    // And the logs of every test that ran before it in this run (each reported its figures): a
    // test whose receiver's lines were not saved would otherwise leave nothing to scan, unseen.
    const unscanned = figures
      .map((f) => String(f.test))
      .filter((t) => t !== 'log-hygiene')
      .filter((t) => {
        const prefix = LOG_OF_TEST[t];
        return prefix === undefined || ![...linesOf.keys()].some((f) => f.startsWith(prefix));
      });
    expect(unscanned).toEqual([]);
  });
});
