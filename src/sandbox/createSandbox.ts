import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { mergeChaos, NO_CHAOS, type ChaosOptions } from './chaos.js';
import { systemClock, type Clock } from './clock.js';
import type { SandboxContext } from './context.js';
import { createControl, type SandboxControl } from './control.js';
import { DEFAULT_ORGANIZATIONS, type OrganizationSeed } from './defaultOrganizations.js';
import { ATTEMPT_TIMEOUT_MS } from './delivery/backoff.js';
import { Dispatcher, type SandboxLogger } from './delivery/dispatcher.js';
import { DeliveryScheduler } from './delivery/scheduler.js';
import { createDirectFetch } from './delivery/directFetch.js';
import { createRandom } from './fakeData.js';
import { errorResponse, notFound } from './http/apiError.js';
import { requireApiKey, type AuthEnv } from './http/auth.js';
import { applicationsRoutes } from './http/applicationsRoutes.js';
import { controlRoutes } from './http/controlRoutes.js';
import { DEFAULT_CV_MAX_BYTES } from './cvFile.js';
import { hiringTeamRoutes } from './http/hiringTeamRoutes.js';
import { interviewConfigRoutes } from './http/interviewConfigRoutes.js';
import { organizationRoutes } from './http/organizationRoutes.js';
import { FaultInjector } from './http/faults.js';
import { IdempotencyStore } from './http/idempotency.js';
import { jobsRoutes } from './http/jobsRoutes.js';
import { ScoringReads } from './http/scoringReads.js';
import { v1InterviewRoutes, v2ScoringRoutes } from './http/scoringRoutes.js';
import { webhooksRoutes } from './http/webhooksRoutes.js';
import { newId } from './ids.js';
import { addMember, createOrganizationSettings, defaultMembers } from './organization.js';
import { Lifecycle } from './scenarios/lifecycle.js';
import { SandboxStore } from './store.js';

export interface SandboxOptions {
  /** Default: two organizations with fixed keys (see defaultOrganizations.ts). */
  organizations?: readonly OrganizationSeed[];
  /** Default: the system clock. Pass `createManualClock()` to drive time with `control.advance`. */
  clock?: Clock;
  /** Real waits (retry backoff, chaos delay, result delay, read delay) are divided by this. Default 1. */
  timeFactor?: number;
  /** How deliveries are sent. Default: node:http with agents of its own, never through a proxy (directFetch.ts). */
  fetch?: typeof fetch;
  logger?: SandboxLogger;
  chaos?: Partial<ChaosOptions>;
  /** Nominal delay between a *.completed event and its result becoming readable. Default 0. */
  resultDelayMs?: number;
  /** Nominal time every scoring read waits before it is answered (a slow service). Default 0. */
  readDelayMs?: number;
  /** Per-attempt timeout (spec 6.3: 10 s). Not scaled by timeFactor. */
  attemptTimeoutMs?: number;
  /** Seed for fake candidates and scores. Default 1, so runs are reproducible. */
  seed?: number;
  /** Source of randomness for chaos decisions. Default Math.random. */
  random?: () => number;
  /** Largest CV upload accepted, in bytes (spec 8: "not shown"). Default 10 MiB; larger is 413 `file_too_large`. */
  cvMaxBytes?: number;
}

export interface Sandbox {
  app: Hono;
  control: SandboxControl;
  /** Listens on `port` (default 0: an ephemeral port) and `host` (default 127.0.0.1). */
  start(port?: number, host?: string): Promise<{ url: string; port: number }>;
  /** Stops deliveries (in-flight attempts are aborted) and closes the server, for good: `start()` then rejects. */
  stop(): Promise<void>;
}

/** Spec 2.4, 2.5: the two settings singletons are created with each organization; 2.8: its members. */
function seedOrganizations(store: SandboxStore, seeds: readonly OrganizationSeed[], now: number): void {
  if (seeds.length === 0) throw new Error('createSandbox: at least one organization is needed');
  for (const seed of seeds) {
    const id = seed.id ?? newId();
    store.organizations.set(id, { id, name: seed.name });
    createOrganizationSettings(store, id, now);
    for (const member of seed.members ?? defaultMembers(seed.name)) addMember(store, id, member, now);
  }
}

