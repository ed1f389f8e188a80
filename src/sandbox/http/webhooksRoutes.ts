import { Hono } from 'hono';
import { z } from 'zod';
import { iso } from '../clock.js';
import type { SandboxContext } from '../context.js';
import { maskSecret, newId, newWebhookSecret } from '../ids.js';
import { EVENT_TYPES, type WebhookEndpoint } from '../types.js';
import { ApiError, invalidInput, methodNotAllowed } from './apiError.js';
import type { AuthEnv } from './auth.js';
import { paginate } from './pagination.js';
import { readJsonObject, validate } from './readJson.js';

/**
 * Spec 7: "a URL field failing validation returns invalid_input". Accepts absolute http(s) URLs
 * without credentials. Assumption: plain http is allowed because sandbox receivers run locally.
 */
const webhookUrl = z.string().transform((value, ctx) => {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    ctx.addIssue({ code: 'custom', message: 'Enter a valid URL.' });
    return z.NEVER;
  }
  if ((url.protocol !== 'https:' && url.protocol !== 'http:') || url.username !== '' || url.password !== '') {
    ctx.addIssue({ code: 'custom', message: 'Enter a valid http(s) URL without credentials.' });
    return z.NEVER;
  }
  return url.toString();
});
const eventTypes = z.array(z.enum(EVENT_TYPES)).transform((types) => [...new Set<string>(types)]);
const createBody = z.object({
  url: webhookUrl,
  enabled: z.boolean().optional(),
  event_types: eventTypes.optional(),
  description: z.string().max(500).optional(),
});
const updateBody = createBody.partial();

/** Spec 2.11: the secret is masked on every read. */
export function webhookView(hook: WebhookEndpoint, revealSecret = false): Record<string, unknown> {
  const { organizationId: _org, secret, ...rest } = hook;
  return { ...rest, secret: revealSecret ? secret : maskSecret(secret) };
}

export function webhooksRoutes(ctx: SandboxContext): Hono<AuthEnv> {
  const app = new Hono<AuthEnv>();
  const { store } = ctx;

  /** Spec 4.5: a URL may be registered once per organization; other organizations may reuse it. */
  const assertUrlFree = (orgId: string, url: string, exceptId?: string): void => {
    if (store.webhooksOf(orgId).some((w) => w.url === url && w.id !== exceptId)) {
      throw ApiError.of(409, 'already_exists', 'A webhook with this URL already exists in this organization.', 'url');
    }
  };

  app.post('/', async (c) => {
    const orgId = c.get('organizationId');
    const { body } = await readJsonObject(c);
    ctx.idempotency.precheck(c, orgId, body);
    const input = validate(createBody, body);
    // Spec 4.6: a replay answers before the uniqueness check, which its own first try passed.
    return ctx.idempotency.handle(c, orgId, body, () => {
      assertUrlFree(orgId, input.url);
      const now = iso(ctx.clock.now());
      const hook: WebhookEndpoint = {
        id: newId(),
        organizationId: orgId,
        url: input.url,
        enabled: input.enabled ?? true,
        event_types: input.event_types ?? [],
        secret: newWebhookSecret(),
        description: input.description ?? '',
        created_at: now,
        updated_at: now,
      };
      store.webhooks.set(hook.id, hook);
      return { status: 201, body: webhookView(hook, true) };
    });
  });

  app.get('/', (c) => {
    const hooks = store.webhooksOf(c.get('organizationId')).sort((a, b) => a.created_at.localeCompare(b.created_at));
    return c.json(paginate(c.req.url, hooks.map((h) => webhookView(h))));
  });

  app.get('/:id', (c) => c.json(webhookView(store.webhook(c.get('organizationId'), c.req.param('id')))));

  app.patch('/:id', async (c) => {
    const orgId = c.get('organizationId');
    const hook = store.webhook(orgId, c.req.param('id'));
    const { body } = await readJsonObject(c);
    const input = validate(updateBody, body);
    if (input.url !== undefined) assertUrlFree(orgId, input.url, hook.id);
    if (input.url !== undefined) hook.url = input.url;
    if (input.enabled !== undefined) hook.enabled = input.enabled;
    if (input.event_types !== undefined) hook.event_types = input.event_types;
    if (input.description !== undefined) hook.description = input.description;
    hook.updated_at = iso(ctx.clock.now());
    return c.json(webhookView(hook));
  });

  app.delete('/:id', (c) => {
    const hook = store.webhook(c.get('organizationId'), c.req.param('id'));
    store.webhooks.delete(hook.id);
    return c.body(null, 204);
  });

  // Spec 4.5: a new signing secret, returned once; later attempts (retries included) use it.
  app.post('/:id/rotate-secret', (c) => {
    const hook = store.webhook(c.get('organizationId'), c.req.param('id'));
    hook.secret = newWebhookSecret();
    hook.updated_at = iso(ctx.clock.now());
    return c.json(webhookView(hook, true));
  });

  // Spec 4.5 + 2.11: every attempt, newest first; optional `event_id` and `status` filters.
  app.get('/:id/deliveries', (c) => {
    const hook = store.webhook(c.get('organizationId'), c.req.param('id'));
    const eventId = c.req.query('event_id');
    const status = c.req.query('status');
    if (status !== undefined && status !== 'succeeded' && status !== 'failed') throw invalidInput('Unknown status; use one of succeeded, failed.', 'status');
    const records = [...(store.deliveries.get(hook.id) ?? [])]
      .reverse()
      .filter((d) => (eventId === undefined || d.event_id === eventId) && (status === undefined || d.status === status));
    return c.json(paginate(c.req.url, records));
  });

  app.all('/', methodNotAllowed);
  app.all('/:id', methodNotAllowed);
  app.all('/:id/rotate-secret', methodNotAllowed);
  app.all('/:id/deliveries', methodNotAllowed);
  return app;
}
