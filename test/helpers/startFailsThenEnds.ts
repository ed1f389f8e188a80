/**
 * createApp, then a start() that fails (METRICS_PORT in use) and nothing more: the process must
 * end by itself, as it did before the file watch's timer. For test/ingest/startFailure.test.ts.
 */
import { once } from 'node:events';
import { createServer, type AddressInfo } from 'node:net';
import { createApp } from '../../src/app.js';
import { loadConfig } from '../../src/config/loadConfig.js';
import { createLogger } from '../../src/observability/logger.js';

const blocker = createServer().listen(0, '127.0.0.1');
await once(blocker, 'listening');
const config = loadConfig({ ...process.env, METRICS_PORT: String((blocker.address() as AddressInfo).port) });
const app = createApp({ config, logger: createLogger('silent') });
await app.start().then(
  () => process.stdout.write('started\n'),
  (err: Error) => process.stdout.write(`start failed: ${err.message}\n`),
);
blocker.close();
