import { databasePathOf } from '../cliConfig.js';
import { openCliDatabase } from '../cliDatabase.js';
import { CliError, UsageError } from '../errors.js';
import { escapeText, printJson, printRows, printUpToLimit, type CliIo } from '../io.js';
import { isCredentialHeader } from '../../util/credentialHeaders.js';
import { createIngestWriter, repeatOutcome, type IngestOutcome } from '../../ingest/eventStore.js';
import { parseEnvelope } from '../../ingest/parseEnvelope.js';

export interface QuarantineListOptions {
  database?: string;
  limit: number;
  json?: boolean;
}

export interface QuarantineShowOptions {
  database?: string;
  maxBytes: number;
  json?: boolean;
}

/** Headers that authenticate: never shown, whatever was stored (rows written before ingest dropped them all). */
const hidden = (name: string) => name.toLowerCase() === 'webhook-signature' || isCredentialHeader(name);

export function safeHeaders(raw: string): Record<string, string> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    return {};
  }
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries((parsed ?? {}) as Record<string, unknown>)) {
    out[k] = hidden(k) ? '[hidden]' : escapeText(String(v));
  }
  return out;
}

function hexDump(buf: Buffer): string {
  const lines: string[] = [];
  for (let i = 0; i < buf.length; i += 16) {
    const chunk = buf.subarray(i, i + 16);
    const hex = [...chunk].map((b) => b.toString(16).padStart(2, '0')).join(' ');
    const ascii = [...chunk].map((b) => (b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : '.')).join('');
    lines.push(`${i.toString(16).padStart(8, '0')}  ${hex.padEnd(47)}  ${ascii}`);
  }
  return lines.join('\n');
}

function decodeUtf8(buf: Buffer): string | null {
  try {
    // ignoreBOM: a leading byte order mark is kept (and shown escaped), not silently dropped.
    return new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(buf);
  } catch {
    return null;
  }
}

export async function runQuarantineList(io: CliIo, o: QuarantineListOptions): Promise<number> {
  const database = openCliDatabase(databasePathOf(io.env, o.database), { readOnly: true });
  try {
    const rows = await database.db
      .selectFrom('quarantine')
      .select(['id', 'received_at', 'source', 'delivery_id', 'reason', (eb) => eb.fn<number>('length', ['body']).as('bytes')])
      .orderBy('id', 'desc')
      .limit(o.limit + 1)
      .execute();
    printUpToLimit(io, rows, o.limit, 'quarantined deliveries', (listed) =>
      printRows(io, o.json, listed.map((r) => ({ ...r, bytes: Number(r.bytes) })), 'nothing in quarantine', ['id', 'received', 'source', 'delivery', 'bytes', 'reason'], (r) => [r.id, r.received_at, r.source, r.delivery_id, r.bytes, r.reason]),
    );
    return 0;
  } finally {
    await database.close();
  }
}

/** One quarantined delivery: headers (signature hidden) and the body as escaped text, or hex when it is not UTF-8. */
export async function runQuarantineShow(io: CliIo, idRaw: string, o: QuarantineShowOptions): Promise<number> {
  if (!/^\d+$/.test(idRaw)) throw new UsageError(`expected a quarantine id (an integer), got ${JSON.stringify(idRaw)}`);
  const database = openCliDatabase(databasePathOf(io.env, o.database), { readOnly: true });
  try {
    const row = await database.db.selectFrom('quarantine').selectAll().where('id', '=', Number(idRaw)).executeTakeFirst();
    if (!row) throw new CliError(`no quarantined delivery with id ${idRaw}`);
    const body = Buffer.from(row.body);
    const text = decodeUtf8(body);
    const headers = safeHeaders(row.headers);
    if (o.json) {
      printJson(io, { id: row.id, received_at: row.received_at, source: row.source, delivery_id: row.delivery_id, reason: row.reason, headers, bytes: body.length, body_text: text, body_base64: body.toString('base64') });
      return 0;
    }
    io.out(`id          ${row.id}`);
    io.out(`received    ${row.received_at}`);
    io.out(`source      ${row.source}`);
    io.out(`delivery    ${escapeText(row.delivery_id)}`);
    io.out(`reason      ${row.reason}`);
    io.out('headers');
    for (const [k, v] of Object.entries(headers).sort(([a], [b]) => a.localeCompare(b))) io.out(`  ${escapeText(k)}: ${v}`);
    const shown = body.subarray(0, o.maxBytes);
    io.out(`body        ${body.length} bytes${text === null ? ', not UTF-8 (hex)' : ''}${body.length > shown.length ? `, first ${shown.length} shown (--max-bytes)` : ''}`);
    const shownText = text === null ? null : decodeUtf8(shown) ?? new TextDecoder('utf-8').decode(shown);
    io.out(shownText === null ? hexDump(shown) : escapeText(shownText));
    return 0;
  } finally {
    await database.close();
  }
}

