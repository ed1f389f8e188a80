import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createApp } from '../../app.js';
import { loadConfig } from '../../config/loadConfig.js';
import { createLogger } from '../../observability/logger.js';
import { RESOURCE_OF_EVENT, RESULT_TABLE } from '../../processing/resources.js';
import { createSandbox } from '../../sandbox/createSandbox.js';
import { CliError } from '../errors.js';
import { printJson, printTable, type CliIo } from '../io.js';
import { WebhooksApi } from '../webhooksApi.js';
import { reservePort, type PortReservation } from '../../util/freePort.js';

export interface DemoOptions {
  timeout: number;
  keep?: boolean;
  verbose?: boolean;
  json?: boolean;
}

const SINK = 'demo-file';

/** payload.previous_status, or payload.application.status, of a stored envelope. */
function statusOf(envelope: string, which: 'status' | 'previous_status'): string | null {
  const p = (JSON.parse(envelope) as { payload?: { previous_status?: unknown; application?: { status?: unknown } } }).payload;
  const v = which === 'previous_status' ? p?.previous_status : p?.application?.status;
  return typeof v === 'string' ? v : null;
}

interface ArrivedEvent {
  id: string;
  event_type: string;
  created_at: string | null;
  received_at: string;
  external_id: string | null;
  application_id: string | null;
  result: { state: string; reason: string | null; overall_score: number | null } | null;
  needs_review: boolean;
  notes: string[];
}

/**
 * `demo`: the sandbox and a receiver in this process, wired together the way
 * an integration engineer would (the receiver registered through the
 * webhooks API, its secret configured), a scenario through every event type
 * of spec 6.4, and a report of what arrived and what processing made of it.
 */
