import { CompiledQuery, sql, type Kysely } from 'kysely';
import type { Database } from '../db/schema.js';
import { lruGet } from '../util/collections.js';
import type { ClaimedJob } from './JobQueue.js';
import { claimCandidates } from './claimCandidates.js';

/** What a claim is built from, apart from its values: its kinds and held sources. */
export interface ClaimShape {
  blocked: readonly string[];
  probes: readonly string[];
  oneEach: readonly string[];
  kinds?: readonly string[];
  gatedKinds?: readonly string[];
}

/** The values a claim binds each time it runs. */
interface ClaimValues {
  now: string;
  limit: number;
  owner: string;
  token: string;
  expires: string;
}

type Slot = keyof ClaimValues;
const SLOTS: readonly Slot[] = ['now', 'limit', 'owner', 'token', 'expires'];
/** A stand-in for each value while the query is compiled: no source, kind or value of ours holds a NUL. */
const STAND_IN: Record<Slot, string> = Object.fromEntries(SLOTS.map((s) => [s, `\u0000claim:${s}`])) as Record<Slot, string>;
const slotOf = new Map<unknown, Slot>(SLOTS.map((s) => [STAND_IN[s], s]));

/** A compiled query whose parameters are the shape's own values, with `slots` filled in at each run. */
interface Compiled {
  sql: string;
  parameters: readonly unknown[];
  slots: [index: number, slot: Slot][];
}

/** `q` as a template; each of `needs` must have a place in it (else its value would never be bound). */
function template(q: CompiledQuery, needs: readonly Slot[]): Compiled {
  const slots: [number, Slot][] = [];
  q.parameters.forEach((p, i) => {
    const slot = slotOf.get(p);
    if (slot) slots.push([i, slot]);
  });
  const missing = needs.filter((n) => !slots.some(([, s]) => s === n));
  if (missing.length > 0) throw new Error(`a claim query compiled without a parameter for ${missing.join(', ')}`);
  // A stand-in written into the text (a literal, not a parameter) would never be bound.
  if (q.sql.includes('\u0000')) throw new Error('a claim query compiled with a value in its text');
  return { sql: q.sql, parameters: q.parameters, slots };
}

function bind(c: Compiled, values: ClaimValues): CompiledQuery {
  const parameters = c.parameters.slice();
  for (const [i, slot] of c.slots) parameters[i] = values[slot];
  return CompiledQuery.raw(c.sql, parameters);
}

/**
 * Shapes kept, for all the workers of a process together (one JobQueue serves the folds, the reads
 * and every sink's lane): each takes a few (its held sources change now and then). Past about 60
 * lanes claiming in turn, shapes would be compiled again at each claim, as before this cache.
 */
const MAX_SHAPES = 64;

/**
 * JobQueue.claim's two queries (the look first, the UPDATE ... RETURNING), built and compiled by
 * kysely once per shape (the kinds, the held sources) and then run with fresh values.
 *
 * At 200 deliveries/s with workers, the claim was the costliest statement the receiver ran (about
 * two a delivery): 0.45-0.48 ms of loop each, of which kysely's building and compiling of the
 * same UNION of index walks was 0.17-0.20 ms (bench/README.md, "Thirty-sixth round"). The SQL
 * text is the same for every claim of a shape (every value is a parameter), so the shape keys the
 * cache; the values (the time, the limit, the owner, its token, the lease's end) are compiled as
 * stand-ins and put in their places at each run. The query still runs through kysely's executor,
 * so it waits out a lock held elsewhere (busyRetryDialect) as before.
 */
export class ClaimStatements {
  private readonly shapes = new Map<string, { check: Compiled; update: Compiled }>();

  constructor(private readonly db: Kysely<Database>) {}

  async claim(shape: ClaimShape, values: ClaimValues, checkFirst: boolean): Promise<ClaimedJob[]> {
    const c = this.compiled(shape);
    if (checkFirst && (await this.db.executeQuery<{ id: number }>(bind(c.check, values))).rows.length === 0) return [];
    return (await this.db.executeQuery<ClaimedJob>(bind(c.update, values))).rows;
  }

  private compiled(shape: ClaimShape) {
    const key = JSON.stringify([shape.blocked, shape.probes, shape.oneEach, shape.kinds ?? null, shape.gatedKinds ?? null]);
    return lruGet(this.shapes, key, MAX_SHAPES, () => {
      const v = STAND_IN as unknown as ClaimValues;
      const candidates = claimCandidates(v.now, v.limit, shape.blocked, shape.probes, shape.kinds, shape.gatedKinds, shape.oneEach);
      return {
        check: template(sql<{ id: number }>`SELECT id FROM (${candidates}) LIMIT 1`.compile(this.db), ['now', 'limit']),
        update: template(this.takeAll(candidates, v).compile(), SLOTS),
      };
    });
  }

  /** The claim: the candidates, up to the limit, taken by `owner` under `token` in one statement. */
  private takeAll(candidates: ReturnType<typeof claimCandidates>, v: ClaimValues) {
    return this.db
      .updateTable('jobs')
      .set((eb) => ({
        state: 'running',
        lease_owner: v.owner,
        lease_token: v.token,
        lease_expires_at: v.expires,
        attempts: eb('attempts', '+', 1),
        updated_at: v.now,
      }))
      .where('id', 'in', sql<number>`(SELECT id FROM (${candidates}) LIMIT ${v.limit})`)
      .returningAll();
  }
}
