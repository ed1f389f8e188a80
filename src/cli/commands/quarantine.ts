import { databasePathOf } from '../cliConfig.js';
import { openCliDatabase } from '../cliDatabase.js';
import { CliError, UsageError } from '../errors.js';
import { escapeText, printJson, printTable, type CliIo } from '../io.js';
import { isCredentialHeader } from '../../util/credentialHeaders.js';

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
    return new TextDecoder('utf-8', { fatal: true }).decode(buf);
  } catch {
    return null;
  }
}

export async function runQuarantineList(io: CliIo, o: QuarantineListOptions): Promise<number> {
  const database = openCliDatabase(databasePathOf(io.env, o.database));
  try {
    const rows = await database.db
      .selectFrom('quarantine')
      .select(['id', 'received_at', 'source', 'delivery_id', 'reason', (eb) => eb.fn<number>('length', ['body']).as('bytes')])
      .orderBy('id', 'desc')
      .limit(o.limit)
      .execute();
    if (o.json) printJson(io, rows.map((r) => ({ ...r, bytes: Number(r.bytes) })));
    else if (rows.length === 0) io.out('nothing in quarantine');
    else printTable(io, ['id', 'received', 'source', 'delivery', 'bytes', 'reason'], rows.map((r) => [r.id, r.received_at, r.source, r.delivery_id, r.bytes, r.reason]));
    return 0;
  } finally {
    await database.close();
  }
}

/** One quarantined delivery: headers (signature hidden) and the body as escaped text, or hex when it is not UTF-8. */
export async function runQuarantineShow(io: CliIo, idRaw: string, o: QuarantineShowOptions): Promise<number> {
  if (!/^\d+$/.test(idRaw)) throw new UsageError(`expected a quarantine id (an integer), got ${JSON.stringify(idRaw)}`);
  const database = openCliDatabase(databasePathOf(io.env, o.database));
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