export async function runDemo(io: CliIo, o: DemoOptions): Promise<number> {
  const deadline = Date.now() + o.timeout * 1000;
  const left = () => Math.max(1, deadline - Date.now());
  const dir = mkdtempSync(join(tmpdir(), 'hiring-receiver-demo-'));
  const sinkPath = join(dir, 'messages.ndjson');
  const configPath = join(dir, 'config.json');
  writeFileSync(configPath, JSON.stringify({ sinks: [{ name: SINK, type: 'file', path: sinkPath }] }, null, 2));
  const say = (s: string) => {
    if (!o.json) io.out(s);
  };

  const sandbox = createSandbox({ seed: 7 });
  let receiver: ReturnType<typeof createApp> | null = null;
  let reservation: PortReservation | null = null;
  try {
    const { url: sandboxUrl } = await sandbox.start(0, '127.0.0.1');
    const org = sandbox.control.organizations()[0]!;
    const apiKey = org.api_keys[0]!.key;
    say(`1. Sandbox of the hiring service on ${sandboxUrl} (organization "${org.name}")`);

    // Held until the receiver listens on it: registering and building the receiver take a while,
    // and a port given up at once could be taken meanwhile.
    reservation = await reservePort();
    const port = reservation.port;
    const receiverUrl = `http://127.0.0.1:${port}/webhooks`;
    const hooks = new WebhooksApi({ apiUrl: sandboxUrl, apiKey, origin: 'demo' });
    const { body: hook } = await hooks.call<{ id: string; secret: string }>('POST', hooks.url(), {
      body: { url: receiverUrl, enabled: true, event_types: [] },
      headers: { 'idempotency-key': `demo-${port}` },
    });
    say(`2. Registered ${receiverUrl} through POST /api/v2/webhooks (webhook ${hook.id}); its secret goes into the receiver's WEBHOOK_SECRET`);

    const config = loadConfig({
      PORT: String(port),
      HOST: '127.0.0.1',
      DATABASE_PATH: join(dir, 'receiver.db'),
      WEBHOOK_SECRET: hook.secret,
      HIRING_API_URL: sandboxUrl,
      HIRING_API_KEY: apiKey,
      WORKER_CONCURRENCY: '4',
      CONFIG_FILE: configPath,
      LOG_LEVEL: o.verbose ? 'info' : 'silent',
    });
    receiver = createApp({ config, logger: createLogger(config.logLevel, process.stderr) });
    await reservation.release();
    reservation = null;
    await receiver.start();
    say(`3. Receiver on ${receiverUrl}, database ${config.databasePath}, file sink ${sinkPath}`);

    // The scenario. Every step's deliveries go out before the next, so the chaos knobs apply to that step only.
    const c = sandbox.control;
    c.runScenario('lifecycle', { externalId: 'demo-lifecycle' });
    await c.idle();
    const dupJob = c.createJob({ title: 'Forklift Operator' });
    c.setChaos({ duplicateRate: 1 });
    const dup = c.createApplication({ jobId: dupJob.id, externalId: 'demo-duplicate' });
    c.setChaos({ duplicateRate: 0 });
    await c.idle();
    c.setChaos({ reorder: true });
    c.setApplicationStatus(dup.id, 'screened');
    c.setApplicationStatus(dup.id, 'interviewed');
    await c.idle();
    c.setChaos({ reorder: false });
    c.runScenario('legacy', { externalId: 'demo-legacy' });
    c.runScenario('ineligible', { externalId: 'demo-ineligible' });
    const gone = c.createApplication({ jobId: dupJob.id, externalId: 'demo-deleted' });
    c.deleteApplication(gone.id);
    try {
      await c.waitForDeliveries({ timeoutMs: left() });
    } catch {
      throw new CliError('demo: the sandbox could not deliver every event in time');
    }
    const attempts = c.deliveries();
    const failed = attempts.filter((a) => a.status !== 'succeeded');
    if (failed.length > 0) throw new CliError(`demo: ${failed.length} deliveries were refused by the receiver (first: HTTP ${failed[0]!.response_code ?? failed[0]!.error})`);
    const eventIds = [...new Set(attempts.map((a) => a.event_id))];
    say(`4. The sandbox sent ${attempts.length} deliveries of ${eventIds.length} events; waiting for processing and the file sink ...`);

    const { db } = receiver.database;
    for (;;) {
      const stored = await db.selectFrom('events').select((eb) => eb.fn.countAll<number>().as('n')).where('id', 'in', eventIds).executeTakeFirstOrThrow();
      const settled = await db.selectFrom('event_processing').select((eb) => eb.fn.countAll<number>().as('n')).where('event_id', 'in', eventIds).where('state', '=', 'settled').executeTakeFirstOrThrow();
      const delivered = await db.selectFrom('deliveries').select((eb) => eb.fn.countAll<number>().as('n')).where('event_id', 'in', eventIds).where('state', '=', 'delivered').executeTakeFirstOrThrow();
      const n = eventIds.length;
      if (Number(stored.n) === n && Number(settled.n) === n && Number(delivered.n) === n) break;
      if (Date.now() >= deadline) {
        throw new CliError(`demo: not finished after ${o.timeout} s: ${stored.n}/${n} stored, ${settled.n} processed, ${delivered.n} in the file sink`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }

    // What arrived.
    const events = await db.selectFrom('events').selectAll().where('id', 'in', eventIds).orderBy('received_at').orderBy('id').execute();
    const apps = await db.selectFrom('applications').selectAll().execute();
    const deliveriesOf = (id: string) => attempts.filter((a) => a.event_id === id);
    const firstAttempt = (id: string) => Math.min(...deliveriesOf(id).map((a) => Date.parse(a.attempted_at)));
    const arrived: ArrivedEvent[] = [];
    const lines = readFileSync(sinkPath, 'utf8').split('\n').filter((l) => l !== '');
    const sinkLines = lines.length;
    // Each event's message as delivered (the last line of an id: its latest revision).
    const messages = new Map<string, { needs_review?: unknown }>();
    for (const l of lines) {
      const m = JSON.parse(l) as { id: string; needs_review?: unknown };
      messages.set(m.id, m);
    }
    for (const e of events) {
      const app = apps.find((a) => a.id === e.application_id);
      const resource = RESOURCE_OF_EVENT[e.event_type];
      let result: ArrivedEvent['result'] = null;
      if (resource && e.application_id) {
        const r = await db.selectFrom(RESULT_TABLE[resource]).select(['state', 'reason', 'overall_score']).where('application_id', '=', e.application_id).executeTakeFirst();
        result = r ? { state: r.state, reason: r.reason, overall_score: r.overall_score } : null;
      }
      const notes: string[] = [];
      const copies = deliveriesOf(e.id).length;
      if (copies > 1) notes.push(`delivered ${copies} times, stored once`);
      // Out of order: a status change that arrived before the change it follows (its previous_status).
      const prev = statusOf(e.envelope, 'previous_status');
      const older = prev === null ? undefined : events.find((x) => x.application_id === e.application_id && x.event_type === 'application.status_changed' && statusOf(x.envelope, 'status') === prev && firstAttempt(x.id) > firstAttempt(e.id));
      if (older) notes.push(`arrived before the older change to ${prev} (out of order)`);
      if (e.event_type === 'interview_v2.completed') notes.push('legacy engine: read from /api/v1');
      if (e.event_type === 'job_application.deleted') notes.push('application marked deleted');
      // The event's own flag, as its message in the sink says (the application's may have changed since).
      arrived.push({ id: e.id, event_type: e.event_type, created_at: e.created_at, received_at: e.received_at, external_id: app?.external_id ?? null, application_id: e.application_id, result, needs_review: messages.get(e.id)?.needs_review === true, notes });
    }
    const types = [...new Set(arrived.map((a) => a.event_type))].sort();
    const summary = {
      sandbox: sandboxUrl,
      receiver: receiverUrl,
      database: config.databasePath,
      sink_file: sinkPath,
      deliveries: attempts.length,
      events: arrived,
      applications: apps.map((a) => ({ id: a.id, external_id: a.external_id, status: a.status, needs_review: a.needs_review === 1, review_reasons: a.review_reasons ? (JSON.parse(a.review_reasons) as unknown) : [], deleted: a.deleted_at !== null })),
      event_types: types,
      sink_lines: sinkLines,
    };
    if (o.json) {
      printJson(io, summary);
      return 0;
    }
    io.out('');
    io.out(`Events as they arrived (${arrived.length} events, ${attempts.length} deliveries):`);
    printTable(
      io,
      ['received', 'event', 'application', 'result', 'needs review', 'notes'],
      arrived.map((a) => [
        a.received_at.slice(11, 23),
        a.event_type,
        a.external_id,
        a.result ? `${a.result.state}${a.result.overall_score !== null ? ` (score ${a.result.overall_score})` : ''}${a.result.reason ? ` ${a.result.reason}` : ''}` : null,
        a.needs_review ? 'YES' : 'no',
        a.notes.join('; '),
      ]),
    );
    io.out('');
    io.out('Applications (folded by created_at, whatever the arrival order):');
    printTable(
      io,
      ['external id', 'status', 'needs review', 'reasons', 'deleted'],
      summary.applications.map((a) => [a.external_id, a.status, a.needs_review ? 'YES' : 'no', (a.review_reasons as string[]).join(', '), a.deleted ? 'yes' : 'no']),
    );
    io.out('');
    io.out(`${types.length} event types seen: ${types.join(', ')}`);
    io.out(`File sink: ${sinkLines} messages in ${sinkPath}${o.keep ? '' : ' (removed at exit; --keep keeps it)'}`);
    io.out('Next: `npm run sandbox`, then `npm run cli -- webhooks register --url ...` and `npm run cli -- --help`.');
    return 0;
  } finally {
    await reservation?.release();
    await receiver?.stop().catch(() => {});
    await sandbox.stop().catch(() => {});
    if (o.keep) io.err(`demo files kept in ${dir}`);
    else rmSync(dir, { recursive: true, force: true });
  }
}
