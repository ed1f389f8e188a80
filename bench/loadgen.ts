/**
 * Node load generator for bench/run.ts, run as its own process (never inside
 * the server under test). Two modes:
 * - open: requests are sent on a fixed schedule (rate/s), whatever the server
 *   does; latency is measured from each request's *scheduled* time, so a stall
 *   shows up in the percentiles instead of slowing the sender down
 *   (no coordinated omission).
 * - closed: `connections` senders, each sending its next request when the
 *   previous one is answered (what wrk does); the fallback when wrk is missing.
 * Deliveries are signed here, right before sending, with unique event ids.
 * Prints one line `BENCH_JSON {...}` on stdout.
 */
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { bodyOf, deliveryLine, headersOf, makeTemplates, signDeliveries, type Delivery, type SigningSecret } from './lib/deliveries.js';
import { summarize } from './lib/stats.js';

export interface LoadgenArgs {
  url: string;
  mode: 'open' | 'closed';
  rate: number;
  connections: number;
  warmupS: number;
  durationS: number;
  /** closed mode: cycle through a small pool (servers that do not dedupe); otherwise every id is sent once */
  wrap?: boolean;
  /**
   * open mode: write one line `<event id> <ack wall-clock ms> <event type>` per 2xx to this file at the end
   * (ack = the response's status line and headers received; wall clock = performance.timeOrigin + now(),
   * comparable with another process on the same host). Used by the fan-out measurement.
   */
  ackFile?: string;
  /** open mode: a file of application ids, one per line, one per delivery in order (the fan-out row's sandbox applications); random ids otherwise */
  applicationIdsFile?: string;
  /**
   * open mode: the compiled bench/opengen/opengen.c to send with (this process signs the deliveries,
   * hands them over through a pipe, waits, and summarizes its results); without it, node:http's client sends.
   */
  opengen?: string;
  /** a request not answered this long after it was written counts as a socket error (default 10,000: the service's timeout) */
  timeoutMs?: number;
}

const args = JSON.parse(process.argv[2] ?? '{}') as LoadgenArgs;
const secretText = process.env.BENCH_SECRET ?? '';
const secret: SigningSecret = { secret: secretText, key: Buffer.from(secretText.replace(/^whsec_/, ''), 'base64') };
const { hostname, port } = new URL(args.url);
const timeoutMs = args.timeoutMs ?? 10_000;
const templates = makeTemplates();
const agent = new Agent({ keepAlive: true, maxSockets: args.connections, maxFreeSockets: args.connections });

interface Outcome {
  status: number;
  accepted: boolean;
  /** wall-clock ms when the status line and headers arrived */
  ackAt: number;
}

function send(d: Delivery): Promise<Outcome> {
  const body = bodyOf(templates, d);
  return new Promise((resolve) => {
    const req = request(
      { agent, host: hostname, port, method: 'POST', path: '/webhooks', headers: { ...headersOf(d), 'content-length': String(Buffer.byteLength(body)) } },
      (res) => {
        const ackAt = performance.timeOrigin + performance.now();
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, accepted: text.includes('"accepted"'), ackAt }));
        res.on('error', () => resolve({ status: 0, accepted: false, ackAt }));
      },
    );
    req.setTimeout(timeoutMs, () => req.destroy(new Error('timeout')));
    req.on('error', () => resolve({ status: 0, accepted: false, ackAt: 0 }));
    req.end(body);
  });
}

interface Tally {
  latencies: number[];
  s2xx: number;
  non2xx: number;
  socketErrors: number;
  accepted: number;
}
const newTally = (): Tally => ({ latencies: [], s2xx: 0, non2xx: 0, socketErrors: 0, accepted: 0 });
function record(t: Tally, o: Outcome, latencyMs: number): void {
  t.latencies.push(latencyMs);
  if (o.status === 0) t.socketErrors++;
  else if (o.status >= 200 && o.status < 300) t.s2xx++;
  else t.non2xx++;
  if (o.accepted) t.accepted++;
}
const summary = (t: Tally) => ({ ...summarize(t.latencies), s2xx: t.s2xx, non2xx: t.non2xx, socketErrors: t.socketErrors, accepted: t.accepted });

