import { Hono } from 'hono';
import { iso } from '../clock.js';
import type { SandboxContext } from '../context.js';
import { compareMembersByName, memberView, settingsView } from '../organization.js';
import { WEEKDAYS, type CallPolicy, type InterviewDefaults, type Weekday } from '../types.js';
import { ApiError, methodNotAllowed, type ErrorObject } from './apiError.js';
import type { AuthEnv } from './auth.js';
import { paginate } from './pagination.js';
import { readJsonObject } from './readJson.js';

/** Spec 4.3: the text fields a PATCH of the interview defaults may set. */
const DEFAULTS_TEXT_FIELDS = [
  'prompt_intro',
  'prompt_outro',
  'prompt_additional_instructions',
  'interviewer_name_override',
  'organization_name_override',
] as const;

/** Spec 2.5: `HH:MM:SS`, 00:00:00 to 23:59:59. */
const TIME = /^([01]\d|2[0-3]):[0-5]\d:[0-5]\d$/;
/** Spec 2.5: `HH:MM:SS`, or `D HH:MM:SS` for one day or more. */
const DURATION = /^(?:(\d{1,3}) )?([01]\d|2[0-3]):([0-5]\d):([0-5]\d)$/;

/** A valid duration in canonical form (`0 01:00:00` becomes `01:00:00`), or null. Zero is refused. */
export function normalizeDuration(value: unknown): string | null {
  if (typeof value !== 'string') return null;
  const m = DURATION.exec(value);
  if (m === null) return null;
  const days = Number(m[1] ?? '0');
  const clock = `${m[2]}:${m[3]}:${m[4]}`;
  if (days === 0 && clock === '00:00:00') return null;
  return days > 0 ? `${days} ${clock}` : clock;
}

const fieldError = (detail: string, attr: string): ErrorObject => ({ code: 'invalid_input', detail, attr });

/**
 * Spec 4.3: partial update; omitted fields are unchanged, an empty string clears a text field.
 * Unknown and read-only fields are ignored (assumption, like the spec's own rule for the deprecated
 * call-policy fields); a text field that is not a string (null included) is 400 `invalid_input`.
 */
function patchInterviewDefaults(record: InterviewDefaults, body: Record<string, unknown>, now: number): void {
  const errors: ErrorObject[] = [];
  for (const field of DEFAULTS_TEXT_FIELDS) {
    if (field in body && typeof body[field] !== 'string') errors.push(fieldError('Not a valid string.', field));
  }
  if (errors.length > 0) throw new ApiError(400, errors);
  for (const field of DEFAULTS_TEXT_FIELDS) {
    const value = body[field];
    if (typeof value === 'string') record[field] = value;
  }
  record.updated_at = iso(now);
}

/**
 * Spec 2.5 + 4.3: `end_time` strictly after `start_time` (checked on the merged result, reported on
 * `end_time`), `weekdays` non-empty lowercase names, durations `[D ]HH:MM:SS`; `max_retries` and
 * `retry_window_days` are ignored. Every error carries its field in `attr`; nothing is applied
 * unless the whole PATCH is valid.
 */
function patchCallPolicy(policy: CallPolicy, body: Record<string, unknown>, now: number): void {
  const errors: ErrorObject[] = [];
  const next = { retries_enabled: policy.retries_enabled, start_time: policy.start_time, end_time: policy.end_time, weekdays: policy.weekdays, retry_delay_sequence: policy.retry_delay_sequence };
  if ('retries_enabled' in body) {
    if (typeof body['retries_enabled'] === 'boolean') next.retries_enabled = body['retries_enabled'];
    else errors.push(fieldError('Must be a valid boolean.', 'retries_enabled'));
  }
  for (const field of ['start_time', 'end_time'] as const) {
    if (!(field in body)) continue;
    const value = body[field];
    if (typeof value === 'string' && TIME.test(value)) next[field] = value;
    else errors.push(fieldError('Time has wrong format. Use hh:mm:ss (00:00:00 to 23:59:59).', field));
  }
  if ('weekdays' in body) {
    const value = body['weekdays'];
    if (!Array.isArray(value)) errors.push(fieldError('Expected a list of weekday names.', 'weekdays'));
    else if (value.length === 0) errors.push(fieldError('At least one weekday is required.', 'weekdays'));
    else {
      const bad = value.find((d) => typeof d !== 'string' || !(WEEKDAYS as readonly string[]).includes(d));
      if (bad !== undefined) errors.push(fieldError(`"${String(bad)}" is not a lowercase weekday name (${WEEKDAYS.join(', ')}).`, 'weekdays'));
      // Stored once each, in week order.
      else next.weekdays = WEEKDAYS.filter((d): d is Weekday => value.includes(d));
    }
  }
  if ('retry_delay_sequence' in body) {
    const value = body['retry_delay_sequence'];
    if (!Array.isArray(value)) errors.push(fieldError('Expected a list of durations.', 'retry_delay_sequence'));
    else {
      const normalized = value.map(normalizeDuration);
      const badIndex = normalized.indexOf(null);
      if (badIndex >= 0) {
        errors.push(fieldError(`Entry ${badIndex} ("${String(value[badIndex])}") is not a positive duration "HH:MM:SS" or "D HH:MM:SS".`, 'retry_delay_sequence'));
      } else next.retry_delay_sequence = normalized as string[];
    }
  }
  const timesValid = !errors.some((e) => e.attr === 'start_time' || e.attr === 'end_time');
  if (timesValid && next.end_time <= next.start_time) {
    errors.push(fieldError(`end_time (${next.end_time}) must be later than start_time (${next.start_time}).`, 'end_time'));
  }
  if (errors.length > 0) throw new ApiError(400, errors);
  Object.assign(policy, next);
  policy.updated_at = iso(now);
}

export function organizationRoutes(ctx: SandboxContext): Hono<AuthEnv> {
  const app = new Hono<AuthEnv>();
  const { store } = ctx;

  app.get('/interview-defaults', (c) => c.json(settingsView(store.interviewDefaultsOf(c.get('organizationId')))));
  app.patch('/interview-defaults', async (c) => {
    const record = store.interviewDefaultsOf(c.get('organizationId'));
    patchInterviewDefaults(record, (await readJsonObject(c)).body, ctx.clock.now());
    return c.json(settingsView(record));
  });

  app.get('/call-policy', (c) => c.json(settingsView(store.callPolicyOf(c.get('organizationId')))));
  app.patch('/call-policy', async (c) => {
    const policy = store.callPolicyOf(c.get('organizationId'));
    patchCallPolicy(policy, (await readJsonObject(c)).body, ctx.clock.now());
    return c.json(settingsView(policy));
  });

  // Spec 4.3 + 2.8: a page of members ordered by name.
  app.get('/members', (c) => {
    const members = store.membersOf(c.get('organizationId')).sort(compareMembersByName);
    return c.json(paginate(c.req.url, members.map(memberView)));
  });

  // Spec 4.3: no POST and no DELETE on the singletons (nor PUT); the member list is read-only.
  app.all('/interview-defaults', methodNotAllowed);
  app.all('/call-policy', methodNotAllowed);
  app.all('/members', methodNotAllowed);
  return app;
}
