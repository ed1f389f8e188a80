import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FIXTURE_TYPES } from '../../src/cli/fixtures.js';
import { freePort } from '../helpers/childServer.js';
import { startReceiver, type TestReceiver } from '../helpers/receiver.js';
import { newSecret } from '../helpers/signing.js';
import { answerCutOff, cli } from './helpers.js';

const secret = newSecret();
let receiver: TestReceiver;
let url: string;

beforeAll(async () => {
  receiver = await startReceiver({ WEBHOOK_SECRET: secret, WORKER_CONCURRENCY: '0' });
  url = `${receiver.url}/webhooks`;
});
afterAll(() => receiver.close());

const events = () => receiver.app.database.sqlite.prepare('SELECT id, event_type, application_id, envelope FROM events').all() as { id: string; event_type: string; application_id: string | null; envelope: string }[];

describe('send', () => {
  it('signs every built-in fixture so the receiver accepts and stores it, external_id on every application block', async () => {
    const results = await Promise.all(FIXTURE_TYPES.map((t) => cli(['send', t, '--url', url, '--secret', secret, '--external-id', `ext-${t}`])));
    results.forEach((r, i) => {
      expect(r.code, `${FIXTURE_TYPES[i]}: ${r.stderr}`).toBe(0);
      expect(r.stdout).toMatch(new RegExp(`^200 OK ${FIXTURE_TYPES[i]!.replace('.', '\\.')} .*"outcome":"accepted"`));
    });
    // The events these sends stored (by the ids their answers name), not whatever other tests sent meanwhile.
    const sent = new Set(results.map((r) => /^200 OK \S+ (\S+) \(/.exec(r.stdout)![1]));
    const stored = events().filter((e) => sent.has(e.id));
    expect(stored.map((e) => e.event_type).sort()).toEqual([...FIXTURE_TYPES].sort());
    for (const e of stored) {
      const payload = (JSON.parse(e.envelope) as { payload: Record<string, { external_id?: unknown }> }).payload;
      // Spec 6.4: the deleted snapshot carries no external_id; every application block does.
      if (e.event_type === 'job_application.deleted') expect(payload, e.event_type).not.toHaveProperty('external_id');
      else expect(payload.application?.external_id, e.event_type).toBe(`ext-${e.event_type}`);
      expect(e.application_id, e.event_type).not.toBeNull();
    }
  });

  it('--repeat sends the same event id under fresh webhook-ids (one stored, the rest duplicates); --print shows the exact request', async () => {
    const id = 'evt-cli-repeat-1';
    const r = await cli(['send', 'insights.completed', '--url', url, '--id', id, '--repeat', '3', '--print', '--set', 'payload.insights.is_eligible=false'], { WEBHOOK_SECRET: `whsec_${Buffer.alloc(24, 7).toString('base64')},${secret}` });
    expect(r.code, r.stderr).toBe(0);
    const answers = r.stdout.split('\n').filter((l) => l.startsWith('200 '));
    expect(answers).toHaveLength(3);
    expect(answers[0]).toContain('"outcome":"accepted"');
    expect(answers.slice(1).every((a) => a.includes('"outcome":"duplicate"'))).toBe(true);
    const msgIds = [...r.stdout.matchAll(/^webhook-id: (msg_\w+)$/gm)].map((m) => m[1]);
    expect(new Set(msgIds).size).toBe(3);
    expect(r.stdout).toMatch(new RegExp(`^POST ${url}$`, 'm'));
    expect(r.stdout).toMatch(/^webhook-signature: v1,[A-Za-z0-9+/=]+$/m);
    expect(r.stdout).toMatch(/^webhook-timestamp: \d+$/m);
    const row = events().find((e) => e.id === id)!;
    expect((JSON.parse(row.envelope) as { payload: { insights: { is_eligible: unknown } } }).payload.insights.is_eligible).toBe(false);
  });

  it('--set takes its value whole: a JSON array or a text with commas in it is set as given, not cut at the commas', async () => {
    const id = 'evt-cli-set-commas-1';
    const r = await cli(
      ['send', 'interview.completed', '--url', url, '--id', id, '--set', 'payload.interview.result.red_flags=["Late to the call","Rude, twice"]', '--set', 'payload.interview.result.summary=Calm, precise, on time.'],
      { WEBHOOK_SECRET: secret },
    );
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
    const row = events().find((e) => e.id === id)!;
    const result = (JSON.parse(row.envelope) as { payload: { interview: { result: { red_flags: unknown; summary: unknown } } } }).payload.interview.result;
    expect(result).toMatchObject({ red_flags: ['Late to the call', 'Rude, twice'], summary: 'Calm, precise, on time.' });
  });

  it('exits 1 with the answer when the receiver refuses: wrong secret, timestamp outside the tolerance, or no receiver', async () => {
    const before = events().length;
    const closed = await freePort();
    const [badSecret, stale, future, down] = await Promise.all([
      cli(['send', 'application.created', '--url', url, '--secret', newSecret()]),
      cli(['send', 'application.created', '--url', url, '--secret', secret, '--timestamp-offset', '-400']),
      cli(['send', 'application.created', '--url', url, '--secret', secret, '--timestamp-offset', '400']),
      cli(['send', 'application.created', '--url', `http://127.0.0.1:${closed}/webhooks`, '--secret', secret]),
    ]);
    expect(badSecret.code).toBe(1);
    expect(badSecret.stderr).toMatch(/^401 Unauthorized application\.created .*no_valid_signature/);
    expect(stale.code).toBe(1);
    expect(stale.stderr).toMatch(/^401 .*timestamp_out_of_tolerance/);
    expect(future.code).toBe(1);
    expect(future.stderr).toMatch(/timestamp_out_of_tolerance/);
    expect(down.code).toBe(1);
    expect(down.stderr).toContain(`no answer from http://127.0.0.1:${closed}/webhooks (ECONNREFUSED)`);
    expect(events().length).toBe(before);
  });

  it('--file sends a hand-written envelope as it is; one without id or event_type is quarantined, and the answer says which is missing', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'send-file-'));
    try {
      const file = join(dir, 'e.json');
      writeFileSync(file, JSON.stringify({ payload: {} }));
      const r = await cli(['send', '--file', file, '--url', url, '--secret', secret]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toMatch(/^200 OK \(no event_type\) \(no id\) \(msg_[^)]+\): \{"outcome":"quarantined"/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('an answer that breaks off after its headers fails that request, named, and the repeats after it are still sent', async () => {
    const cutOff = await answerCutOff('{"outcome":');
    const to = `${cutOff.origin}/webhooks`;
    try {
      const r = await cli(['send', 'application.created', '--url', to, '--repeat', '2'], { WEBHOOK_SECRET: secret });
      expect(r.code).toBe(1);
      expect(r.stdout).toBe('');
      const lines = r.stderr.trim().split('\n');
      expect(lines).toHaveLength(2);
      for (const l of lines) expect(l).toMatch(new RegExp(`^send: application\\.created \\S+ \\(msg_\\w+\\): the answer from ${to} broke off \\(200 OK, UND_ERR_SOCKET\\)$`));
      expect(cutOff.requests).toHaveLength(2);
    } finally {
      cutOff.close();
    }
  });

  it('--application or --external-id with a --file whose payload is no object is bad usage, not dropped without a word', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'send-file-'));
    try {
      const runs = await Promise.all(
        [{ id: 'evt-cli-nopayload' }, { id: 'evt-cli-strpayload', payload: 'x' }, { id: 'evt-cli-strapp', payload: { application: 'x' } }].map((envelope, i) => {
          const file = join(dir, `${i}.json`);
          writeFileSync(file, JSON.stringify({ event_type: 'application.created', ...envelope }));
          return cli(['send', '--file', file, '--url', url, i === 2 ? '--external-id' : '--application', 'app-given'], { WEBHOOK_SECRET: secret });
        }),
      );
      for (const r of runs) {
        expect(r.code, r.stdout).toBe(2);
        expect(r.stdout).toBe('');
        expect(r.stderr).toMatch(/^error: --application and --external-id set payload\.application \(or the payload itself when it has none\): \S+'s payload(\.application)? is not a JSON object \(--set sets any field\)\n$/);
      }
      expect(events().filter((e) => ['evt-cli-nopayload', 'evt-cli-strpayload', 'evt-cli-strapp'].includes(e.id))).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('says where a --file is not valid JSON without quoting it, and refuses a --url with credentials before sending', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'send-file-'));
    try {
      const file = join(dir, 'bad.json');
      writeFileSync(file, '{"candidate":{"email":jane.doe@example.com}}');
      const bad = await cli(['send', '--file', file, '--url', url, '--secret', secret]);
      expect(bad.code).toBe(1);
      expect(bad.stderr).toBe(`error: ${file} is not valid JSON (at line 1, column 23)\n`);
      const withUser = await cli(['send', 'application.created', '--secret', secret, '--url', url.replace('http://', 'http://admin:s3cretPass@')]);
      expect(withUser.code).toBe(2);
      expect(withUser.stderr).toMatch(/^error: --url must not carry a user name or password/);
      expect(withUser.stderr).not.toContain('s3cretPass');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('without a secret, says to set WEBHOOK_SECRET rather than to put one in the command line', async () => {
    const r = await cli(['send', 'application.created', '--url', url]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^error: no signing secret: set WEBHOOK_SECRET \(a --secret is readable in ps by every user of the machine\)/);
  });
});
