/**
 * Everything the CLI needs from the sink fan-out (src/sinks), in one place:
 * reading the configured sinks, their status, queueing replays, enabling
 * a sink a 410 disabled, and sending a sink's waiting deliveries now. Other CLI modules use only this file's exports.
 */
import { readFileSync } from 'node:fs';
import { sql, type Kysely, type Transaction } from 'kysely';
import { ConfigError, loadConfig } from '../config/loadConfig.js';
import { configFileTopProblems, readConfigJson } from '../config/configFile.js';
import { databasePathOf } from './cliConfig.js';
import { shownError } from './io.js';
import type { Database } from '../db/schema.js';
import { enableSink, sinkNamesInDatabase, sinkStatuses, type SinkStatus } from '../sinks/deliveryRecords.js';
import { applySinkMaxAttempts, enqueueDeliveries, giveSinkMaxAttempts, preparedDeliveryWrites, sinkJobKind, type DeliveryWrites } from '../sinks/enqueueDeliveries.js';
import { matchesSink, undocumentedPatterns } from '../sinks/matchesSink.js';
import { messageIdFor } from '../sinks/messageId.js';
import { sendSinkNow, type SendNowResult } from '../sinks/sendSinkNow.js';
import { resolveSinks, type SinkConfig } from '../sinks/sinkConfig.js';

export type { DeliveryWrites, SendNowResult, SinkConfig, SinkStatus };
export { applySinkMaxAttempts, giveSinkMaxAttempts, messageIdFor, preparedDeliveryWrites, sendSinkNow, sinkJobKind, sinkNamesInDatabase, undocumentedPatterns };

type Env = Readonly<Record<string, string | undefined>>;

export interface ConfiguredSinks {
  sinks: readonly SinkConfig[];
  /** Problems of the sinks' configuration (a lenient read never fails on unrelated settings). */
  problems: string[];
}

/**
 * The sinks of CONFIG_FILE. When the whole configuration is valid, exactly
 * what the server uses; otherwise only the `sinks` key is read, so a command
 * that needs sinks does not demand WEBHOOK_SECRET or the API key.
 */
export function configuredSinks(env: Env, databasePath: string = databasePathOf(env)): ConfiguredSinks {
  const file = env['CONFIG_FILE'];
  if (file === undefined || file === '') return { sinks: [], problems: [] };
  try {
    return { sinks: loadConfig({ ...env, DATABASE_PATH: databasePath }).sinks, problems: [] };
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
  }
  const problems: string[] = [];
  const json = readConfigJson(file, (p) => readFileSync(p, 'utf8'), problems);
  if (json === undefined) return { sinks: [], problems };
  // What the server would refuse at the top level ("sink" for "sinks", an array) is said, not read as "no sinks".
  problems.push(...configFileTopProblems(json));
  const raw = (json !== null && typeof json === 'object' && !Array.isArray(json) ? json : {}) as { sinks?: unknown; sources?: { name?: unknown }[] };
  // `default` always: the server has it when WEBHOOK_SECRET is set, which an operator command
  // run with only DATABASE_PATH and CONFIG_FILE does not see.
  const knownSources = ['default', ...(Array.isArray(raw.sources) ? raw.sources.map((s) => String(s?.name)) : [])];
  // The CLI never sends: a sink whose secret's variable this shell lacks is still configured.
  const sinks = resolveSinks(raw.sinks, { env: { ...env }, knownSources, problems, unsetSecretsAllowed: true, databasePath });
  return { sinks, problems };
}

export interface SinkRow extends SinkStatus {
  /** False for a sink found in the database that the configuration no longer lists. */
  configured: boolean;
  /** The most recent failure among its failing and dead deliveries: what to act on. Null when none. */
  last_error: { error: string; status_code: number | null; at: string | null; event_id: string } | null;
}

/**
 * What `status` and `sinks list` show for a sink the database knows but the configuration read
 * here does not list. Without CONFIG_FILE in this shell every sink is one, also those the running
 * receiver has (the quick start's status terminal): say so. With a CONFIG_FILE that could not be
 * read here, or has problems (a relative path from another folder, a sink entry with a bad URL,
 * which is then left out), the sink may well be configured: say that the file has problems (the
 * warning above names them), not that the sink is not configured. And with a CONFIG_FILE read
 * whole, the sink is not in that file, which may not be the receiver's: 'not in CONFIG_FILE'.
 * A 410's disablement is shown either way, since it is what an operator must act on:
 * `withReason` puts its reason in (status has no column of its own for it).
 */
