import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { jobSeeder } from '../helpers/jobs.js';
import { tempDir } from '../helpers/receiver.js';
import { cli, withMigratedDatabase } from './helpers.js';

const { dir, cleanup } = tempDir('cli-stored-errors-');
afterAll(cleanup);

// Errors are redacted before they are stored now, but a database written by an earlier version
// (before redactCredentials, or by the one that cut the service's text before redacting it) still
// holds keys in last_error. The commands that show last_error (an operator pastes their output
// into a ticket or a CI log) take them out when they print.
const KEY = 'sk-live7.Q2hhbmdlTWVPbGRLZXk0Mg';
const SECRET = 'whsec_c2VjcmV0LWZyb20tYW4tb2xkLWxvZw==';
const TOKEN = 'Bearer eyJhbGciOiJIUzI1NiJ9x42';

describe('last_error rows stored by an earlier version, as the CLI shows them', { timeout: 60_000 }, () => {
  it('dead-letters list, status (its paused sources too) and sinks list print no credential, in tables or --json', async () => {
    await withMigratedDatabase(join(dir, 'old-errors.db'), async (path, w) => {
      const at = '2026-11-20T10:00:00.000Z';
      const job = jobSeeder(w);
      w.transaction(() => {
        job({ kind: 'fetch_result', event_id: 'evt-dead', state: 'dead', run_at: at, attempts: 25, finished_at: at, last_error: `HTTP 401: key ${KEY} was revoked` });
        job({ kind: 'fetch_result', event_id: 'evt-failing', state: 'pending', run_at: at, attempts: 3, last_error: `HTTP 500: upstream said ${TOKEN} and ${SECRET}` });
        w.prepare(
          `INSERT INTO deliveries (event_id, sink, message_id, state, attempts, last_status_code, last_error, last_attempt_at, queued_at, created_at, updated_at)
           VALUES ('evt-dead', 'crm', 'msg_1', 'dead', 25, 500, ?, ?, ?, ?, ?)`,
        ).run(`HTTP 500: proxy echoed ${TOKEN}`, at, at, at, at);
        // A pause keeps the message of the read that paused it, as last_error does.
        w.prepare(`INSERT INTO source_pauses (source, paused_at, status, detail, probe_after) VALUES ('acme', ?, 401, ?, ?)`).run(at, `HTTP 401: key ${KEY} was revoked`, at);
      })();
      const env = { DATABASE_PATH: path };
      const runs = await Promise.all([
        cli(['dead-letters', 'list', '--json'], env),
        cli(['dead-letters', 'list'], env),
        cli(['status', '--json'], env),
        cli(['status'], env),
        cli(['sinks', 'list', '--json'], env),
        cli(['sinks', 'list'], env),
      ]);
      for (const r of runs) {
        expect(r.code, r.stderr).toBe(0);
        for (const credential of [KEY, SECRET, 'eyJhbGciOiJIUzI1NiJ9x42', 'Q2hhbmdlTWVPbGRLZXk0Mg']) expect(r.stdout + r.stderr).not.toContain(credential);
      }
      // What is around the credential is still shown.
      const [deadJson, , statusJson, statusText, sinksJson] = runs;
      expect((JSON.parse(deadJson!.stdout) as { last_error: string }[]).map((r) => r.last_error)).toEqual(['HTTP 401: key [redacted] was revoked']);
      const status = JSON.parse(statusJson!.stdout) as { result_reads: { latest_failure: { last_error: string } }; oldest_pending_job: { last_error: string }; paused_sources: { detail: string }[] };
      expect(status.paused_sources.map((p) => p.detail)).toEqual(['HTTP 401: key [redacted] was revoked']);
      expect(statusText!.stdout).toContain('acme: HTTP 401 since 2026-11-20T10:00:00.000Z (HTTP 401: key [redacted] was revoked)');
      expect(status.result_reads.latest_failure.last_error).toBe('HTTP 500: upstream said Bearer [redacted] and [redacted]');
      expect(status.oldest_pending_job.last_error).toBe('HTTP 500: upstream said Bearer [redacted] and [redacted]');
      expect(statusText!.stdout).toContain('upstream said Bearer [redacted] and [redacted]');
      expect((JSON.parse(sinksJson!.stdout) as { name: string; last_error: { error: string } | null }[]).find((s) => s.name === 'crm')?.last_error?.error).toBe('HTTP 500: proxy echoed Bearer [redacted]');
    });
  });
});
