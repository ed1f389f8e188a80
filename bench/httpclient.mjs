#!/usr/bin/env node
// The receiver's outbound HTTP client against Node's global fetch (undici): CPU per request and
// peak RSS of a process that makes the requests the result reads make (GET with a bearer key,
// a 1.5 KB JSON answer, 4 in flight), against a server in this (the parent) process.
//
//   npm run build && node bench/httpclient.mjs [--requests 20000] [--rounds 3]
//
// Each client runs in its own child process (`node bench/httpclient.mjs --child <client> <url> <n>`),
// so the RSS and CPU measured are the client's alone; the two clients alternate, `--rounds` times.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const CLIENTS = ['fetch', 'node'];
const IN_FLIGHT = 4;

const vmKb = (field) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync('/proc/self/status', 'utf8'))[1]);

async function child(client, url, n) {
  const headers = { authorization: 'Bearer sk-bench.key', accept: 'application/json', 'user-agent': 'bench' };
  let one;
  if (client === 'fetch') {
    one = async () => {
      const res = await fetch(url, { headers, redirect: 'manual' });
      return (await res.text()).length;
    };
  } else {
    const { createNodeHttpClient } = await import(join(root, 'dist/http/httpClient.js'));
    const http = createNodeHttpClient();
    one = async () => {
      const res = await http.request(url, { method: 'GET', headers, maxBodyBytes: 5 * 1024 * 1024 });
      return res.body.kind === 'text' ? res.body.text.length : -1;
    };
  }
  const idleRssKb = vmKb('VmRSS');
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  let bytes = 0;
  for (let i = 0; i < n; i += IN_FLIGHT) {
    const got = await Promise.all(Array.from({ length: Math.min(IN_FLIGHT, n - i) }, one));
    bytes += got.reduce((a, b) => a + b, 0);
  }
  const cpu = process.cpuUsage(cpu0);
  const wallMs = performance.now() - t0;
  process.stdout.write(
    `${JSON.stringify({ client, requests: n, bytes, cpuUsPerRequest: (cpu.user + cpu.system) / n, wallMs, idleRssMb: idleRssKb / 1024, peakRssMb: vmKb('VmHWM') / 1024 })}\n`,
  );
}

function runChild(client, url, n) {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [fileURLToPath(import.meta.url), '--child', client, url, String(n)], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    p.stdout.on('data', (d) => (out += d));
    const timer = setTimeout(() => p.kill('SIGKILL'), 120_000);
    p.on('exit', (code) => {
      clearTimeout(timer);
      if (code !== 0) return reject(new Error(`${client} child exited ${code}`));
      resolve(JSON.parse(out));
    });
  });
}

async function main() {
  const { values } = parseArgs({ options: { requests: { type: 'string', default: '20000' }, rounds: { type: 'string', default: '3' } } });
  if (!existsSync(join(root, 'dist/http/httpClient.js'))) {
    console.error('dist/ is missing: run `npm run build` first');
    process.exit(1);
  }
  const body = JSON.stringify({ status: 'completed', data: 'x'.repeat(1500) });
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(body);
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${server.address().port}/api/v2/applications/a/interview`;
  const n = Number(values.requests);
  const results = [];
  for (let round = 0; round < Number(values.rounds); round++) {
    for (const client of CLIENTS) {
      const r = await runChild(client, url, n);
      if (r.bytes !== n * body.length) throw new Error(`${client}: read ${r.bytes} bytes, expected ${n * body.length}`);
      results.push(r);
    }
  }
  server.close();
  const fmt = (x, d = 1) => x.toFixed(d);
  console.log(`| client | round | CPU µs/request | wall s | idle RSS MB | peak RSS MB |`);
  console.log(`|---|---|---|---|---|---|`);
  results.forEach((r, i) =>
    console.log(`| ${r.client} | ${Math.floor(i / CLIENTS.length) + 1} | ${fmt(r.cpuUsPerRequest)} | ${fmt(r.wallMs / 1000, 2)} | ${fmt(r.idleRssMb)} | ${fmt(r.peakRssMb)} |`),
  );
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const of = (client, key) => median(results.filter((r) => r.client === client).map((r) => r[key]));
  console.log(
    `\nmedians: CPU per request fetch ${fmt(of('fetch', 'cpuUsPerRequest'))} µs, node ${fmt(of('node', 'cpuUsPerRequest'))} µs (fetch/node ${fmt(of('fetch', 'cpuUsPerRequest') / of('node', 'cpuUsPerRequest'), 2)}x); ` +
      `peak RSS fetch ${fmt(of('fetch', 'peakRssMb'))} MB, node ${fmt(of('node', 'peakRssMb'))} MB (${n} requests, ${IN_FLIGHT} in flight)`,
  );
  console.log(`BENCH_JSON ${JSON.stringify({ requests: n, inFlight: IN_FLIGHT, results })}`);
}

if (process.argv[2] === '--child') await child(process.argv[3], process.argv[4], Number(process.argv[5]));
else await main();
