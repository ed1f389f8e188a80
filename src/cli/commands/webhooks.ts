import { randomUUID } from 'node:crypto';
import { apiSettings, type ApiSettings } from '../cliConfig.js';
import { UsageError } from '../errors.js';
import { printJson, printTable, type CliIo } from '../io.js';
import { ApiFailure, NotTheApiError, WebhooksApi } from '../webhooksApi.js';

interface Endpoint {
  id: string;
  url: string;
  enabled: boolean;
  event_types: string[];
  secret?: string;
  created_at?: string;
}

interface DeliveryRecord {
  id: string;
  event_id?: string;
  event_type?: string;
  attempt?: number;
  status?: string;
  response_code?: number | null;
  error?: string | null;
  attempted_at?: string;
}

export interface ApiOptions {
  source?: string;
  json?: boolean;
}

const api = (io: CliIo, o: ApiOptions) => {
  const settings = apiSettings(io.env, o.source);
  return { client: new WebhooksApi(settings), settings };
};

/**
 * The secret, once, with what to do with it. Goes to stdout only. It goes where the chosen
 * source reads its secrets: WEBHOOK_SECRET for `default`, but for a CONFIG_FILE source the
 * variable its `secrets` names, or the file itself: WEBHOOK_SECRET there would make a second
 * source (`default`) and leave this one without the secret.
 */
function printNewSecret(io: CliIo, secret: string, rotation: boolean, settings: ApiSettings): void {
  io.out('');
  io.out(`Signing secret (shown once; it cannot be read again):`);
  io.out(`  ${secret}`);
  io.out('');
  // A variable whose name looks like a secret (pasted in its place) is described, not printed.
  const variable = settings.secretsEnv ?? (settings.secretsInEnv ? `<the variable source ${settings.source}'s "secrets" names>` : null);
  // The environment's source (WEBHOOK_SECRET), not a CONFIG_FILE source that is also named
  // `default` and reads another variable: WEBHOOK_SECRET beside it would make a second `default`.
  const isDefault = settings.source === 'default' && variable === 'WEBHOOK_SECRET';
  const where = isDefault ? '' : ` (source ${settings.source}'s "secrets" in CONFIG_FILE read it)`;
  if (rotation) {
    io.out('From now on the service signs new deliveries with this secret. Accept both while you roll out:');
    if (variable !== null) {
      io.out(`  ${variable}="<current secret>,${secret}"`);
      io.out(`${isDefault ? '(or add it to the source\'s "secrets" in CONFIG_FILE)' : where.trim()} and restart the receiver. Deliveries refused before the restart`);
    } else {
      io.out(`  add it to source ${settings.source}'s "secrets" in CONFIG_FILE, beside the current one, and restart the receiver. Deliveries refused before the restart`);
    }
    io.out('are retried by the service (2 min, 8 min, ...). Remove the old secret once the retries of older deliveries are over (up to ~11 h).');
  } else if (variable !== null) {
    io.out(`Configure the receiver with it${where}, then restart it:`);
    io.out(`  ${variable}="${secret}"`);
    io.out(
      isDefault
        ? '(or a source\'s "secrets" in CONFIG_FILE; during a later rotation, list both: WEBHOOK_SECRET="<old>,<new>").'
        : `(during a later rotation, list both: ${variable}="<old>,<new>").`,
    );
  } else {
    io.out(`Add it to source ${settings.source}'s "secrets" in CONFIG_FILE, then restart the receiver`);
    io.out('(during a later rotation, list both there: ["<old>", "<new>"]).');
  }
}

/**
 * The receiver takes deliveries at /webhooks only: any other path answers 404, and the service
 * drops an event after 6 failed attempts. So a URL registered elsewhere loses every event.
 * The URL it suggests is the receiver's own path on the same origin: appending /webhooks to the
 * path given (`/webhook` → `/webhook/webhooks`) names a path the receiver answers 404 to as well.
 */
function checkReceiverUrl(url: string, anyPath: boolean): void {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new UsageError('--url: must be an absolute http(s) URL, such as https://receiver.example.com/webhooks');
  }
  if (u.protocol !== 'https:' && u.protocol !== 'http:') throw new UsageError('--url: must be an absolute http(s) URL, such as https://receiver.example.com/webhooks');
  if (!anyPath && !/\/webhooks\/?$/.test(u.pathname)) {
    throw new UsageError(
      `--url: the receiver takes deliveries at /webhooks, so this URL would answer 404 to every delivery; register ${u.origin}/webhooks (or pass --any-path if a proxy in front of it maps this path to /webhooks)`,
    );
  }
}

