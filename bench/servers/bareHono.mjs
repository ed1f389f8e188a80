// (a) of the ingest benchmark: a bare Hono endpoint on @hono/node-server that
// reads the request body and answers 204. Plain JS so nothing but Hono runs.
//
// BODY_READ=incoming (default) reads the body from the Node request
// (c.env.incoming), exactly as the receiver does (src/ingest/readBody.ts), so
// the ratio measures the receiver's own work. BODY_READ=web uses
// c.req.arrayBuffer(): @hono/node-server 1.x read it through a web-stream
// Request (several times slower here); 2.x reads the Node request directly.
// run.ts reports it for reference. The same @hono/node-server as the
// receiver's (this package's node_modules), so the ratio compares like with like.
import { serve } from '@hono/node-server';
import { Hono } from 'hono';

const viaWeb = process.env.BODY_READ === 'web';
const readIncoming = (req) =>
  new Promise((resolve, reject) => {
    const chunks = [];
    req.on('data', (d) => chunks.push(d));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });

const app = new Hono();
app.post('/webhooks', async (c) => {
  if (viaWeb) await c.req.arrayBuffer();
  else await readIncoming(c.env.incoming);
  return c.body(null, 204);
});
app.get('/healthz', (c) => c.text('ok'));
const server = serve({ fetch: app.fetch, port: Number(process.env.PORT), hostname: '127.0.0.1' }, () => {
  process.stdout.write('listening\n');
});
server.keepAliveTimeout = 65_000;
process.on('SIGTERM', () => server.close(() => process.exit(0)));
