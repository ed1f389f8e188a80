import { appendFileSync, createWriteStream, existsSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { brotliCompressSync, createGzip, gunzipSync, gzipSync } from 'node:zlib';
import Database from 'better-sqlite3';
import { describe, expect, it, onTestFinished } from 'vitest';
import { acquireWorkersLock } from '../../src/db/workersLock.js';
import { freePort, idleReceiverEnv, openFiles, ROOT, runTs, TSX, waitForHttp } from '../helpers/childServer.js';
import { startPair } from '../helpers/pair.js';
import { tempDir } from '../helpers/receiver.js';
import { postSigned } from '../helpers/signing.js';
import { cli, until } from './helpers.js';

// `hiring-receiver erase` on a database the receiver wrote (sandbox and receiver sharing a manual
// clock), as the CLI child process an operator runs. It replaces README's manual procedure (five
// steps and ~50 lines of SQL), which a walk showed an operator cannot be expected to follow by
// hand: deleting the rows with secure_delete on left the name, email and phone in pages still in
// use until a VACUUM, a quarantined BLOB body escapes LIKE, a checkpoint held up by a reader
// leaves the data in the file, and the file sink's lines are to be taken out too.

/** The bytes of the database and every file beside it (-wal, -shm, the workers lock). */
function databaseFiles(dir: string): Record<string, string> {
  const files: Record<string, string> = {};
  for (const f of readdirSync(dir).filter((f) => f.startsWith('receiver.db')).sort()) files[f] = readFileSync(join(dir, f)).toString('latin1');
  return files;
}
const databaseBytes = (dir: string) => Object.values(databaseFiles(dir)).join('\n');

const ZELDA = { first_name: 'Zelda', last_name: 'Quixotewick', email: 'Zelda.Quixotewick@example.org', phone_number: '+15550199876' };
const YOLANDA = { first_name: 'Yolanda', last_name: 'Vandersnoot', email: 'yolanda.vandersnoot@example.org', phone_number: '+15550177777' };
const KEEPER = { first_name: 'Bartholomew', last_name: 'Keepme', email: 'bart.keepme@example.org', phone_number: '+15550111111' };
const tracesOf = (who: typeof ZELDA) => (text: string) => [who.last_name, who.email, who.phone_number.slice(2)].filter((t) => text.toLowerCase().includes(t.toLowerCase()));
const zeldaTraces = tracesOf(ZELDA);
const yolandaTraces = tracesOf(YOLANDA);

/** NODE_OPTIONS for a CLI child whose clock (Date.now) reads `at`. */
const clockAt = (at: number) => ({ NODE_OPTIONS: `--import data:text/javascript,${encodeURIComponent(`Date.now = () => ${at};`)}` });

/** A sandbox and a receiver with a file sink (`sinkFile` in `sinkDir`, in CONFIG_FILE `config`), both removed after the test. */
async function pairWithFileSink() {
  const { dir: sinkDir, cleanup } = tempDir('erasure-');
  onTestFinished(cleanup);
  const config = join(sinkDir, 'config.json');
  const sinkFile = join(sinkDir, 'events.ndjson');
  writeFileSync(config, JSON.stringify({ sinks: [{ name: 'archive', type: 'file', path: sinkFile }] }));
  // Two days ago: the service's retry window of every event has passed by the erasure (the CLI's own clock).
  const p = await startPair({ env: { CONFIG_FILE: config }, startAt: Date.now() - 2 * 86_400_000 });
  onTestFinished(() => p.close());
  return { p, sinkDir, sinkFile, config };
}

describe('hiring-receiver erase', () => {
  it('refuses while a step is not done, then leaves none of the candidate in the database files or the file sink, keeps the others, and the receiver runs on', async () => {
    const { p, sinkDir, sinkFile, config } = await pairWithFileSink();
    const c = p.sandbox.control;
    const port = { PORT: new URL(p.receiver.url).port };
    const job = c.createJob({ title: 'Forklift Operator' });
    const z1 = c.createApplication({ jobId: job.id, candidate: ZELDA, externalId: 'ext-z1' });
    const z2 = c.createApplication({ jobId: c.createJob({ title: 'Warehouse Lead' }).id, candidate: ZELDA, externalId: 'ext-z2' });
    const y1 = c.createApplication({ jobId: job.id, candidate: YOLANDA, externalId: 'ext-y1' });
    const keeper = c.createApplication({ jobId: job.id, candidate: KEEPER, externalId: 'ext-k1' });
    for (const id of [z1.id, keeper.id]) {
      c.setApplicationStatus(id, 'screened');
      c.completeInterview(id);
      c.completeCvEvaluation(id);
    }
    c.setApplicationStatus(z2.id, 'screened');
    await p.settle();

    // A signed delivery that could not be parsed, and one reusing a stored event's id with another body.
    const signed = (body: string) => postSigned(p.receiver.url, p.secret, body, { timestampSeconds: Math.floor(p.clock.now() / 1000) });
    expect((await signed(`{"event_type":"application.created","payload":{"candidate":${JSON.stringify(ZELDA)}`)).status).toBe(200);
    const sqlite = p.receiver.app.database.ingestSqlite;
    const created = sqlite.prepare("SELECT envelope FROM events WHERE application_id = ? AND event_type = 'application.created'").get(z1.id) as { envelope: string };
    expect((await signed(JSON.stringify({ ...(JSON.parse(created.envelope) as object), created_at: '2026-01-01T00:00:00.000Z' }))).status).toBe(200);
    expect(sqlite.prepare('SELECT (SELECT COUNT(*) FROM quarantine) + (SELECT COUNT(*) FROM event_conflicts) AS n').get()).toEqual({ n: 2 });

    const dbPath = p.receiver.dbPath;
    const dbDir = join(dbPath, '..');
    const env = { DATABASE_PATH: dbPath, CONFIG_FILE: config };
    const erase = (args: string[], extra: Record<string, string> = {}) => cli(['erase', ...args], { ...env, ...extra });

    // Not deleted at the service yet: refused, nothing erased, each application named.
    await p.receiver.app.stop();
    const notDeleted = await erase(['--email', ZELDA.email, '--json']);
    expect(notDeleted.code, notDeleted.stderr).toBe(1);
    expect(notDeleted.stdout).toBe('');
    expect(notDeleted.stderr).toContain(`error: erase refused, nothing erased: application ${z1.id} is not deleted at the service`);
    expect(notDeleted.stderr).toContain(`application ${z2.id} is not deleted at the service`);
    expect(zeldaTraces(databaseBytes(dbDir))).toHaveLength(3);
    // --deleted-at-service: the operator checked at the service (a redelivery re-created them); a dry run then sees no reason to refuse.
    const checked = await erase(['--email', ZELDA.email, '--deleted-at-service', '--dry-run', '--json']);
    expect(checked.code, checked.stderr).toBe(0);
    expect(JSON.parse(checked.stdout)).toMatchObject({ dry_run: true, applications: [z1.id, z2.id].sort(), refused: [] });

    await p.restartReceiver(port);
    c.deleteApplication(z1.id);
    c.deleteApplication(z2.id);
    c.deleteApplication(y1.id);
    await p.settle();
    await p.receiver.app.fanOut.runUntilIdle();
    // An event stored and not processed yet (the workers run only when the test says).
    c.setApplicationStatus(keeper.id, 'interviewed');
    await p.sandbox.control.idle();
    await p.receiver.app.stop();
    const notCaughtUp = await erase(['--email', ZELDA.email]);
    expect(notCaughtUp.code).toBe(1);
    expect(notCaughtUp.stderr).toContain('error: erase refused, nothing erased: processing is not caught up');
    await p.restartReceiver(port);
    await p.settle();
    await p.receiver.app.fanOut.runUntilIdle();
    const lastStored = p.clock.now();
    await p.receiver.app.stop();

    // Within the service's retry window by the CLI's clock: refused, the end of the window named.
    const inWindow = await erase(['--email', ZELDA.email], clockAt(lastStored + 3_600_000));
    expect(inWindow.code).toBe(1);
    expect(inWindow.stderr).toMatch(/error: erase refused, nothing erased: the last of its events was stored at \S+: the service may deliver it again .* until \S+Z/);
    // A process running the workers: refused.
    const workers = acquireWorkersLock(dbPath);
    const locked = await erase(['--email', ZELDA.email]).finally(() => workers.release());
    expect(locked.code).toBe(1);
    expect(locked.stderr).toContain('error: erase refused, nothing erased: another process is already running the workers of');
    // No such candidate, no such application id: refused.
    const nobody = await erase(['--email', 'nobody@example.org', '--application', 'no-such-app']);
    expect(nobody.code).toBe(1);
    expect(nobody.stderr).toContain('no application has id "no-such-app"');
    expect(nobody.stderr).toContain('no application has the candidate email given');
    expect((await erase([])).code).toBe(2);

    // --dry-run: what would go, and not one byte changed.
    const sinkBefore = readFileSync(sinkFile, 'utf8');
    // Copies log rotation left beside it: a plain one is rewritten too; a bzip2 one, which erase cannot rewrite, is a reason to refuse.
    writeFileSync(`${sinkFile}.1`, sinkBefore, { mode: 0o640 });
    writeFileSync(`${sinkFile}.2.bz2`, 'BZh9');
    const fileBefore = readFileSync(dbPath);
    const dry = await erase(['--email', ZELDA.email.toUpperCase(), '--dry-run', '--json']);
    expect(dry.code, dry.stderr).toBe(1);
    const plan = JSON.parse(dry.stdout) as {
      applications: string[];
      rows: Record<string, number>;
      file_sinks: { lines: number; rotated: { path: string; lines: number }[]; not_touched: string[] }[];
      refused: string[];
    };
    expect(plan.applications).toEqual([z1.id, z2.id].sort());
    expect(plan.rows).toMatchObject({ applications: 2, interview_results: 1, cv_evaluation_results: 1, event_conflicts: 1, quarantine: 1 });
    expect(plan.rows['events']).toBeGreaterThan(4);
    expect(plan.file_sinks[0]!.lines).toBeGreaterThan(4);
    expect(plan.file_sinks[0]!.rotated).toEqual([{ path: `${sinkFile}.1`, lines: plan.file_sinks[0]!.lines }]);
    expect(plan.file_sinks[0]!.not_touched).toEqual([`${sinkFile}.2.bz2`]);
    expect(plan.refused).toEqual([expect.stringContaining(`file sink archive: the rotated copy ${sinkFile}.2.bz2 is compressed in a format this command does not rewrite`)]);
    // As the line says: the copy decompressed (here: the same lines, plain).
    rmSync(`${sinkFile}.2.bz2`);
    writeFileSync(`${sinkFile}.2`, sinkBefore);
    // The database file byte for byte (a read-only open may leave an empty -wal and its -shm beside it, as `status` does).
    expect(readFileSync(dbPath).equals(fileBefore)).toBe(true);
    expect(databaseFiles(dbDir)['receiver.db-wal'] ?? '').toBe('');
    expect(readFileSync(sinkFile, 'utf8')).toBe(sinkBefore);
    expect(zeldaTraces(dry.stdout + dry.stderr)).toEqual([]);

    // A reader holding a snapshot: refused before anything is erased. `--finish` (which does not
    // check first) is held up by it: an error that says so and how to finish.
    const reader = new Database(dbPath, { readonly: true });
    reader.exec('BEGIN');
    reader.prepare('SELECT COUNT(*) FROM events').get();
    const heldUp = await erase(['--email', ZELDA.email]);
    const finishHeldUp = await erase(['--finish']);
    reader.exec('COMMIT');
    reader.close();
    expect(heldUp.code).toBe(1);
    expect(heldUp.stderr).toContain('error: erase refused, nothing erased: another process has the database open');
    expect(zeldaTraces(databaseBytes(dbDir))).toHaveLength(3);
    expect(finishHeldUp.code).toBe(1);
    expect(finishHeldUp.stderr).toMatch(/error: the checkpoint answered [\d|]+, not 0\|0\|0: another process .* holds the database open, .* run `hiring-receiver erase --finish`/);
    const erased = await erase(['--email', ZELDA.email]);
    expect(erased.code, erased.stderr).toBe(0);
    expect(erased.stdout).toContain(`erased 2 applications: ${[z1.id, z2.id].sort().join(', ')}`);
    expect(erased.stdout).toContain('(checkpoint 0|0|0)');
    expect(zeldaTraces(databaseBytes(dbDir))).toEqual([]);
    const sinkAfter = readFileSync(sinkFile, 'utf8');
    expect(zeldaTraces(sinkAfter)).toEqual([]);
    expect(sinkAfter).toContain(KEEPER.last_name);
    expect(statSync(sinkFile).mode & 0o777).toBe(0o600);
    expect(readFileSync(`${sinkFile}.1`, 'utf8')).toBe(sinkAfter);
    expect(readFileSync(`${sinkFile}.2`, 'utf8')).toBe(sinkAfter);
    expect(statSync(`${sinkFile}.1`).mode & 0o777).toBe(0o640);
    expect(readdirSync(sinkDir).sort()).toEqual(['config.json', 'events.ndjson', 'events.ndjson.1', 'events.ndjson.2']);

    // A candidate selected by application id alone (no email given): erased in one run, exit 0.
    expect(yolandaTraces(databaseBytes(dbDir))).toHaveLength(3);
    const byId = await erase(['--application', y1.id]);
    expect(byId.code, byId.stderr).toBe(0);
    expect(byId.stdout).toContain(`erased 1 application: ${y1.id}`);
    expect(byId.stdout).toContain('database compacted (VACUUM) and its WAL truncated (checkpoint 0|0|0)');
    expect(byId.stdout).toMatch(/^not reached: backups and Litestream replicas/m);
    expect(byId.stdout).toMatch(new RegExp(`rotated copy ${sinkFile}\\.2: [1-9]\\d* lines? taken out`));
    expect(yolandaTraces(byId.stdout + byId.stderr)).toEqual([]);
    expect(yolandaTraces(databaseBytes(dbDir))).toEqual([]);
    expect(yolandaTraces(readFileSync(sinkFile, 'utf8'))).toEqual([]);
    // Done once: a second run finds nothing to erase.
    expect((await erase(['--email', ZELDA.email])).stderr).toContain('no application has the candidate email given');

    // The receiver runs on: the other candidate's application is whole, and folds its next event.
    await p.restartReceiver(port);
    c.setApplicationStatus(keeper.id, 'hired');
    await p.settle();
    await p.receiver.app.fanOut.runUntilIdle();
    const rows = p.receiver.app.database.ingestSqlite.prepare('SELECT id, status, candidate_email FROM applications ORDER BY id').all();
    expect(rows).toEqual([{ id: keeper.id, status: 'hired', candidate_email: KEEPER.email }]);
    const results = p.receiver.app.database.ingestSqlite
      .prepare("SELECT (SELECT COUNT(*) FROM interview_results WHERE state = 'ready') AS interviews, (SELECT COUNT(*) FROM events WHERE application_id <> ?) AS others")
      .get(keeper.id);
    expect(results).toEqual({ interviews: 1, others: 0 });
    expect(readFileSync(sinkFile, 'utf8').split('\n').filter((l) => l.includes('"hired"'))).toHaveLength(1);
  }, 120_000);
});

/**
 * A receiver's database with each of `candidates`' applications made, deleted at the service and
 * processed two days ago (every refusal cleared), its file sink's file beside it; the receiver
 * stopped. `erase` runs the CLI child on it.
 */
async function erasable(candidates: (typeof ZELDA)[], meanwhile?: (p: Awaited<ReturnType<typeof startPair>>) => Promise<void>) {
  const { p, sinkDir, sinkFile, config } = await pairWithFileSink();
  const c = p.sandbox.control;
  const job = c.createJob({ title: 'Forklift Operator' });
  const apps = candidates.map((candidate, i) => c.createApplication({ jobId: job.id, candidate, externalId: `ext-${i}` }));
  for (const a of apps) c.deleteApplication(a.id);
  await p.settle();
  await meanwhile?.(p);
  await p.receiver.app.fanOut.runUntilIdle();
  await p.receiver.app.stop();
  const dbPath = p.receiver.dbPath;
  const env = { DATABASE_PATH: dbPath, CONFIG_FILE: config };
  return { p, apps, dbPath, dbDir: join(dbPath, '..'), sinkDir, sinkFile, env, erase: (args: string[]) => cli(['erase', ...args], env) };
}

describe('hiring-receiver erase: what a person means by the address, other processes, signals, compressed copies', () => {
  it('takes a stored address with non-ASCII capitals or an ASCII domain for the one typed, and leaves a different address alone', async () => {
    const JOSE = { ...ZELDA, last_name: 'Núñezquixote', email: 'JOSÉ.NÚÑEZ@XN--BCHER-KVA.EXAMPLE' };
    const OTHER = { ...KEEPER, email: 'jose.nunez@bucher.example' };
    const { apps, dbDir, sinkFile, erase } = await erasable([JOSE, OTHER]);
    const jose = tracesOf(JOSE);
    expect(jose(databaseBytes(dbDir)).length).toBeGreaterThan(0);
    // SQLite's lower() folded A-Z only: `josÉ.nÚÑez@…` was not the address typed, and erase refused as if none had it.
    const r = await erase(['--email', 'josé.núñez@bücher.example', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const result = JSON.parse(r.stdout) as { applications: string[]; file_sinks: { lines: number }[] };
    expect(result.applications).toEqual([apps[0]!.id]);
    expect(result.file_sinks[0]!.lines).toBeGreaterThan(0);
    expect(jose(databaseBytes(dbDir))).toEqual([]);
    expect(jose(readFileSync(sinkFile, 'utf8'))).toEqual([]);
    expect(readFileSync(sinkFile, 'utf8')).toContain(OTHER.email);
    expect(tracesOf(OTHER)(databaseBytes(dbDir))).toHaveLength(3);
  }, 60_000);

  it('takes out a quarantined body that spells the domain as typed on a Japanese keyboard (fullwidth letters, an ideographic full stop)', async () => {
    const TARO = { first_name: 'Tarō', last_name: 'Yamadazawa', email: 'Tarō.Yamada@ｅｘａｍｐｌｅ。jp', phone_number: '+15550122222' };
    // A signed delivery that could not be parsed: quarantined, named by the address alone (no id in it).
    const { apps, dbDir, erase } = await erasable([TARO, KEEPER], async (p) => {
      const body = `{"event_type":"application.created","payload":{"candidate":${JSON.stringify(TARO)}`;
      expect((await postSigned(p.receiver.url, p.secret, body, { timestampSeconds: Math.floor(p.clock.now() / 1000) })).status).toBe(200);
    });
    const taro = tracesOf(TARO);
    const quarantined = () => {
      const db = new Database(join(dbDir, 'receiver.db'), { readonly: true });
      try {
        return db.prepare('SELECT COUNT(*) FROM quarantine').pluck().get();
      } finally {
        db.close();
      }
    };
    expect(quarantined()).toBe(1);
    // The row's address compared as a domain (`example.jp`) and the texts' as text: the row went, the
    // body stayed, exit 0. The address as a person types it, then as it was stored.
    for (const typed of ['tarō.yamada@example.jp', TARO.email]) {
      const dry = await erase(['--email', typed, '--dry-run', '--json']);
      expect(dry.code, dry.stderr).toBe(0);
      expect(JSON.parse(dry.stdout)).toMatchObject({ applications: [apps[0]!.id], rows: { applications: 1, quarantine: 1 } });
    }
    const r = await erase(['--email', 'tarō.yamada@example.jp', '--json']);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ applications: [apps[0]!.id], rows: { applications: 1, quarantine: 1 } });
    expect(quarantined()).toBe(0);
    expect(taro(databaseBytes(dbDir))).toEqual([]);
    expect(tracesOf(KEEPER)(databaseBytes(dbDir))).toHaveLength(3);
  }, 60_000);

  it('refuses while an ingest-only serve (no workers lock) has the database open, erasing nothing', async () => {
    const { dbPath, dbDir, erase } = await erasable([ZELDA]);
    const port = await freePort();
    const serve = runTs('src/cli/main.ts', ['serve'], idleReceiverEnv(dbPath, 'whsec_dGVzdHNlY3JldHRlc3RzZWNyZXR0ZXN0c2VjcmV0', { PORT: String(port), LOG_LEVEL: 'warn' }));
    onTestFinished(async () => {
      serve.proc.kill('SIGTERM');
      await serve.exited;
    });
    await waitForHttp(`http://127.0.0.1:${port}/healthz`, undefined, serve);
    const r = await erase(['--email', ZELDA.email]);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain('error: erase refused, nothing erased: another process has the database open (a `serve`, also one with WORKER_CONCURRENCY=0');
    expect(zeldaTraces(databaseBytes(dbDir))).toHaveLength(3);
    serve.proc.kill('SIGTERM');
    expect((await serve.exited).code).toBe(0);
    const after = await erase(['--email', ZELDA.email]);
    expect(after.code, after.stderr).toBe(0);
    expect(zeldaTraces(databaseBytes(dbDir))).toEqual([]);
  }, 60_000);

  it('--dry-run beside a serve that runs the workers names the refusal the erasure would meet, and takes no lock from it', async () => {
    const { dbPath, dbDir, env, erase } = await erasable([ZELDA]);
    const port = await freePort();
    const serve = runTs('src/cli/main.ts', ['serve'], idleReceiverEnv(dbPath, 'whsec_dGVzdHNlY3JldHRlc3RzZWNyZXR0ZXN0c2VjcmV0', { ...env, PORT: String(port), WORKER_CONCURRENCY: '1', LOG_LEVEL: 'warn' }));
    onTestFinished(async () => {
      serve.proc.kill('SIGTERM');
      await serve.exited;
    });
    await waitForHttp(`http://127.0.0.1:${port}/healthz`, undefined, serve);
    // It said `refused: []` and exit 0 here, while the erasure itself was refused.
    const dry = await erase(['--email', ZELDA.email, '--dry-run', '--json']);
    expect(dry.code, dry.stderr).toBe(1);
    const refusal = 'another process is already running the workers of';
    expect((JSON.parse(dry.stdout) as { refused: string[] }).refused).toEqual([expect.stringContaining(refusal)]);
    expect(dry.stderr).toContain(`error: erase would be refused: ${refusal}`);
    const real = await erase(['--email', ZELDA.email]);
    expect(real.code).toBe(1);
    expect(real.stderr).toContain(`error: erase refused, nothing erased: ${refusal}`);
    expect(zeldaTraces(databaseBytes(dbDir))).toHaveLength(3);
    // The serve still answers (its lock was never taken from it); stopped, the dry run sees nothing to refuse.
    expect((await fetch(`http://127.0.0.1:${port}/readyz`)).status).toBe(200);
    serve.proc.kill('SIGTERM');
    expect((await serve.exited).code).toBe(0);
    const after = await erase(['--email', ZELDA.email, '--dry-run', '--json']);
    expect(after.code, after.stderr).toBe(0);
    expect((JSON.parse(after.stdout) as { refused: string[] }).refused).toEqual([]);
  }, 60_000);

  it('Ctrl-C or SIGTERM while a file sink\'s file is rewritten: its temporary copy removed, the file unchanged, nothing erased, exit 130 or 143', async () => {
    const { dbPath, dbDir, sinkDir, sinkFile, env } = await erasable([ZELDA, KEEPER]);
    // Other candidates' lines after the candidate's: about 64 MB, 64 reads of 1 MiB, each a turn where the signal is taken.
    appendFileSync(sinkFile, `${JSON.stringify({ event: 'filler', pad: 'k'.repeat(1000) })}\n`.repeat(64_000));
    const before = readFileSync(sinkFile);
    for (const [signal, status] of [['SIGINT', 130], ['SIGTERM', 143]] as const) {
      const child = runTs('src/cli/main.ts', ['erase', '--email', ZELDA.email], env);
      const temp = join(sinkDir, `.events.ndjson.rewrite-${child.proc.pid}`);
      await until(() => existsSync(temp), 'the temporary copy of the sink file', 20_000);
      child.proc.kill(signal);
      const { code } = await child.exited;
      const stderr = child.stderr.join('');
      expect(code, stderr).toBe(status);
      expect(stderr).toContain(`erase: stopped by ${signal} while taking the candidate's lines out of ${sinkFile}: stopped there, its temporary copy removed and ${sinkFile} left unchanged; nothing erased from the database`);
      expect(readdirSync(sinkDir).sort()).toEqual(['config.json', 'events.ndjson']);
      expect(readFileSync(sinkFile).equals(before)).toBe(true);
      expect(zeldaTraces(databaseBytes(dbDir))).toHaveLength(3);
      expect(existsSync(`${dbPath}-wal`) ? statSync(`${dbPath}-wal`).size : 0).toBe(0);
    }
    // Run again to its end: the erasure done.
    const again = await cli(['erase', '--email', ZELDA.email], env);
    expect(again.code, again.stderr).toBe(0);
    expect(zeldaTraces(readFileSync(sinkFile, 'utf8'))).toEqual([]);
    expect(readdirSync(sinkDir).sort()).toEqual(['config.json', 'events.ndjson']);
  }, 60_000);

  it('erase --finish: Ctrl-C or SIGTERM ends it at once by that signal, not once its VACUUM is done (nothing to rewrite there)', async () => {
    const { dir, cleanup } = tempDir('erase-finish-');
    onTestFinished(cleanup);
    const dbPath = join(dir, 'receiver.db');
    expect((await cli(['migrate'], { DATABASE_PATH: dbPath })).code).toBe(0);
    // Another connection holds the write lock: the VACUUM waits for it inside SQLite (its busy
    // timeout, 5 s), where no signal handler runs. With one installed, the signal was taken only
    // after that wait: the command went on (here to its SQLITE_BUSY, exit 1; on a large file
    // through its whole VACUUM, exit 0), and said nothing of the signal.
    const w = new Database(dbPath);
    onTestFinished(() => {
      if (w.inTransaction) w.exec('ROLLBACK');
      w.close();
    });
    w.exec('BEGIN IMMEDIATE');
    for (const signal of ['SIGINT', 'SIGTERM'] as const) {
      const child = runTs('src/cli/main.ts', ['erase', '--finish'], { DATABASE_PATH: dbPath });
      const killer = setTimeout(() => child.proc.kill('SIGKILL'), 20_000);
      // The database open: the command is past the point where its handlers were installed, at its VACUUM.
      await until(() => openFiles(child.proc.pid!).includes(dbPath), 'the command to open the database', 15_000);
      child.proc.kill(signal);
      const ended = await child.exited;
      clearTimeout(killer);
      expect({ ...ended, stderr: child.stderr.join('') }).toEqual({ code: null, signal, stderr: '' });
    }
  }, 60_000);

  it('leaves the sink file whole when the rewrite cannot write all of it (a write cut short at the file size limit)', async () => {
    const { dbDir, sinkFile, env } = await erasable([ZELDA, KEEPER]);
    const own = statSync(sinkFile).size;
    expect(own).toBeLessThan(64 * 1024);
    // The candidate's lines first, then 4.5 MiB of other candidates': the last write is about 0.5 MiB long.
    appendFileSync(sinkFile, `${JSON.stringify({ event: 'filler', pad: 'k'.repeat(1000) })}\n`.repeat(4700));
    const before = readFileSync(sinkFile);
    // A file size limit (RLIMIT_FSIZE; a quota or a full disk answer alike) inside that last write:
    // write(2) writes what fits and returns that count, no error; the rest of the buffer was dropped.
    const limit = before.length - 64 * 1024;
    const child = spawn('prlimit', [`--fsize=${limit}`, '--', process.execPath, '--import', TSX, `${ROOT}src/cli/main.ts`, 'erase', '--email', ZELDA.email], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect(code, stderr).toBe(1);
    expect(stderr).toContain(`error: file sink archive: cannot take the candidate's lines out of ${sinkFile}`);
    expect(readFileSync(sinkFile).equals(before)).toBe(true);
    expect(zeldaTraces(databaseBytes(dbDir))).toHaveLength(3);
  }, 60_000);

  it('knows a rotated copy\'s compression by its bytes: a gzipped one not named .gz is rewritten, a brotli one refused, a cut one named in the error', async () => {
    const { dbDir, sinkFile, erase } = await erasable([ZELDA, KEEPER]);
    const lines = readFileSync(sinkFile);
    // Named by their suffix only, both were read as plain text: "0 lines taken out", exit 0, the candidate's lines kept.
    writeFileSync(`${sinkFile}.1.GZ`, gzipSync(lines));
    writeFileSync(`${sinkFile}.2.br`, brotliCompressSync(lines));
    const refused = await erase(['--email', ZELDA.email]);
    expect(refused.code, refused.stderr).toBe(1);
    expect(refused.stderr).toContain(`error: erase refused, nothing erased: file sink archive: the rotated copy ${sinkFile}.2.br is compressed in a format this command does not rewrite`);
    expect(refused.stderr).not.toContain('.1.GZ');
    expect(zeldaTraces(databaseBytes(dbDir))).toHaveLength(3);
    rmSync(`${sinkFile}.2.br`);
    const r = await erase(['--email', ZELDA.email, '--json']);
    expect(r.code, r.stderr).toBe(0);
    const result = JSON.parse(r.stdout) as { file_sinks: { lines: number; rotated: { path: string; lines: number }[] }[] };
    expect(result.file_sinks[0]!.lines).toBeGreaterThan(0);
    expect(result.file_sinks[0]!.rotated).toEqual([{ path: `${sinkFile}.1.GZ`, lines: result.file_sinks[0]!.lines }]);
    const copy = gunzipSync(readFileSync(`${sinkFile}.1.GZ`)).toString();
    expect(copy).toBe(readFileSync(sinkFile, 'utf8'));
    expect(zeldaTraces(copy)).toEqual([]);
    expect(copy).toContain(KEEPER.email);
    // A gzipped copy cut short (a crash while logrotate compressed it): the error names that copy, the database not erased.
    writeFileSync(`${sinkFile}.3.gz`, gzipSync(lines).subarray(0, 40));
    const corrupt = await erase(['--email', KEEPER.email]);
    expect(corrupt.code, corrupt.stderr).toBe(1);
    expect(corrupt.stderr).toContain(`error: file sink archive: cannot take the candidate's lines out of ${sinkFile}.3.gz: unexpected end of file`);
    expect(tracesOf(KEEPER)(databaseBytes(dbDir))).toHaveLength(3);
    // A rotated copy that cannot be read at all (a symlink to nothing): its sink is named, as for a rewrite that fails.
    rmSync(`${sinkFile}.3.gz`);
    symlinkSync(join(dbDir, 'gone'), `${sinkFile}.4`);
    const dangling = await erase(['--email', KEEPER.email]);
    expect(dangling.code, dangling.stderr).toBe(1);
    expect(dangling.stderr).toContain(`error: file sink archive: cannot read the rotated copies of ${sinkFile}: ENOENT`);
    expect(tracesOf(KEEPER)(databaseBytes(dbDir))).toHaveLength(3);
  }, 60_000);

  it('streams a gzipped rotated copy (memory does not grow with it), and refuses while a bzip2 one may hold the candidate', async () => {
    const { dbDir, sinkFile, erase, env } = await erasable([ZELDA, KEEPER]);
    const lines = readFileSync(sinkFile, 'utf8');
    const filler = `${JSON.stringify({ event: 'filler', pad: 'k'.repeat(1000) })}\n`;
    // 200 MB of other candidates' lines, the candidate's among them: read whole, the copy took 700 MB.
    const gz = `${sinkFile}.1.gz`;
    await pipeline(
      async function* () {
        yield lines;
        for (let i = 0; i < 200; i++) yield filler.repeat(1000);
        yield lines;
      },
      createGzip({ level: 1 }),
      createWriteStream(gz),
    );
    writeFileSync(`${sinkFile}.2.bz2`, 'BZh9');
    const refused = await erase(['--email', ZELDA.email]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`error: erase refused, nothing erased: file sink archive: the rotated copy ${sinkFile}.2.bz2 is compressed in a format this command does not rewrite (only gzip), and may hold the candidate's lines: decompress it`);
    expect(zeldaTraces(databaseBytes(dbDir))).toHaveLength(3);
    rmSync(`${sinkFile}.2.bz2`);
    // The child's peak resident memory, said on stderr at its exit.
    const rss = `process.on('exit', () => process.stderr.write('maxrss ' + process.resourceUsage().maxRSS + '\\n'));`;
    const r = await cli(['erase', '--email', ZELDA.email, '--json'], { ...env, NODE_OPTIONS: `--import data:text/javascript,${encodeURIComponent(rss)}` }, 50_000);
    expect(r.code, r.stderr).toBe(0);
    const result = JSON.parse(r.stdout) as { file_sinks: { lines: number; rotated: { path: string; lines: number }[] }[] };
    expect(result.file_sinks[0]!.rotated).toEqual([{ path: gz, lines: 2 * result.file_sinks[0]!.lines }]);
    const maxRssMb = Number(/maxrss (\d+)/.exec(r.stderr)![1]) / 1024;
    expect(maxRssMb).toBeLessThan(200);
    const after = readFileSync(sinkFile, 'utf8');
    expect(zeldaTraces(after)).toEqual([]);
    expect(gunzipSync(readFileSync(gz)).toString() === after + filler.repeat(200_000) + after).toBe(true);
  }, 90_000);
});