export async function runRegister(
  io: CliIo,
  o: ApiOptions & { url: string; events?: string[]; disabled?: boolean; description?: string; idempotencyKey?: string; anyPath?: boolean },
): Promise<number> {
  checkReceiverUrl(o.url, Boolean(o.anyPath));
  const { client, settings } = api(io, o);
  const body = {
    url: o.url,
    enabled: !o.disabled,
    event_types: o.events ?? [],
    ...(o.description !== undefined ? { description: o.description } : {}),
  };
  // One key per invocation, reused on our own retry after a lost answer: the
  // service then replays the first creation instead of refusing the URL.
  const key = o.idempotencyKey ?? randomUUID();
  let answer;
  for (let attempt = 1; ; attempt++) {
    try {
      answer = await client.endpoint<Endpoint>('POST', client.url(), { body, headers: { 'idempotency-key': key } });
      break;
    } catch (err) {
      if (err instanceof ApiFailure && err.errors[0]?.code === 'already_exists') {
        const existing = (await client.listAll<Endpoint>(client.url()).catch(() => [])).find((e) => e.url === new URL(o.url).toString() || e.url === o.url);
        throw new ApiFailure(err.status, err.errors, `${err.message}${existing ? ` (it is webhook ${existing.id})` : ''}`);
      }
      const retryable = !(err instanceof NotTheApiError) && (!(err instanceof ApiFailure) || err.status >= 500);
      if (!retryable || attempt >= 3) throw err;
      await new Promise((r) => setTimeout(r, 500 * attempt));
    }
  }
  const replay = answer.header('idempotent-replay') === 'true';
  const hook = answer.body;
  if (o.json) {
    printJson(io, { ...hook, idempotent_replay: replay });
    return 0;
  }
  io.out(`${replay ? 'Already created by an earlier request with this Idempotency-Key (Idempotent-Replay): ' : 'Registered '}webhook ${hook.id}`);
  io.out(`  url     ${hook.url}`);
  io.out(`  enabled ${hook.enabled}`);
  io.out(`  events  ${(hook.event_types ?? []).length === 0 ? 'all' : hook.event_types.join(', ')}`);
  io.out(`  idempotency key ${key}`);
  if (hook.secret) printNewSecret(io, hook.secret, false, settings);
  return 0;
}

export async function runList(io: CliIo, o: ApiOptions): Promise<number> {
  const { client } = api(io, o);
  const hooks = await client.listAll<Endpoint>(client.url());
  if (o.json) printJson(io, hooks);
  else if (hooks.length === 0) io.out('no webhooks registered');
  else printTable(io, ['id', 'url', 'enabled', 'events', 'secret', 'created'], hooks.map((h) => [h.id, h.url, h.enabled, h.event_types.length === 0 ? 'all' : h.event_types.join(','), h.secret, h.created_at]));
  return 0;
}

export async function runRotate(io: CliIo, id: string, o: ApiOptions): Promise<number> {
  const { client, settings } = api(io, o);
  const { body: hook } = await client.endpoint<Endpoint>('POST', client.url(`/${encodeURIComponent(id)}/rotate-secret`));
  if (o.json) printJson(io, hook);
  else {
    io.out(`Rotated the signing secret of webhook ${hook.id} (${hook.url})`);
    if (hook.secret) printNewSecret(io, hook.secret, true, settings);
  }
  return 0;
}

/**
 * What became of an attempt. Spec 6.3: only a 2xx acknowledges a delivery; any other code, or none
 * (`response_code: null`, a timeout or network error), failed. Spec 2.11 names no field of the
 * record beyond "status and response code": one without a `response_code` field is judged by its
 * `status` when that says `succeeded` or `failed` (the sandbox's words), else not at all (undefined).
 */
function outcomeOf(r: DeliveryRecord): 'succeeded' | 'failed' | undefined {
  const code = r.response_code;
  if (typeof code === 'number') return Number.isInteger(code) && code >= 200 && code <= 299 ? 'succeeded' : 'failed';
  if (r.status === 'succeeded' || r.status === 'failed') return r.status;
  return code === null ? 'failed' : undefined;
}

/**
 * Whether a record the service answered is one the filters choose. A record the CLI cannot judge
 * (no `event_id`, no outcome) is kept: the service was asked for the same filters, and dropping
 * it showed a service that applied them as having no attempts.
 */
const chosenRecord = (r: DeliveryRecord, o: { status?: string; event?: string }): boolean =>
  (o.event === undefined || r.event_id === undefined || r.event_id === o.event) && (o.status === undefined || (outcomeOf(r) ?? o.status) === o.status);

export async function runDeliveries(io: CliIo, id: string, o: ApiOptions & { status?: string; event?: string }): Promise<number> {
  const { client } = api(io, o);
  const q = new URLSearchParams({ limit: '200' });
  if (o.status) q.set('status', o.status);
  if (o.event) q.set('event_id', o.event);
  // Spec 4.5 and 2.11 show no query parameter for this list, and no value of a record's `status`:
  // `status=` and `event_id=` are the sandbox's. Sent, so a service that takes them pages less,
  // and applied here too, so one that ignores them (and answers every attempt) is not shown as
  // failed attempts that succeeded. `--status` is decided by the response code (6.3), see outcomeOf.
  const records = (await client.listAll<DeliveryRecord>(`${client.url(`/${encodeURIComponent(id)}/deliveries`)}?${q}`)).filter((r) => chosenRecord(r, o));
  if (o.json) printJson(io, records);
  else if (records.length === 0) io.out('no delivery attempts');
  else printTable(io, ['attempted', 'event', 'type', 'attempt', 'status', 'code', 'error'], records.map((r) => [r.attempted_at, r.event_id, r.event_type, r.attempt, r.status, r.response_code, r.error]));
  return 0;
}

export async function runDelete(io: CliIo, id: string, o: ApiOptions): Promise<number> {
  const { client } = api(io, o);
  await client.call('DELETE', client.url(`/${encodeURIComponent(id)}`));
  if (o.json) printJson(io, { deleted: id });
  else io.out(`Deleted webhook ${id}; the service sends it nothing more (pending retries are dropped)`);
  return 0;
}
