import { databasePathOf } from '../cliConfig.js';
import { openCliDatabase } from '../cliDatabase.js';
import { CliError, UsageError } from '../errors.js';
import { escapeText, printJson, printRows, printUpToLimit, type CliIo } from '../io.js';
import { isJsonObject, parseForComparison, sameJson } from '../../util/json.js';

/** Most paths listed as differing by `conflicts show`; the documents themselves follow in full. */
const MAX_PATHS = 50;

/**
 * The JSON paths at which two documents differ (`$.payload.application.status`), leaves and
 * shapes alike, in document order; at most `limit`. The documents are as parseForComparison
 * gives them (as ingest compared them: numbers by their digits as written), so each key's first
 * character is its mark. Iterative: a body nested thousands of levels deep (which ingest takes
 * and stores, up to the 1 MiB limit) overflowed the stack of a recursive walk.
 */
export function differingPaths(a: unknown, b: unknown, limit = MAX_PATHS): string[] {
  const out: string[] = [];
  // Pairs to compare, or a path to report (a key on one side only), taken from the end: pushed in
  // reverse so they come out in document order.
  type Step = { a: unknown; b: unknown; path: string } | { missing: string };
  const todo: Step[] = [{ a, b, path: '$' }];
  while (todo.length > 0 && out.length < limit) {
    const step = todo.pop()!;
    if ('missing' in step) {
      out.push(step.missing);
      continue;
    }
    const { a: x, b: y, path } = step;
    const next: Step[] = [];
    if (Array.isArray(x) && Array.isArray(y)) {
      for (let i = 0; i < Math.max(x.length, y.length); i++) next.push({ a: x[i], b: y[i], path: `${path}[${i}]` });
    } else if (isJsonObject(x) && isJsonObject(y)) {
      for (const k of new Set([...Object.keys(x), ...Object.keys(y)])) {
        const key = k.slice(1);
        const seg = /^[A-Za-z_][A-Za-z0-9_]*$/.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`;
        next.push(!Object.hasOwn(x, k) || !Object.hasOwn(y, k) ? { missing: `${path}${seg}` } : { a: x[k], b: y[k], path: `${path}${seg}` });
      }
    } else if (!sameJson(x, y)) out.push(path);
    for (let i = next.length - 1; i >= 0; i--) todo.push(next[i]!);
  }
  return out;
}

const parse = (text: string): unknown => {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
};

export async function runConflictsList(io: CliIo, o: { database?: string; limit: number; json?: boolean }): Promise<number> {
  const database = openCliDatabase(databasePathOf(io.env, o.database), { readOnly: true });
  try {
    const rows = await database.db
      .selectFrom('event_conflicts')
      .select(['id', 'event_id', 'received_at', 'source', 'delivery_id', (eb) => eb.fn<number>('length', ['envelope']).as('bytes')])
      .orderBy('id', 'desc')
      .limit(o.limit + 1)
      .execute();
    printUpToLimit(io, rows, o.limit, 'conflicts', (listed) =>
      printRows(io, o.json, listed.map((r) => ({ ...r, bytes: Number(r.bytes) })), 'no conflicts', ['id', 'received', 'event', 'source', 'delivery', 'bytes'], (r) => [r.id, r.received_at, r.event_id, r.source, r.delivery_id, r.bytes]),
    );
    return 0;
  } finally {
    await database.close();
  }
}

/** One conflict: where the body sent later differs from the stored event's, then both bodies. */
export async function runConflictsShow(io: CliIo, idRaw: string, o: { database?: string; json?: boolean }): Promise<number> {
  if (!/^\d+$/.test(idRaw)) throw new UsageError(`expected a conflict id (an integer), got ${JSON.stringify(idRaw)}`);
  const database = openCliDatabase(databasePathOf(io.env, o.database), { readOnly: true });
  try {
    const row = await database.db.selectFrom('event_conflicts').selectAll().where('id', '=', Number(idRaw)).executeTakeFirst();
    if (!row) throw new CliError(`no conflict with id ${idRaw}`);
    const stored = await database.db.selectFrom('events').select(['envelope', 'received_at', 'delivery_id']).where('id', '=', row.event_id).executeTakeFirst();
    // Compared as ingest compared them when it kept this body as a conflict.
    const comparable = (text: string): unknown => {
      try {
        return parseForComparison(text);
      } catch {
        return `s${text}`;
      }
    };
    const paths = stored ? differingPaths(comparable(stored.envelope), comparable(row.envelope)) : [];
    if (o.json) {
      printJson(io, {
        id: row.id,
        event_id: row.event_id,
        received_at: row.received_at,
        source: row.source,
        delivery_id: row.delivery_id,
        differing_paths: paths,
        envelope: row.envelope,
        stored: stored ? { received_at: stored.received_at, delivery_id: stored.delivery_id, envelope: stored.envelope } : null,
      });
      return 0;
    }
    // A body nested deeper than JSON.stringify's stack can write is shown as it was sent.
    const pretty = (text: string) => {
      try {
        return escapeText(JSON.stringify(parse(text), null, 2));
      } catch (err) {
        if (err instanceof RangeError) return escapeText(text);
        throw err;
      }
    };
    io.out(`id          ${row.id}`);
    io.out(`event       ${escapeText(row.event_id)}`);
    io.out(`received    ${row.received_at} (delivery ${escapeText(row.delivery_id)}, source ${row.source})`);
    io.out(stored ? `stored      ${stored.received_at} (delivery ${escapeText(stored.delivery_id)}): kept as it was` : 'stored      (the event is no longer stored)');
    if (stored) io.out(`differs at  ${paths.length === 0 ? '(no path: the same JSON)' : paths.map(escapeText).join(', ')}${paths.length >= MAX_PATHS ? ', …' : ''}`);
    io.out('sent later (not stored as the event)');
    io.out(pretty(row.envelope));
    if (stored) {
      io.out('stored');
      io.out(pretty(stored.envelope));
    }
    return 0;
  } finally {
    await database.close();
  }
}