/**
 * The open loop's outcomes, whichever sender: warm-up and measured tallies, and with `ackFile`
 * one line `<event id> <ack wall-clock ms> <event type>[ warmup]` per 2xx, written by `finish()`.
 */
function openTallies(deliveries: Delivery[], warmupCount: number) {
  const warm = newTally();
  const measured = newTally();
  const acks: string[] = [];
  return {
    add(i: number, o: Outcome, latencyMs: number): void {
      record(i < warmupCount ? warm : measured, o, latencyMs);
      if (args.ackFile && o.status >= 200 && o.status < 300) {
        const d = deliveries[i]!;
        acks.push(`${d.eventId} ${o.ackAt.toFixed(3)} ${templates[d.type]!.eventType}${i < warmupCount ? ' warmup' : ''}`);
      }
    },
    finish() {
      if (args.ackFile) writeFileSync(args.ackFile, acks.length > 0 ? `${acks.join('\n')}\n` : '');
      return { warmup: summary(warm), measured: summary(measured) };
    },
  };
}

async function openLoop() {
  const total = Math.ceil(args.rate * (args.warmupS + args.durationS));
  const warmupCount = Math.ceil(args.rate * args.warmupS);
  const applicationIds = args.applicationIdsFile ? readFileSync(args.applicationIdsFile, 'utf8').split('\n').filter(Boolean) : undefined;
  const deliveries = signDeliveries(secret, templates, total, applicationIds);
  if (args.opengen) return openLoopC(args.opengen, deliveries, warmupCount);
  const tallies = openTallies(deliveries, warmupCount);
  const interval = 1000 / args.rate;
  let next = 0;
  let inFlight = 0;
  let maxInFlight = 0;
  let maxLagMs = 0;
  let lastSendAt = 0;
  const sendLags: number[] = [];
  const inflight: Promise<void>[] = [];
  const start = performance.now() + 20;
  await new Promise<void>((resolve) => {
    const tick = () => {
      const now = performance.now();
      while (next < total && start + next * interval <= now) {
        const i = next++;
        const scheduled = start + i * interval;
        maxLagMs = Math.max(maxLagMs, now - scheduled);
        if (i >= warmupCount) sendLags.push(now - scheduled);
        lastSendAt = now;
        inFlight++;
        maxInFlight = Math.max(maxInFlight, inFlight);
        inflight.push(
          send(deliveries[i]!).then((o) => {
            inFlight--;
            tallies.add(i, o, performance.now() - scheduled);
          }),
        );
      }
      if (next >= total) return resolve();
      // Timers fire about every 1 ms; the send lag this adds is in maxSendLagMs and in the floor measured against raw node:http.
      setTimeout(tick, Math.max(0, Math.min(1, start + next * interval - performance.now())));
    };
    setTimeout(tick, 20);
  });
  await Promise.all(inflight);
  const outcomes = tallies.finish();
  // To the last send plus one interval (n sends on time span n intervals): the rate the sender kept,
  // not stretched by the time the last answers took.
  const sendS = (lastSendAt - start + interval) / 1000;
  return {
    mode: 'open',
    generator: 'node',
    targetRate: args.rate,
    sent: total,
    sentRate: total / sendS,
    maxInFlight,
    maxSendLagMs: Math.round(maxLagMs * 1000) / 1000,
    sendLagMs: summarize(sendLags),
    ...outcomes,
  };
}