export function createSandbox(opts: SandboxOptions = {}): Sandbox {
  const timeFactor = opts.timeFactor ?? 1;
  if (!Number.isFinite(timeFactor) || timeFactor <= 0) throw new Error(`createSandbox: timeFactor must be a positive number, got ${timeFactor}`);
  const clock = opts.clock ?? systemClock;
  const random = opts.random ?? Math.random;
  const settings = {
    chaos: mergeChaos(NO_CHAOS, opts.chaos ?? {}),
    resultDelayMs: Math.max(0, opts.resultDelayMs ?? 0),
    readDelayMs: Math.max(0, opts.readDelayMs ?? 0),
  };
  const store = new SandboxStore();
  const seeds = opts.organizations ?? DEFAULT_ORGANIZATIONS;
  seedOrganizations(store, seeds, clock.now());
  const defaultOrganizationId = (): string => {
    const first = store.organizations.keys().next();
    if (first.done === true) throw new Error('no organization');
    return first.value;
  };

  const scheduler = new DeliveryScheduler(clock, timeFactor, () => settings.chaos, (err) =>
    opts.logger?.warn({ err }, 'delivery task failed'),
  );
  // Deliveries never go through a proxy (NODE_USE_ENV_PROXY=1 would send the global fetch's there).
  const direct = createDirectFetch();
  const dispatcher = new Dispatcher({
    store,
    clock,
    scheduler,
    chaos: () => settings.chaos,
    fetch: opts.fetch ?? direct.fetch,
    random,
    attemptTimeoutMs: opts.attemptTimeoutMs ?? ATTEMPT_TIMEOUT_MS,
    logger: opts.logger,
  });
  const lifecycle = new Lifecycle({
    store,
    clock,
    dispatcher,
    random: createRandom(opts.seed ?? 1),
    resultDelayMs: () => settings.resultDelayMs,
    timeFactor,
    defaultOrganizationId,
    schedule: (lane, delayMs, run) => void scheduler.schedule(lane, delayMs, run),
  });
  const faults = new FaultInjector();
  const reads = new ScoringReads(() => settings.readDelayMs / timeFactor);
  const control = createControl({ store, clock, lifecycle, scheduler, faults, reads, settings, defaultOrganizationId });
  [...store.organizations.keys()].forEach((orgId, i) => {
    const keys = seeds[i]?.apiKeys ?? [];
    if (keys.length === 0) control.addApiKey(orgId, { name: 'default' });
    keys.forEach((key, k) => {
      const holder = store.keys.get(key);
      // Named by its first segment only: the rest is the secret.
      if (holder !== undefined) throw new Error(`createSandbox: the API key starting ${key.split('.')[0]} is seeded twice (organizations ${holder.organizationId} and ${orgId}); a key belongs to one organization`);
      control.addApiKey(orgId, { key, name: `key ${k + 1}` });
    });
  });

  const cvMaxBytes = opts.cvMaxBytes ?? DEFAULT_CV_MAX_BYTES;
  if (!Number.isInteger(cvMaxBytes) || cvMaxBytes < 1) throw new Error(`createSandbox: cvMaxBytes must be a positive integer, got ${cvMaxBytes}`);
  const ctx: SandboxContext = { store, clock, idempotency: new IdempotencyStore(), faults, lifecycle, reads, cvMaxBytes };
  const app = new Hono<AuthEnv>();
  app.onError((err, c) => errorResponse(c, err));
  app.notFound((c) => errorResponse(c, notFound()));
  app.route('/_sandbox', controlRoutes(control));
  app.use('/api/*', requireApiKey(store, clock));
  app.route('/api/v2/jobs', jobsRoutes(ctx));
  app.route('/api/v2/jobs', interviewConfigRoutes(ctx));
  app.route('/api/v2/jobs', hiringTeamRoutes(ctx));
  app.route('/api/v2/applications', applicationsRoutes(ctx));
  app.route('/api/v2/applications', v2ScoringRoutes(ctx));
  app.route('/api/v2/organization', organizationRoutes(ctx));
  app.route('/api/v2/webhooks', webhooksRoutes(ctx));
  app.route('/api/v1/applications', v1InterviewRoutes(ctx));

  let server: Server | undefined;
  // stop() ends the scheduler and aborts the dispatcher for good: a sandbox started again
  // answered the API but never sent a webhook, each delivery left pending for ever.
  let stopped = false;
  /**
   * app.fetch, but a request whose URL has a host the URL parser rewrites or refuses (`999.1.1.1`,
   * `127.1`) is answered as @hono/node-server 1.x answered it, 400 with no body: 2.x makes such a
   * URL without the parser, and the routes' `new URL(c.req.url)` answered 500. The sandbox shares
   * no code with the receiver (test/sandbox/boundaries.test.ts), so it checks with the parser
   * itself, on every request: the sandbox is not on a hot path.
   */
  const servedFetch: typeof app.fetch = (req, env, ctx) => {
    const afterScheme = req.url.indexOf('//') + 2;
    const hostEnd = req.url.indexOf('/', afterScheme);
    const given = req.url.slice(afterScheme, hostEnd === -1 ? undefined : hostEnd).toLowerCase();
    let parsed: string | null;
    try {
      parsed = new URL(req.url).host;
    } catch {
      parsed = null;
    }
    // URL.host drops a default port (:80) and a trailing ':' with no port; so may the given host.
    const same = parsed !== null && (parsed === given || parsed === given.replace(/:(80)?$/, ''));
    return same ? app.fetch(req, env, ctx) : new Response(null, { status: 400 });
  };
  return {
    app: app as unknown as Hono,
    control,
    start: (port = 0, host = '127.0.0.1') =>
      new Promise((resolve, reject) => {
        if (server !== undefined) return reject(new Error('sandbox already started'));
        if (stopped) return reject(new Error('sandbox stopped: it cannot send webhooks any more; make a new one with createSandbox()'));
        const s = serve({ fetch: servedFetch, port, hostname: host }, (info: AddressInfo) => {
          const shownHost = host.includes(':') ? `[${host}]` : host;
          resolve({ url: `http://${shownHost}:${info.port}`, port: info.port });
        }) as Server;
        s.once('error', reject);
        server = s;
      }),
    stop: async () => {
      stopped = true;
      scheduler.stop();
      dispatcher.stop();
      direct.close();
      reads.stop();
      const s = server;
      server = undefined;
      if (s === undefined) return;
      await new Promise<void>((resolve) => {
        s.close(() => resolve());
        s.closeAllConnections();
      });
    },
  };
}
