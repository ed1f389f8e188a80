import { lstatSync, mkdirSync, readdirSync, readFileSync, renameSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it, onTestFinished } from 'vitest';
import { startPair, type Pair } from '../helpers/pair.js';
import { tempDir } from '../helpers/receiver.js';
import { postSigned } from '../helpers/signing.js';
import { cli } from './helpers.js';

// `erase` must take exactly one candidate: every form in which their address was stored, and no
// one else's rows or lines. On a database the receiver wrote (sandbox and receiver sharing a
// manual clock, two days before the CLI's own clock, so every retry window has passed), with the
// CLI as a child process.

const AN = { first_name: 'Annabel', last_name: 'Nosuchperson', email: 'an@example.org', phone_number: '+15550100001' };
// Her address holds AN's whole address: `joan@example.org` contains `an@example.org`.
const JOAN = { first_name: 'Joan', last_name: 'Keepsake', email: 'joan@example.org', phone_number: '+15550100002' };

const dbText = (dbPath: string) =>
  readdirSync(join(dbPath, '..'))
    .filter((f) => f.startsWith('receiver.db'))
    .map((f) => readFileSync(join(dbPath, '..', f)).toString('latin1'))
    .join('\n');

interface World {
  p: Pair;
  sinkFile: string;
  env: Record<string, string>;
  an: string;
  joan: string;
}

/** AN's application (deleted at the service) and JOAN's, stored, processed and in the file sink `sinkFile` (`sinkPath` in CONFIG_FILE). */
async function world(sinkPathOf: (dir: string) => { sinkFile: string; configured: string } = (d) => ({ sinkFile: join(d, 'events.ndjson'), configured: join(d, 'events.ndjson') })): Promise<World> {
  const { dir, cleanup } = tempDir('erase-selection-');
  onTestFinished(cleanup);
  const { sinkFile, configured } = sinkPathOf(dir);
  const config = join(dir, 'config.json');
  writeFileSync(config, JSON.stringify({ sinks: [{ name: 'archive', type: 'file', path: configured }] }));
  const p = await startPair({ env: { CONFIG_FILE: config }, startAt: Date.now() - 2 * 86_400_000 });
  onTestFinished(() => p.close());
  const c = p.sandbox.control;
  const job = c.createJob({ title: 'Forklift Operator' });
  const an = c.createApplication({ jobId: job.id, candidate: AN, externalId: 'ext-an' }).id;
  const joan = c.createApplication({ jobId: job.id, candidate: JOAN, externalId: 'ext-joan' }).id;
  c.setApplicationStatus(joan, 'screened');
  await p.settle();
  c.deleteApplication(an);
  await p.settle();
  await p.receiver.app.fanOut.runUntilIdle();
  return { p, sinkFile, env: { DATABASE_PATH: p.receiver.dbPath, CONFIG_FILE: config }, an, joan };
}

/** JOAN's rows (events, their links, her application) and her sink lines, to compare before and after. */
function joansData(w: World): unknown {
  const db = new Database(w.p.receiver.dbPath, { readonly: true });
  try {
    const rows = {
      applications: db.prepare('SELECT * FROM applications WHERE id = ?').all(w.joan),
      events: db.prepare('SELECT id, envelope FROM events WHERE application_id = ? ORDER BY id').all(w.joan),
      links: db.prepare('SELECT * FROM application_events WHERE application_id = ? ORDER BY event_id').all(w.joan),
    };
    const lines = readFileSync(w.sinkFile, 'utf8').split('\n').filter((l) => l.includes(w.joan));
    return { rows, lines };
  } finally {
    db.close();
  }
}