/** The same open loop, sent by the C generator (bench/opengen/opengen.c describes its input and output). */
async function openLoopC(binary: string, deliveries: Delivery[], warmupCount: number) {
  const input =
    templates.map((t) => `${t.parts.join('\t')}\n`).join('') +
    '--\n' +
    deliveries.map((d) => `${deliveryLine(d)}\n`).join('');
  const out = await new Promise<Buffer>((resolve, reject) => {
    const child = spawn(binary, [hostname, port, String(args.rate), String(timeoutMs), String(args.connections)], { stdio: ['pipe', 'pipe', 'pipe'] });
    // Stopped with this process (the bench's end on a signal stops its loadgen with SIGTERM):
    // left alone, it went on sending to a port nothing listened on for the rest of its period.
    process.once('SIGTERM', () => {
      child.kill('SIGTERM');
      process.exit(143);
    });
    const chunks: Buffer[] = [];
    let err = '';
    child.stdout.on('data', (c: Buffer) => chunks.push(c));
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    child.once('error', reject);
    child.once('close', (code) => (code === 0 ? resolve(Buffer.concat(chunks)) : reject(new Error(`opengen exited with ${code}: ${err}`))));
    // If opengen exits early (bad arguments), its stderr is the message, not an EPIPE here.
    child.stdin.on('error', () => undefined);
    child.stdin.end(input);
  });
  const REC = 32;
  const records = deliveries.length * REC;
  if (out.length <= records) throw new Error(`opengen wrote ${out.length} bytes for ${deliveries.length} deliveries`);
  const run = JSON.parse(out.subarray(records).toString()) as { sent: number; answered: number; elapsed_s: number; send_s: number; max_in_flight: number; max_send_lag_ms: number };
  const tallies = openTallies(deliveries, warmupCount);
  const sendLags: number[] = [];
  for (let i = 0; i < deliveries.length; i++) {
    const at = i * REC;
    const o: Outcome = { status: out.readInt32LE(at), accepted: out.readInt32LE(at + 4) === 1, ackAt: out.readDoubleLE(at + 16) };
    tallies.add(i, o, out.readDoubleLE(at + 8));
    if (i >= warmupCount) sendLags.push(out.readDoubleLE(at + 24));
  }
  return {
    mode: 'open',
    generator: 'c',
    targetRate: args.rate,
    sent: run.sent,
    sentRate: run.sent / run.send_s,
    maxInFlight: run.max_in_flight,
    maxSendLagMs: run.max_send_lag_ms,
    sendLagMs: summarize(sendLags),
    ...tallies.finish(),
  };
}

async function closedLoop() {
  // Sized for the fastest server we drive; if it runs out the run says so.
  const capacity = args.wrap ? 20_000 : Math.ceil((args.rate > 0 ? args.rate : 60_000) * (args.warmupS + args.durationS));
  const deliveries = signDeliveries(secret, templates, capacity);
  let next = 0;
  let exhausted = 0;
  const warm = newTally();
  const measured = newTally();
  const t0 = performance.now();
  const warmEnd = t0 + args.warmupS * 1000;
  const end = warmEnd + args.durationS * 1000;
  let measuredFirst = 0;
  const worker = async () => {
    for (;;) {
      const startedAt = performance.now();
      if (startedAt >= end) return;
      if (next >= deliveries.length) {
        if (args.wrap) next = 0;
        else {
          exhausted++;
          return;
        }
      }
      const o = await send(deliveries[next++]!);
      const now = performance.now();
      if (startedAt >= warmEnd && now <= end) {
        if (measuredFirst === 0) measuredFirst = startedAt;
        record(measured, o, now - startedAt);
      } else record(warm, o, now - startedAt);
    }
  };
  await Promise.all(Array.from({ length: args.connections }, worker));
  const n = measured.latencies.length;
  return {
    mode: 'closed',
    requests: n,
    rps: n / args.durationS,
    exhausted,
    pool: deliveries.length,
    warmup: { s2xx: warm.s2xx, non2xx: warm.non2xx, socketErrors: warm.socketErrors, accepted: warm.accepted },
    measured: summary(measured),
  };
}

const result = args.mode === 'open' ? await openLoop() : await closedLoop();
agent.destroy();
process.stdout.write(`BENCH_JSON ${JSON.stringify(result)}\n`);