export function unlistedSinkState(env: Env, row: SinkRow, configProblems: boolean, withReason: boolean): string {
  const why = (env['CONFIG_FILE'] ?? '') === '' ? 'CONFIG_FILE unset here' : configProblems ? 'CONFIG_FILE has problems' : 'not in CONFIG_FILE';
  if (row.enabled) return why;
  return withReason ? `DISABLED (${row.disabled_reason ?? ''}); ${why}` : `NO; ${why}`;
}

/** Status of every configured sink, plus sinks the database knows but the configuration does not. */
export async function sinkRows(db: Kysely<Database>, sinks: readonly SinkConfig[], now: number): Promise<SinkRow[]> {
  const extra = (await sinkNamesInDatabase(db)).filter((n) => !sinks.some((s) => s.name === n));
  const all = [...sinks.map((s) => ({ name: s.name, type: s.type })), ...extra.map((name) => ({ name, type: 'unknown' }))];
  const rows = await sinkStatuses(db, all, now);
  const out: SinkRow[] = [];
  for (const r of rows) {
    // Through deliveries_sink_state (sink, state): the failing and dead rows only, newest attempt first.
    const failed = r.failing + r.dead === 0
      ? undefined
      : await db
          .selectFrom('deliveries')
          .select(['last_error', 'last_status_code', 'last_attempt_at', 'event_id'])
          .where('sink', '=', r.name)
          .where('state', 'in', ['retrying', 'dead'])
          .where('last_error', 'is not', null)
          .orderBy('last_attempt_at', 'desc')
          .limit(1)
          .executeTakeFirst();
    out.push({
      ...r,
      configured: sinks.some((s) => s.name === r.name),
      last_error: failed ? { error: shownError(failed.last_error!), status_code: failed.last_status_code, at: failed.last_attempt_at, event_id: failed.event_id } : null,
    });
  }
  return out;
}

/** Whether the sink would take the event (its `events` and `sources` filters). */
export function sinkWants(sink: SinkConfig, event: { event_type: string; source: string }): boolean {
  return matchesSink(sink, event);
}

/**
 * Queues the event again to the named sinks, in the caller's transaction.
 * Each (event, sink) keeps its message id, so the sink's consumers see the
 * same `webhook-id` as before and can dedupe. Returns the sinks queued (none
 * when the event is not settled yet: it will be fanned out when it settles).
 */
export async function queueSinkReplay(
  trx: Transaction<Database> | DeliveryWrites,
  eventId: string,
  sinks: readonly SinkConfig[],
  only: readonly string[],
  now: number,
): Promise<string[]> {
  return enqueueDeliveries(trx, eventId, sinks, now, { only });
}

/** Operator action: the sink's worker claims its pending deliveries again. False when it was not disabled. */
export async function enableSinkNamed(db: Kysely<Database>, name: string, now: number): Promise<boolean> {
  return enableSink(db, name, now);
}

/**
 * A line for each disabled sink (a 410) that has deliveries waiting, of the sinks named (all when
 * absent): what a replay or a retry queued for it waits until the sink is enabled, which a `--wait`
 * would otherwise only show as time running out.
 */
export async function disabledSinkWarnings(db: Kysely<Database>, names?: readonly string[]): Promise<string[]> {
  if (names?.length === 0) return [];
  let q = db
    .selectFrom('sink_state')
    .select(['sink', 'disabled_at', 'disabled_reason'])
    .where('disabled_at', 'is not', null)
    .where((eb) => eb.exists(eb.selectFrom('jobs').select('jobs.id').where('jobs.state', '=', 'pending').where('jobs.kind', '=', sql<string>`'sink:' || sink_state.sink`)))
    .orderBy('sink');
  if (names) q = q.where('sink', 'in', [...names]);
  const rows = await q.execute();
  return rows.map(
    (r) =>
      `warning: sink ${r.sink} is disabled since ${r.disabled_at} (${r.disabled_reason ?? 'no reason recorded'}): its deliveries wait until \`sinks enable ${r.sink}\` (or a change of its URL in CONFIG_FILE)`,
  );
}
