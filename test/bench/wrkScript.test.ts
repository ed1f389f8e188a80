/**
 * bench/wrk/deliveries.lua driven by the real wrk (through bench/lib/wrk.ts, as bench/run.ts
 * drives it) against a server on 127.0.0.1 that answers a few requests and then holds the next
 * one: what the script reports must match what the server saw. Skipped where wrk is missing.
 */
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { makeTemplates, newSigningSecret } from '../../bench/lib/deliveries.js';
import { runWrk, wrkAvailable, writePool } from '../../bench/lib/wrk.js';
import { ROOT } from '../helpers/childServer.js';
import { tempDir } from '../helpers/receiver.js';

const tmp = tempDir('wrk-script-test-');
afterAll(() => tmp.cleanup());
let server: Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((r) => server?.close(r) ?? r(undefined));
  server = undefined;
});

describe.skipIf(wrkAvailable() === null)('wrk/deliveries.lua', () => {
  it('sends the first delivery of the pool, and counts in flight only what wrk wrote', async () => {
    const answered = 5;
    const seen: string[] = [];
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => {
        seen.push(/"id":"(evt_[^"]+)"/.exec(body)?.[1] ?? '?');
        // The first `answered` requests get an answer; the next one is held until wrk stops.
        if (seen.length <= answered) {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ outcome: 'accepted', id: 'evt_x' }));
        }
      });
    });
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', () => r()));
    const { port } = server.address() as AddressInfo;
    const pool = await writePool(join(tmp.dir, 'pool'), newSigningSecret(), makeTemplates(), 1, 50, port);
    const shard = readFileSync(join(pool, 'shard-1.tsv'), 'utf8').split('\n').filter(Boolean).map((l) => l.split('\t')[3]!);

    const r = await runWrk({ url: `http://127.0.0.1:${port}`, luaScript: join(ROOT, 'bench/wrk/deliveries.lua'), poolDir: pool, wrap: false, threads: 1, connections: 1, durationS: 1, cwd: ROOT });

    expect(r.status2xx).toBe(answered);
    expect(r.accepted).toBe(answered);
    expect(r.exhausted).toBe(0);
    // One connection: the one request in flight at the stop is the held one, the server's last.
    expect(seen).toHaveLength(answered + 1);
    expect(r.unanswered).toBe(1);
    // Sent in pool order from its first line, each once.
    expect(seen).toEqual(shard.slice(0, answered + 1));
  }, 30_000);
});
