import { Hono, type Context, type ErrorHandler } from 'hono';

/** An app that serves GET /metrics only, on a port of its own (`portVar` names it in the 404). */
export function metricsOnlyApp(route: (c: Context) => Promise<Response>, portVar: string, onError: ErrorHandler): Hono {
  const h = new Hono();
  h.get('/metrics', route);
  h.notFound((c) => c.json({ error: 'not_found', message: `no route for ${c.req.method} ${c.req.path} (${portVar} serves GET /metrics only)` }, 404));
  h.onError(onError);
  return h;
}