describe('hiring-receiver erase: what it selects', () => {
  it("keeps the rows and sink lines of a candidate whose address contains the erased one's", async () => {
    const w = await world();
    await w.p.receiver.app.stop();
    const before = joansData(w) as { rows: { events: unknown[] }; lines: unknown[] };
    expect(before.rows.events.length).toBeGreaterThan(1);
    expect(before.lines.length).toBeGreaterThan(1);

    const r = await cli(['erase', '--email', AN.email], w.env);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`erased 1 application: ${w.an}`);
    expect(joansData(w)).toEqual(before);
    expect(dbText(w.p.receiver.dbPath)).not.toContain(AN.last_name);
  }, 60_000);

  it('takes out an event and a quarantined body that give the address JSON-escaped (\\u0040, \\u002e) or percent-encoded in a URL', async () => {
    const w = await world();
    const signed = (body: string) => postSigned(w.p.receiver.url, w.p.secret, body, { timestampSeconds: Math.floor(w.p.clock.now() / 1000) });
    // An event of a type the receiver does not know (stored, linked to no application) naming her, escaped as JSON allows.
    const note = { id: 'evt_note_about_an', event_type: 'candidate.note', created_at: new Date(w.p.clock.now()).toISOString(), payload: { text: 'Nosuchperson-MARKER-1' } };
    const noteBody = JSON.stringify(note).replace('Nosuchperson-MARKER-1', 'reach her at an\\u0040example\\u002eorg');
    expect((await signed(noteBody)).status).toBe(200);
    // A body that does not parse (quarantined), naming her in a link.
    expect((await signed('{"event_type":"candidate.note","payload":{"profile":"https://crm.example/find?q=AN%40EXAMPLE.ORG"}')).status).toBe(200);
    await w.p.settle();
    await w.p.receiver.app.stop();
    const sqlite = new Database(w.env['DATABASE_PATH']!, { readonly: true });
    const stored = sqlite.prepare("SELECT (SELECT COUNT(*) FROM events WHERE id = 'evt_note_about_an') AS notes, (SELECT COUNT(*) FROM quarantine) AS quarantined").get();
    sqlite.close();
    expect(stored).toEqual({ notes: 1, quarantined: 1 });

    const r = await cli(['erase', '--email', AN.email, '--json'], w.env);
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as { rows: Record<string, number> };
    expect(out.rows).toMatchObject({ quarantine: 1 });
    const text = dbText(w.p.receiver.dbPath);
    expect(text).not.toContain('an\\u0040example');
    expect(text).not.toContain('AN%40EXAMPLE');
  }, 60_000);

  it('takes out a quarantined body naming an application selected by --application alone (no address given)', async () => {
    const w = await world();
    const signed = (body: string) => postSigned(w.p.receiver.url, w.p.secret, body, { timestampSeconds: Math.floor(w.p.clock.now() / 1000) });
    expect((await signed(`{"event_type":"application.status_changed","payload":{"application":{"id":${JSON.stringify(w.an)}},"candidate":{"last_name":"${AN.last_name}"}`)).status).toBe(200);
    await w.p.settle();
    await w.p.receiver.app.stop();
    expect(dbText(w.p.receiver.dbPath)).toContain(`"last_name":"${AN.last_name}"}`);

    const r = await cli(['erase', '--application', w.an, '--json'], w.env);
    expect(r.code, r.stderr).toBe(0);
    expect((JSON.parse(r.stdout) as { rows: Record<string, number> }).rows).toMatchObject({ applications: 1, quarantine: 1 });
    expect(dbText(w.p.receiver.dbPath)).not.toContain(AN.last_name);
  }, 60_000);

  it('refuses an --email that is not an address (blank, or a fragment such as a domain) instead of matching every row', async () => {
    const w = await world();
    await w.p.receiver.app.stop();
    const before = joansData(w);
    for (const email of [' ', '.org', 'example.org']) {
      const r = await cli(['erase', '--email', email, '--application', w.an], w.env);
      expect(r.code, `${JSON.stringify(email)}: ${r.stdout}${r.stderr}`).toBe(2);
      expect(r.stderr).toContain('--email');
    }
    expect(joansData(w)).toEqual(before);
  }, 60_000);

  it('rewrites the file a symlinked sink path points to, and leaves the link in place', async () => {
    const w = await world((d) => {
      mkdirSync(join(d, 'real'));
      symlinkSync(join(d, 'real', 'events.ndjson'), join(d, 'events.ndjson'));
      return { sinkFile: join(d, 'real', 'events.ndjson'), configured: join(d, 'events.ndjson') };
    });
    await w.p.receiver.app.stop();
    expect(readFileSync(w.sinkFile, 'utf8')).toContain(AN.last_name);
    const r = await cli(['erase', '--email', AN.email], w.env);
    expect(r.code, r.stderr).toBe(0);
    expect(readFileSync(w.sinkFile, 'utf8')).not.toContain(AN.last_name);
    expect(readFileSync(w.sinkFile, 'utf8')).toContain(JOAN.last_name);
    expect(lstatSync(join(w.sinkFile, '..', '..', 'events.ndjson')).isSymbolicLink()).toBe(true);
  }, 60_000);

  it("refuses, erasing nothing, when a file sink's file is not where CONFIG_FILE says from here (a relative path read from another folder)", async () => {
    const w = await world();
    await w.p.receiver.app.stop();
    const moved = `${w.sinkFile}.elsewhere`;
    renameSync(w.sinkFile, moved);
    const before = joansData({ ...w, sinkFile: moved });
    const r = await cli(['erase', '--email', AN.email], w.env);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/erase refused, nothing erased: file sink archive: .*events\.ndjson does not exist here, yet \d+ messages were delivered to it/);
    // Nothing erased: the database and the file where it really is are as they were.
    expect(dbText(w.p.receiver.dbPath)).toContain(AN.last_name);
    expect(joansData({ ...w, sinkFile: moved })).toEqual(before);
    expect(readFileSync(moved, 'utf8')).toContain(AN.last_name);
    // The file back in its place: the same command erases.
    renameSync(moved, w.sinkFile);
    const again = await cli(['erase', '--email', AN.email], w.env);
    expect(again.code, again.stderr).toBe(0);
    expect(readFileSync(w.sinkFile, 'utf8')).not.toContain(AN.last_name);
  }, 60_000);

  it('says how to finish an earlier erase that stopped before its VACUUM when the candidate is gone already', async () => {
    const w = await world();
    await w.p.receiver.app.stop();
    expect((await cli(['erase', '--email', AN.email], w.env)).code).toBe(0);
    const again = await cli(['erase', '--email', AN.email], w.env);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('hiring-receiver erase --finish');
  }, 60_000);

  it('refuses without CONFIG_FILE when the candidate\'s events went to sinks, unless --without-sink-files says to erase the database alone', async () => {
    const w = await world();
    await w.p.receiver.app.stop();
    const noConfig = { DATABASE_PATH: w.env.DATABASE_PATH! };
    const r = await cli(['erase', '--email', AN.email], noConfig);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("erase refused, nothing erased: CONFIG_FILE is unset here, and the candidate's events went to the sinks archive");
    expect(dbText(w.p.receiver.dbPath)).toContain(AN.last_name);
    const alone = await cli(['erase', '--email', AN.email, '--without-sink-files'], noConfig);
    expect(alone.code, alone.stderr).toBe(0);
    expect(dbText(w.p.receiver.dbPath)).not.toContain(AN.last_name);
    // The file sink was not rewritten, as asked: its lines are the operator's to take out.
    expect(readFileSync(w.sinkFile, 'utf8')).toContain(AN.last_name);
  }, 60_000);
});
