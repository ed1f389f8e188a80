import { sql, type Kysely } from 'kysely';
import type { Database } from '../db/schema.js';
import { inChunks } from '../db/sqliteHelpers.js';
import type { HiringResource } from '../hiring/types.js';
import { RESOURCE_OF_EVENT, RESULT_TABLE } from '../processing/resources.js';

/**
 * Most stored JSON (envelopes and results) one batch of a sink builds and writes at once. A file
 * sink's batch is up to 256 messages, built together (each result parsed into its message), then
 * written as one string and one buffer: with results of a few MB (interview transcripts, within
 * the 5 MiB a read keeps), a replay of 150 such events to a file sink took the receiver from 225 MB
 * to 2.3 GB of memory, and past V8's longest string (about 512 MiB) messages failed with `Invalid
 * string length` and were retried. Usual messages (a few KB) fill a batch long before this.
 */
export const BATCH_BYTES = 8 * 1024 * 1024;

/**
 * The stored size of each event's message, in bytes: its envelope plus the result it carries,
 * measured by SQLite (octet_length) without reading the texts into JavaScript. Events not stored are 0.
 */
export async function storedMessageBytes(db: Kysely<Database>, eventIds: readonly string[]): Promise<Map<string, number>> {
  const sizes = new Map<string, number>(eventIds.map((id) => [id, 0]));
  const apps = new Map<HiringResource, Map<string, string[]>>(); // resource → application → its events
  for (const chunk of inChunks([...new Set(eventIds)])) {
    const rows = await db
      .selectFrom('events')
      .select(['id', 'event_type', 'application_id', sql<number>`octet_length(envelope)`.as('bytes')])
      .where('id', 'in', chunk)
      .execute();
    for (const row of rows) {
      sizes.set(row.id, Number(row.bytes));
      const resource = RESOURCE_OF_EVENT[row.event_type];
      if (!resource || row.application_id === null) continue;
      const byApp = apps.get(resource) ?? new Map<string, string[]>();
      byApp.set(row.application_id, [...(byApp.get(row.application_id) ?? []), row.id]);
      apps.set(resource, byApp);
    }
  }
  for (const [resource, byApp] of apps) {
    for (const chunk of inChunks([...byApp.keys()])) {
      const rows = await db
        .selectFrom(RESULT_TABLE[resource])
        .select(['application_id', sql<number | null>`octet_length(data)`.as('bytes')])
        .where('application_id', 'in', chunk)
        .execute();
      for (const row of rows) for (const id of byApp.get(row.application_id) ?? []) sizes.set(id, sizes.get(id)! + Number(row.bytes ?? 0));
    }
  }
  return sizes;
}

/** How many of the sizes, from the first, fit in `budget` together; always at least one. */
export function countWithin(sizes: readonly number[], budget: number): number {
  let total = 0;
  for (let i = 0; i < sizes.length; i++) {
    total += sizes[i]!;
    if (total > budget) return Math.max(1, i);
  }
  return sizes.length;
}
