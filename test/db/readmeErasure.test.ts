import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it, onTestFinished } from 'vitest';
import { ROOT } from '../helpers/childServer.js';
import { startPair } from '../helpers/pair.js';
import { tempDir } from '../helpers/receiver.js';
import { postSigned } from '../helpers/signing.js';

// README, "Personal data and erasure": its statements and its file sink command, run as given on
// a database the receiver wrote. Written from a walk of the earlier text, which named the tables
// and `PRAGMA secure_delete` but no statement: deleting every row of the candidate with it left
// the name, email and phone readable in pages still in use (copies left by each rebuild of the
// application), and a quarantined body, a BLOB, was not matched by LIKE in Debian's sqlite3.

const README = readFileSync(join(ROOT, 'README.md'), 'utf8');
const SECTION = README.slice(README.indexOf('**Personal data and erasure.**'));

/** The SQL block of the section, for the candidate's address; the sqlite3 shell's dot-commands left out. */
function erasureStatements(address: string): string {
  const block = /```sql\n([\s\S]*?)```/.exec(SECTION)![1]!;
  return block
    .split('\n')
    .filter((line) => !line.startsWith('.'))
    .join('\n')
    .replaceAll('jane.doe@example.com', address);
}

/** Runs the statements on the file as a separate connection would; an error rolls back what it began. */
function runErasure(path: string, address: string): void {
  const db = new Database(path);
  try {
    db.exec(erasureStatements(address));
  } finally {
    db.close();
  }
}

/** The bytes of the database and every file beside it that SQLite keeps (-wal, -shm). */
function databaseBytes(dir: string): string {
  return readdirSync(dir)
    .filter((f) => f.startsWith('receiver.db'))
    .map((f) => readFileSync(join(dir, f)).toString('latin1'))
    .join('\n');
}

const ZELDA = { first_name: 'Zelda', last_name: 'Quixotewick', email: 'Zelda.Quixotewick@example.org', phone_number: '+15550199876' };
const KEEPER = { first_name: 'Bartholomew', last_name: 'Keepme', email: 'bart.keepme@example.org', phone_number: '+15550111111' };
const zeldaTraces = (text: string) => ['Quixotewick', 'zelda.quixotewick@example.org', '5550199876'].filter((t) => text.toLowerCase().includes(t.toLowerCase()));

describe("the README's erasure of one candidate", () => {
  it('leaves none of the candidate in the database file or the file sink, keeps the others, and the receiver runs on', async () => {
    const { dir: sinkDir, cleanup } = tempDir('erasure-');
    onTestFinished(cleanup);
    const config = join(sinkDir, 'config.json');
    writeFileSync(config, JSON.stringify({ sinks: [{ name: 'archive', type: 'file', path: join(sinkDir, 'events.ndjson') }] }));
    // Two days ago: the service's retry window of every event has passed by the erasure.
    const p = await startPair({ env: { CONFIG_FILE: config }, startAt: Date.now() - 2 * 86_400_000 });
    onTestFinished(() => p.close());
    const c = p.sandbox.control;
    // The port the sandbox delivers to, kept across restarts.
    const port = { PORT: new URL(p.receiver.url).port };
    const job = c.createJob({ title: 'Forklift Operator' });
    const z1 = c.createApplication({ jobId: job.id, candidate: ZELDA, externalId: 'ext-z1' });
    const z2 = c.createApplication({ jobId: c.createJob({ title: 'Warehouse Lead' }).id, candidate: ZELDA, externalId: 'ext-z2' });
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
    const conflicting = JSON.parse(created.envelope) as Record<string, unknown>;
    expect((await signed(JSON.stringify({ ...conflicting, created_at: '2026-01-01T00:00:00.000Z' }))).status).toBe(200);
    expect(sqlite.prepare('SELECT (SELECT COUNT(*) FROM quarantine) + (SELECT COUNT(*) FROM event_conflicts) AS n').get()).toEqual({ n: 2 });

    // Not yet deleted at the service: the statements stop and erase nothing.
    await p.receiver.app.stop();
    const dbPath = p.receiver.dbPath;
    const dbDir = join(dbPath, '..');
    expect(() => runErasure(dbPath, ZELDA.email)).toThrow('erasure stopped');
    expect(zeldaTraces(databaseBytes(dbDir))).toHaveLength(3);

    await p.restartReceiver(port);
    c.deleteApplication(z1.id);
    c.deleteApplication(z2.id);
    await p.settle();
    await p.receiver.app.fanOut.runUntilIdle();
    await p.receiver.app.stop();
    expect(zeldaTraces(databaseBytes(dbDir))).toHaveLength(3);

    runErasure(dbPath, ZELDA.email);
    expect(zeldaTraces(databaseBytes(dbDir))).toEqual([]);

    // The file sink's command, as given, for the two applications.
    const command = /`(grep -v -i -F [^`]+)`/.exec(SECTION)![1]!
      .replaceAll('jane.doe@example.com', ZELDA.email)
      .replace("-e '<application id>'", `-e '${z1.id}' -e '${z2.id}'`);
    const before = readFileSync(join(sinkDir, 'events.ndjson'), 'utf8');
    expect(zeldaTraces(before)).toHaveLength(3);
    execFileSync('sh', ['-c', command], { cwd: sinkDir });
    const after = readFileSync(join(sinkDir, 'events.ndjson'), 'utf8');
    expect(zeldaTraces(after)).toEqual([]);
    expect(after).toContain(KEEPER.last_name);

    // The receiver runs on: the other candidate's application is whole, and folds its next event.
    await p.restartReceiver(port);
    c.setApplicationStatus(keeper.id, 'interviewed');
    await p.settle();
    await p.receiver.app.fanOut.runUntilIdle();
    const rows = p.receiver.app.database.ingestSqlite
      .prepare('SELECT id, status, candidate_email FROM applications ORDER BY id')
      .all() as { id: string; status: string; candidate_email: string }[];
    expect(rows).toEqual([{ id: keeper.id, status: 'interviewed', candidate_email: KEEPER.email }]);
    const results = p.receiver.app.database.ingestSqlite
      .prepare("SELECT (SELECT COUNT(*) FROM interview_results WHERE state = 'ready') AS interviews, (SELECT COUNT(*) FROM events WHERE application_id <> ?) AS others")
      .get(keeper.id);
    expect(results).toEqual({ interviews: 1, others: 0 });
    expect(readFileSync(join(sinkDir, 'events.ndjson'), 'utf8').split('\n').filter((l) => l.includes('"interviewed"'))).toHaveLength(1);
  });
});