export interface QuarantineReplayOptions {
  database?: string;
  all?: boolean;
  dryRun?: boolean;
  json?: boolean;
}

type ReplayOutcome = IngestOutcome | 'still refused';

/**
 * `quarantine replay`: parses quarantined deliveries again with this version's rules (after an
 * upgrade that accepts what an older one refused, or a row an older version quarantined). One
 * that now parses is stored as the receiver would have stored it (its original source,
 * webhook-id and arrival time; a duplicate or a conflict as ingest treats them), and leaves the
 * quarantine in the same transaction: its body is then in `events` (or `event_conflicts`), so
 * nothing is dropped. One still refused stays, with its reason; the exit code is then 1.
 */
export async function runQuarantineReplay(io: CliIo, idsRaw: string[], o: QuarantineReplayOptions): Promise<number> {
  if (idsRaw.length > 0 && o.all) throw new UsageError('give quarantine ids or --all, not both');
  if (idsRaw.length === 0 && !o.all) throw new UsageError('choose what to replay: quarantine ids (from `quarantine list`) or --all');
  const ids = idsRaw.map((v) => {
    if (!/^\d+$/.test(v)) throw new UsageError(`expected quarantine ids (integers), got ${JSON.stringify(v)}`);
    return Number(v);
  });
  const database = openCliDatabase(databasePathOf(io.env, o.database), { readOnly: o.dryRun === true });
  try {
    let q = database.db.selectFrom('quarantine').selectAll().orderBy('id');
    if (ids.length > 0) q = q.where('id', 'in', ids);
    const rows = await q.execute();
    const missing = ids.filter((id) => !rows.some((r) => r.id === id));
    const write = createIngestWriter(database.sqlite);
    const leave = database.sqlite.prepare('DELETE FROM quarantine WHERE id = ?');
    const stored = database.sqlite.prepare('SELECT envelope FROM events WHERE id = ?').pluck();
    /** A dry run's own "stored" events: a second row with the same id meets the first, as the real run's would. */
    const wouldStore = new Map<string, string>();
    const results: { id: number; outcome: ReplayOutcome; event_id?: string; reason?: string }[] = [];
    for (const row of rows) {
      const parsed = parseEnvelope(Buffer.from(row.body));
      if (!parsed.ok) {
        results.push({ id: row.id, outcome: 'still refused', reason: parsed.reason });
        continue;
      }
      const item = { type: 'event' as const, source: row.source, deliveryId: row.delivery_id, receivedAt: row.received_at, envelope: parsed.envelope, text: parsed.text };
      let outcome: IngestOutcome = 'accepted';
      if (o.dryRun) {
        // As the ingest writer decides: new, the same event again, or other content under its id.
        const before = wouldStore.get(parsed.envelope.id) ?? (stored.get(parsed.envelope.id) as string | undefined);
        outcome = before === undefined ? 'accepted' : repeatOutcome(before, parsed.text);
        if (before === undefined) wouldStore.set(parsed.envelope.id, parsed.text);
      } else {
        // Stored (or found a duplicate / conflict) and out of quarantine together, or neither.
        outcome = database.sqlite.transaction(() => {
          const [o1] = write([item]);
          leave.run(row.id);
          return o1!;
        }).immediate();
      }
      results.push({ id: row.id, outcome, event_id: parsed.envelope.id });
    }
    const refused = results.filter((r) => r.outcome === 'still refused');
    if (o.json) printJson(io, { dry_run: Boolean(o.dryRun), results, ...(missing.length ? { not_in_quarantine: missing } : {}) });
    else {
      const verb = o.dryRun ? 'would be' : 'was';
      for (const r of results) {
        if (r.outcome === 'still refused') io.out(`quarantine ${r.id}: still refused (${r.reason}); left in quarantine`);
        else {
          const what = r.outcome === 'accepted' ? 'stored as a new event' : r.outcome === 'duplicate' ? 'already stored (a duplicate)' : 'a conflict: kept in event_conflicts, the stored event unchanged';
          io.out(`quarantine ${r.id}: event ${escapeText(r.event_id!)} ${verb} ${what}${o.dryRun ? '' : '; out of quarantine'}`);
        }
      }
      if (results.length === 0 && missing.length === 0) io.out('nothing in quarantine');
    }
    for (const id of missing) io.err(`error: no quarantined delivery with id ${id}`);
    return refused.length > 0 || missing.length > 0 ? 1 : 0;
  } finally {
    await database.close();
  }
}
