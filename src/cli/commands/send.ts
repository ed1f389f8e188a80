import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Webhook } from 'standardwebhooks';
import { parseSecret, splitSecrets } from '../../config/parseSecret.js';
import { CliError, UsageError } from '../errors.js';
import { applySet, buildFixture, FIXTURE_TYPES, isFixtureType } from '../fixtures.js';
import type { CliIo } from '../io.js';
import { brokeOffFrom, fetchProxyRefusal, noAnswerFrom } from '../networkCause.js';
import { isJsonObject } from '../../util/json.js';
import { jsonErrorAt } from '../../util/jsonErrorAt.js';

export interface SendOptions {
  url?: string;
  secret?: string;
  file?: string;
  id?: string;
  application?: string;
  externalId?: string;
  type?: string;
  set?: string[];
  timestampOffset: number;
  repeat: number;
  print?: boolean;
  timeout: number;
}

/** The body to send: a built-in fixture or a JSON file, with the overrides applied. */
function buildBody(eventType: string | undefined, o: SendOptions): string {
  let envelope: Record<string, unknown>;
  if (o.file !== undefined) {
    if (eventType !== undefined) throw new UsageError('give an event type or --file, not both');
    let text: string;
    try {
      text = readFileSync(o.file, 'utf8');
    } catch (err) {
      throw new CliError(`cannot read ${o.file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
    try {
      envelope = JSON.parse(text) as Record<string, unknown>;
    } catch {
      // Only the position: V8's message quotes the text around the error (a candidate's data).
      throw new CliError(`${o.file} is not valid JSON (at ${jsonErrorAt(text) ?? 'its start'})`);
    }
    if (typeof envelope !== 'object' || envelope === null || Array.isArray(envelope)) throw new CliError(`${o.file} must hold a JSON object (an event envelope)`);
  } else {
    if (eventType === undefined) throw new UsageError(`give an event type (${FIXTURE_TYPES.join(', ')}) or --file`);
    if (!isFixtureType(eventType)) throw new UsageError(`no built-in fixture for ${JSON.stringify(eventType)}; known: ${FIXTURE_TYPES.join(', ')} (use --type to send another type)`);
    envelope = buildFixture(eventType, {
      ...(o.id !== undefined ? { eventId: o.id } : {}),
      ...(o.application !== undefined ? { applicationId: o.application } : {}),
      ...(o.externalId !== undefined ? { externalId: o.externalId === 'null' ? null : o.externalId } : {}),
    });
  }
  if (o.file !== undefined) {
    if (o.id !== undefined) envelope.id = o.id;
    if (o.application !== undefined || o.externalId !== undefined) {
      // Without a payload object the value had nowhere to go: it was dropped without a word (no
      // payload), or failed as "Cannot create property 'id' on string" (a payload of another type).
      const payload = envelope.payload;
      const block = isJsonObject(payload) ? (payload.application === undefined ? payload : payload.application) : undefined;
      if (!isJsonObject(block)) {
        throw new UsageError(`--application and --external-id set payload.application (or the payload itself when it has none): ${o.file}'s ${isJsonObject(payload) ? 'payload.application' : 'payload'} is not a JSON object (--set sets any field)`);
      }
      if (o.application !== undefined) block.id = o.application;
      if (o.externalId !== undefined) block.external_id = o.externalId === 'null' ? null : o.externalId;
    }
  }
  if (o.type !== undefined) envelope.event_type = o.type;
  for (const s of o.set ?? []) {
    try {
      applySet(envelope, s);
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
  }
  return JSON.stringify(envelope);
}

function secretOf(io: CliIo, o: SendOptions): string {
  // Several secrets during a rotation: sign with the newest (last), as the service does after rotating.
  const secret = o.secret ?? splitSecrets(io.env['WEBHOOK_SECRET'] ?? '').at(-1);
  if (secret === undefined) throw new UsageError('no signing secret: set WEBHOOK_SECRET (a --secret is readable in ps by every user of the machine)');
  const parsed = parseSecret(secret);
  if (!parsed.ok) throw new UsageError(`${o.secret !== undefined ? '--secret' : 'WEBHOOK_SECRET'} ${parsed.problem}`);
  return secret;
}

/**
 * `send`: signs like the service (Standard Webhooks, the `standardwebhooks`
 * package) and POSTs. Every repeat carries the same body (same event id)
 * under a fresh webhook-id, as the service's retries and duplicates do.
 */
export async function runSend(io: CliIo, eventType: string | undefined, o: SendOptions): Promise<number> {
  const body = buildBody(eventType, o);
  const secret = secretOf(io, o);
  const port = io.env['PORT'] && io.env['PORT'] !== '0' ? io.env['PORT'] : '8080';
  if (o.url === undefined && !(/^\d{1,5}$/.test(port) && Number(port) <= 65535)) {
    throw new UsageError(`PORT must be a port number (0-65535) when --url is not given, got ${JSON.stringify(port)}`);
  }
  const url = o.url ?? `http://127.0.0.1:${port}/webhooks`;
  let u: URL;
  try {
    u = new URL(url);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error('scheme');
  } catch {
    throw new UsageError(`--url must be an http(s) URL, got ${JSON.stringify(url)}`);
  }
  // fetch refuses such a URL, which would read as "no answer"; deliveries authenticate by their signature.
  if (u.username !== '' || u.password !== '') throw new UsageError('--url must not carry a user name or password (user:password@): deliveries are authenticated by their signature');
  const wh = new Webhook(secret);
  const envelope = JSON.parse(body) as { id?: unknown; event_type?: unknown };
  let failures = 0;
  for (let i = 0; i < o.repeat; i++) {
    const msgId = `msg_${randomUUID().replaceAll('-', '')}`;
    const ts = Math.floor(Date.now() / 1000) + o.timestampOffset;
    const headers = {
      'content-type': 'application/json',
      'webhook-id': msgId,
      'webhook-timestamp': String(ts),
      'webhook-signature': wh.sign(msgId, new Date(ts * 1000), body),
    };
    if (o.print) {
      io.out(`POST ${url}`);
      for (const [k, v] of Object.entries(headers)) io.out(`${k}: ${v}`);
      io.out('');
      io.out(body);
      io.out('');
    }
    // A hand-written envelope may lack either (the receiver quarantines it): said, not "undefined".
    const label = `${envelope.event_type === undefined ? '(no event_type)' : String(envelope.event_type)} ${envelope.id === undefined ? '(no id)' : String(envelope.id)} (${msgId})`;
    let res: Response;
    try {
      res = await fetch(url, { method: 'POST', headers, body, redirect: 'manual', signal: AbortSignal.timeout(o.timeout) });
    } catch (err) {
      // Only NODE_USE_ENV_PROXY=1 (or --use-env-proxy) sends fetch through a proxy: say how to go direct.
      const hint = fetchProxyRefusal(err) === null ? '' : `; NODE_USE_ENV_PROXY (or --use-env-proxy) makes Node.js send it through ${u.protocol === 'https:' ? 'HTTPS_PROXY' : 'HTTP_PROXY'}: list ${u.hostname} in NO_PROXY, or unset NODE_USE_ENV_PROXY`;
      io.err(`send: ${label}: ${noAnswerFrom(url, err)}${hint}`);
      failures++;
      continue;
    }
    let text: string;
    try {
      text = (await res.text()).trim();
    } catch (err) {
      // The body stopped after the headers (--timeout ran out, the connection closed): this request
      // failed, and the repeats after it are still sent, as after no answer at all.
      io.err(`send: ${label}: ${brokeOffFrom(url, `${res.status} ${res.statusText}`, err)}`);
      failures++;
      continue;
    }
    const line = `${res.status} ${res.statusText} ${label}${text ? `: ${text}` : ''}`;
    if (res.status >= 200 && res.status < 300) io.out(line);
    else {
      io.err(line);
      failures++;
    }
  }
  return failures === 0 ? 0 : 1;
}
