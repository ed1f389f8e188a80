/**
 * The two sink measurements of issue 8, called by run.ts (`--fanout`,
 * `--replay`, and in the default run with smaller sizes):
 *
 * Fan-out latency (target: p50 < 50 ms). The built receiver (production
 * settings, default WORKER_CONCURRENCY) with a CONFIG_FILE holding one `file`
 * sink, reading its results from the project's sandbox (lib/sandbox.ts; its own
 * process), whose applications have their interview and CV evaluation complete
 * before the load, so it answers each read at once. Each delivery names its
 * own sandbox application: a second event for one application would wait out
 * the 30 s poll spacing (spec 8). bench/loadgen.ts sends signed
 * deliveries open-loop (default 200/s for 1 s warm-up + 10 s, the usual event
 * mix: 1/3 of them make the worker GET a result) and writes each 2xx's
 * wall-clock arrival time per event id (`ackFile`). This process tails the
 * sink's NDJSON file every 2 ms and stamps each line's `id` when it is read.
 * Reported: landed - acked, p50/p99/max, over the measured (post warm-up)
 * events, and how many of the acknowledged events landed.
 * The file sink fsyncs each line before the delivery counts (README "Sink
 * kinds"); the line is visible to the tail right after its write, so the
 * figure is the time to the write, plus at most the 2 ms poll.
 *
 * Replay throughput (target: >= 5,000 events/s). `replay --sink` only queues
 * a delivery per settled event in the database; the running receiver's sink
 * worker writes them (replay.ts; `--wait` polls until they are delivered).
 * So:
 *   1. a receiver with workers off ingests N events (open loop); it is
 *      stopped; a receiver with workers on and no sinks then processes that
 *      backlog until all N are `settled` and no job is open (reported as
 *      processing's own throughput and CPU per event); it is stopped;
 *   2. a receiver is started on that database with a CONFIG_FILE naming a
 *      new file sink (a sink added later gets nothing by itself);
 *   3. `node dist/cli/main.js replay --all --sink <name> --wait --json` runs
 *      as a child; the clock starts at its spawn and stops when the sink file
 *      holds N lines. Reported: N / seconds, the CLI's own queueing time
 *      (first to last sink job created_at) and its exit time.
 */
import { spawn } from 'node:child_process';
import { closeSync, openSync, readSync, fstatSync, writeFileSync, readFileSync, existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { freePort, mb, RECEIVER_NODE_FLAGS, runLoadgen, startServer, tracked, type Server } from './processes.js';
import { cpuBetween, sampleCpu } from './cpu.js';
import { startBenchSandbox, type BenchSandbox } from './sandbox.js';
import { stagesOf, type StageTimes } from './stages.js';
import { summarize } from './stats.js';

export interface Pending {
  status: 'not_enabled' | 'missing_prerequisites';
  needs: string[];
}

export interface LaterContext {
  root: string;
  /** a scratch directory (removed by run.ts) */
  tmp: string;
  /** whsec_ secret the receiver verifies with; loadgen signs with it */
  secret: string;
  /** the hiring stub's URL (answers results at once) */
  stubUrl: string;
  log: (m: string) => void;
  /** write .cpuprofile files of the receiver (and CLI) to this directory */
  cpuProfDir?: string;
  /** the compiled open-loop C generator (bench/opengen/opengen.c), or null for node:http's client */
  opengen: string | null;
  /** the file sink's `concurrency` in CONFIG_FILE; unset = the kind's default (512 for file: two batches of 256) */
  sinkConcurrency?: number;
  /** `--receiver-env`: added to these rows' receivers' environments too (a row's own settings, such as its CONFIG_FILE, win) */
  receiverEnv?: Record<string, string>;
}

const fileSink = (ctx: LaterContext, name: string, path: string) => ({
  sinks: [{ name, type: 'file', path, ...(ctx.sinkConcurrency ? { concurrency: ctx.sinkConcurrency } : {}) }],
});

export interface FanOutResult {
  status: 'measured';
  /** Who answered the result reads: the sandbox (its own process, results complete beforehand). */
  upstream: 'sandbox';
  /** Seconds spent creating the sandbox's applications before the load (not measured). */
  setupS: number;
  sinkConcurrency: number | 'default';
  rate: number;
  warmupS: number;
  durationS: number;
  sinkLines: number;
  acked: number;
  measuredAcked: number;
  landed: number;
  notLanded: number;
  /** landed - acked, over measured events, ms */
  latencyMs: { p50: number; p99: number; p999: number; max: number; mean: number };
  /** same, for events that needed a result GET (interview.completed, cv_evaluation.completed) */
  withFetchMs: { p50: number; p99: number; max: number };
  withoutFetchMs: { p50: number; p99: number; max: number };
  ackP99Ms: number;
  /** The measured events' time by the receiver's own stamps: stored → settled (the fold), settled → delivered (the sink lane). */
  stages: StageTimes;
  peakRssMB: number;
  loadAvg: string;
}

/**
 * Processing from a backlog: N events stored with the workers off, then a receiver with workers
 * (default concurrency; the hiring stub answers at once) runs until every event is settled and no
 * job is open. Its clock and CPU run from the receiver's first answer to /healthz (the events it
 * settled before are left out) to the first poll that finds nothing left (every 20 ms).
 */
export interface ProcessingResult {
  events: number;
  /** events still unsettled when the window started (the rate and CPU are over these) */
  measuredEvents: number;
  /** events with a result to read (a fetch_result job each; a result already read may be reused) */
  fetching: number;
  seconds: number;
  eventsPerSecond: number;
  /** receiver CPU (all threads) per event */
  cpuUsPerEvent: number | null;
  /** its main thread, in percent of one core */
  mainPct: number | null;
  peakRssMB: number;
}

export interface ReplayResult {
  status: 'measured';
  sinkConcurrency: number | 'default';
  events: number;
  ingestRate: number;
  /** Step 1b: the stored events processed from a backlog, before the replay. */
  processing: ProcessingResult;
  /** spawn of the CLI until the sink file holds N lines */
  seconds: number;
  eventsPerSecond: number;
  /** CLI's queueing: first to last sink job created */
  queueS: number;
  /** spawn of the CLI until its first sink job's created_at (its start: node, modules, the database) */
  firstJobS: number;
  /** spawn of the CLI until the first line in the sink file */
  firstLineS: number;
  cliExitS: number;
  cliExit: number | null;
  cliSummary: unknown;
  lines: number;
  distinctIds: number;
  /** lines for an event id already written (at-least-once retries) */
  duplicateLines: number;
  linesCheck: 'ok' | 'FAILED';
  peakRssMB: number;
  loadAvg: string;
}

const loadAvg = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const wall = () => performance.timeOrigin + performance.now();

/** Polls an NDJSON file every `everyMs`, calling `onLine(id, readAtWallMs)` for each whole new line. */
function tail(path: string, everyMs: number, onLine: (id: string, at: number) => void) {
  let fd: number | null = null;
  let pos = 0;
  let rest = '';
  let lines = 0;
  let stopped = false;
  const buf = Buffer.alloc(1 << 20);
  const poll = () => {
    if (fd === null) {
      if (!existsSync(path)) return;
      fd = openSync(path, 'r');
    }
    for (;;) {
      const size = fstatSync(fd).size;
      if (size <= pos) return;
      const n = readSync(fd, buf, 0, Math.min(buf.length, size - pos), pos);
      if (n <= 0) return;
      pos += n;
      const at = wall();
      const text = rest + buf.toString('utf8', 0, n);
      const parts = text.split('\n');
      rest = parts.pop()!;
      for (const l of parts) {
        lines++;
        // The message starts with `{"id":"evt_...` (JSON.stringify of buildMessage's object, id first).
        const m = /^\{"id":"([^"]+)"/.exec(l);
        onLine(m ? m[1]! : ((JSON.parse(l) as { id: string }).id), at);
      }
    }
  };
  const loop = async () => {
    while (!stopped) {
      poll();
      await sleep(everyMs);
    }
  };
  const done = loop();
  return {
    get lines() {
      return lines;
    },
    poll,
    async stop() {
      if (stopped) return;
      stopped = true;
      await done;
      poll();
      if (fd !== null) closeSync(fd);
      fd = null;
    },
  };
}

async function startReceiver(ctx: LaterContext, label: string, dbPath: string, extra: Record<string, string>) {
  const port = await freePort();
  const logFd = openSync(join(ctx.tmp, `${label}.log`), 'w');
  const prof = ctx.cpuProfDir ? ['--cpu-prof', `--cpu-prof-dir=${ctx.cpuProfDir}`, `--cpu-prof-name=${label}.cpuprofile`] : [];
  const server = await startServer({
    name: `receiver ${label}`,
    args: [...RECEIVER_NODE_FLAGS, ...prof, 'dist/main.js'],
    cwd: ctx.root,
    port,
    stdout: logFd,
    env: {
      NODE_ENV: 'production',
      HOST: '127.0.0.1',
      PORT: String(port),
      DATABASE_PATH: dbPath,
      WEBHOOK_SECRET: ctx.secret,
      HIRING_API_URL: ctx.stubUrl,
      HIRING_API_KEY: 'sk-bench.benchkey',
      LOG_LEVEL: 'info',
      ...ctx.receiverEnv,
      ...extra,
    },
  });
  return {
    server,
    async stop(): Promise<{ peak: number }> {
      const peak = server.peakRss();
      const e = await server.stop(20_000);
      closeSync(logFd);
      if (e.code !== 0) ctx.log(`receiver ${label} exited with ${e.code ?? e.signal}: ${server.stderr.join('').slice(-1000)}`);
      return { peak: Math.max(peak, server.peakRss()) };
    },
  };
}

async function loadgen(ctx: LaterContext, url: string, a: Record<string, unknown>): Promise<{ measured: { p99: number; s2xx: number; non2xx: number; socketErrors: number }; warmup: { s2xx: number } }> {
  return (await runLoadgen(ctx.root, ctx.secret, { url, ...a, opengen: ctx.opengen })) as never;
}

const FETCHING = new Set(['interview.completed', 'cv_evaluation.completed']);

type FanOutOptions = { rate?: number; warmupS?: number; durationS?: number };

export async function measureFanOut(ctx: LaterContext, o: FanOutOptions = {}): Promise<FanOutResult> {
  const la = loadAvg();
  const sandbox = await startBenchSandbox(ctx.root);
  try {
    return await fanOutAgainst(ctx, sandbox, o, la);
  } finally {
    await sandbox.stop();
  }
}

/** The fan-out row, its results read from `sandbox` (started and stopped by the caller). */
async function fanOutAgainst(ctx: LaterContext, sandbox: BenchSandbox, o: FanOutOptions, la: string): Promise<FanOutResult> {
  const rate = o.rate ?? 200;
  const warmupS = o.warmupS ?? 1;
  const durationS = o.durationS ?? 10;
  const dir = join(ctx.tmp, 'fanout');
  mkdirSync(dir, { recursive: true });
  const sinkPath = join(dir, 'sink.ndjson');
  const configPath = join(dir, 'config.json');
  writeFileSync(configPath, JSON.stringify(fileSink(ctx, 'bench-file', sinkPath)));
  const applicationIdsFile = join(dir, 'applications.txt');
  const total = Math.ceil(rate * (warmupS + durationS));
  ctx.log(`fan-out: ${total} sandbox applications with a completed interview and CV evaluation`);
  const setupStart = Date.now();
  writeFileSync(applicationIdsFile, `${(await sandbox.readyApplications(total)).join('\n')}\n`);
  const setupS = (Date.now() - setupStart) / 1000;
  const r = await startReceiver(ctx, 'fanout', join(dir, 'receiver.db'), { CONFIG_FILE: configPath, HIRING_API_URL: sandbox.url, HIRING_API_KEY: sandbox.apiKey });
  const landed = new Map<string, number>();
  const t = tail(sinkPath, 2, (id, at) => {
    if (!landed.has(id)) landed.set(id, at);
  });
  let peak = 0;
  let gen;
  const ackFile = join(dir, 'acks.txt');
  try {
    ctx.log(`fan-out: ${rate}/s open loop, ${warmupS} s warm-up + ${durationS} s, file sink`);
    gen = await loadgen(ctx, r.server.url, { mode: 'open', rate, connections: 64, warmupS, durationS, ackFile, applicationIdsFile });
    const acks = readFileSync(ackFile, 'utf8').split('\n').filter(Boolean).map((l) => l.split(' '));
    // Bounded wait for the last deliveries.
    const deadline = Date.now() + 20_000;
    while (Date.now() < deadline && acks.some(([id]) => !landed.has(id!))) await sleep(20);
    await t.stop();
    peak = (await r.stop()).peak;
    const db = new BetterSqlite3(join(dir, 'receiver.db'), { readonly: true, fileMustExist: true });
    let stages: StageTimes;
    try {
      stages = stagesOf(db, 'bench-file', acks.filter(([, , , warm]) => !warm).map(([id]) => id!));
    } finally {
      db.close();
    }
    const all: number[] = [];
    const fetch: number[] = [];
    const plain: number[] = [];
    let measuredAcked = 0;
    let landedCount = 0;
    for (const [id, ackAt, type, warm] of acks) {
      const at = landed.get(id!);
      if (at !== undefined) landedCount++;
      if (warm) continue;
      measuredAcked++;
      if (at === undefined) continue;
      const d = at - Number(ackAt);
      all.push(d);
      (FETCHING.has(type!) ? fetch : plain).push(d);
    }
    const pick = (s: ReturnType<typeof summarize>) => ({ p50: s.p50, p99: s.p99, max: s.max });
    const s = summarize(all);
    return {
      status: 'measured',
      upstream: 'sandbox',
      setupS: Math.round(setupS * 10) / 10,
      sinkConcurrency: ctx.sinkConcurrency ?? 'default',
      rate,
      warmupS,
      durationS,
      sinkLines: t.lines,
      acked: acks.length,
      measuredAcked,
      landed: landedCount,
      notLanded: acks.length - landedCount,
      latencyMs: { p50: s.p50, p99: s.p99, p999: s.p999, max: s.max, mean: s.mean },
      withFetchMs: pick(summarize(fetch)),
      withoutFetchMs: pick(summarize(plain)),
      ackP99Ms: gen.measured.p99,
      stages,
      peakRssMB: mb(peak),
      loadAvg: la,
    };
  } finally {
    await t.stop().catch(() => undefined);
    if (r.server.proc.exitCode === null) await r.stop().catch(() => undefined);
  }
}

/** What processing still has to do with the n stored events (unsettled events, open jobs), read on one connection. */
function processingProbe(dbPath: string, n: number) {
  const db = new BetterSqlite3(dbPath, { readonly: true, fileMustExist: true });
  db.pragma('busy_timeout = 2000');
  const settled = db.prepare("SELECT COUNT(*) FROM event_processing WHERE state = 'settled'").pluck();
  const openJobs = db.prepare("SELECT COUNT(*) FROM jobs WHERE state IN ('pending', 'running')").pluck();
  const fetching = db.prepare('SELECT COUNT(*) FROM event_processing WHERE resource IS NOT NULL').pluck();
  return {
    // Settled first: it never goes back, so an event settled between the two reads cannot end the wait early.
    left: () => ({ unsettled: n - (settled.get() as number), openJobs: openJobs.get() as number }),
    fetching: () => fetching.get() as number,
    close: () => db.close(),
  };
}

export async function measureReplay(ctx: LaterContext, o: { events?: number; ingestRate?: number } = {}): Promise<ReplayResult> {
  const n = o.events ?? 20_000;
  const ingestRate = o.ingestRate ?? 2000;
  const dir = join(ctx.tmp, 'replay');
  mkdirSync(dir, { recursive: true });
  const dbPath = join(dir, 'receiver.db');

  // 1. Ingest N events with the workers off, then (1b) a receiver with workers processes that
  // backlog until all N are settled: processing's own throughput, measured apart from ingest
  // (the replay below needs settled events anyway).
  ctx.log(`replay: ingesting ${n} events at ${ingestRate}/s (workers off)`);
  const r0 = await startReceiver(ctx, 'replay-ingest', dbPath, { WORKER_CONCURRENCY: '0' });
  try {
    const g = await loadgen(ctx, r0.server.url, { mode: 'open', rate: ingestRate, connections: 128, warmupS: 0, durationS: n / ingestRate });
    const acked = g.warmup.s2xx + g.measured.s2xx;
    if (acked !== n) throw new Error(`replay: ${acked} of ${n} deliveries acknowledged (${g.measured.non2xx} non-2xx, ${g.measured.socketErrors} socket errors)`);
  } finally {
    await r0.stop();
  }
  ctx.log(`processing: a receiver with workers (default concurrency) processes the ${n} stored events until all are settled`);
  const r1 = await startReceiver(ctx, 'processing', dbPath, {});
  const probe = processingProbe(dbPath, n);
  // The window starts once the receiver answers (its workers start right after it listens): what
  // it settled before is left out of both the count and the CPU.
  const c0 = sampleCpu(r1.server.proc.pid!, null);
  const atStart = probe.left().unsettled;
  let measured: Omit<ProcessingResult, 'peakRssMB'>;
  let processingPeak = 0;
  try {
    const deadline = Date.now() + 300_000;
    let left = probe.left();
    while (left.unsettled > 0 || left.openJobs > 0) {
      if (r1.server.proc.exitCode !== null || r1.server.proc.signalCode !== null) {
        throw new Error(`processing: the receiver exited (${r1.server.proc.exitCode ?? r1.server.proc.signalCode}) with ${left.unsettled} of ${n} events unsettled: ${r1.server.stderr.join('').slice(-1000)}`);
      }
      if (Date.now() > deadline) throw new Error(`processing: ${n - left.unsettled} of ${n} events settled after 300 s (${left.openJobs} jobs open)`);
      await sleep(20);
      left = probe.left();
    }
    const c1 = sampleCpu(r1.server.proc.pid!, null);
    const share = cpuBetween(c0, c1, atStart);
    const seconds = (c1.at - c0.at) / 1000;
    measured = {
      events: n,
      measuredEvents: atStart,
      fetching: probe.fetching(),
      seconds: Math.round(seconds * 100) / 100,
      eventsPerSecond: Math.round(atStart / seconds),
      cpuUsPerEvent: share?.serverUsPerRequest ?? null,
      mainPct: share?.serverMainPct ?? null,
    };
  } finally {
    probe.close();
    processingPeak = (await r1.stop()).peak;
  }
  const processing: ProcessingResult = { ...measured, peakRssMB: mb(processingPeak) };

  // 2. A receiver with a new file sink, 3. the CLI replaying every event to it.
  const sinkName = 'replay-file';
  const sinkPath = join(dir, 'replay.ndjson');
  const configPath = join(dir, 'config.json');
  writeFileSync(configPath, JSON.stringify(fileSink(ctx, sinkName, sinkPath)));
  const la = loadAvg();
  const r2 = await startReceiver(ctx, 'replay-deliver', dbPath, { CONFIG_FILE: configPath });
  let lastLineAt = 0;
  let firstLineAt = 0;
  const ids = new Set<string>();
  // The clock stops at the line that completes the set of N distinct event ids (delivery is at least once:
  // a retried delivery may write a line twice; duplicates are counted and reported).
  const t = tail(sinkPath, 5, (id, at) => {
    if (ids.has(id)) return;
    ids.add(id);
    if (firstLineAt === 0) firstLineAt = at;
    lastLineAt = at;
  });
  try {
    ctx.log(`replay: node dist/cli/main.js replay --all --sink ${sinkName} --wait --json`);
    const prof = ctx.cpuProfDir ? ['--cpu-prof', `--cpu-prof-dir=${ctx.cpuProfDir}`, '--cpu-prof-name=replay-cli.cpuprofile'] : [];
    const start = wall();
    const cli = tracked(
      spawn(process.execPath, [...prof, 'dist/cli/main.js', 'replay', '--all', '--sink', sinkName, '--wait', '--json', '--timeout', '300'], {
        cwd: ctx.root,
        env: { PATH: process.env.PATH ?? '', DATABASE_PATH: dbPath, CONFIG_FILE: configPath, WEBHOOK_SECRET: ctx.secret, HIRING_API_URL: ctx.stubUrl, HIRING_API_KEY: 'sk-bench.benchkey' },
        stdio: ['ignore', 'pipe', 'pipe'],
      }),
    );
    let out = '';
    let err = '';
    cli.stdout.on('data', (d: Buffer) => (out += d.toString()));
    cli.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const killer = setTimeout(() => cli.kill('SIGKILL'), 330_000);
    const exit = await new Promise<number | null>((resolve) => cli.once('exit', (code) => resolve(code)));
    clearTimeout(killer);
    const cliExitS = (wall() - start) / 1000;
    // --wait returns once every delivery row says delivered, which is recorded after the line's fsync: the file is complete.
    const deadline = Date.now() + 10_000;
    while (ids.size < n && Date.now() < deadline) await sleep(10);
    await t.stop();
    const { peak } = await r2.stop();
    if (exit !== 0) ctx.log(`replay CLI exited ${exit}: ${err.slice(-2000)}`);
    let summary: unknown = out.trim();
    try {
      summary = JSON.parse(out) as unknown;
    } catch {
      // kept as text
    }
    const db = new BetterSqlite3(dbPath, { readonly: true });
    const q = db.prepare('SELECT MIN(created_at) AS a, MAX(created_at) AS b FROM jobs WHERE kind = ?').get(`sink:${sinkName}`) as { a: string | null; b: string | null };
    db.close();
    const queueS = q.a && q.b ? (Date.parse(q.b) - Date.parse(q.a)) / 1000 : NaN;
    const seconds = (lastLineAt - start) / 1000;
    // Where the seconds went: the CLI's start (spawn → its first job), its queueing, and the sink lane after it.
    const firstJobS = q.a ? (Date.parse(q.a) - start) / 1000 : NaN;
    const firstLineS = firstLineAt ? (firstLineAt - start) / 1000 : NaN;
    return {
      status: 'measured',
      sinkConcurrency: ctx.sinkConcurrency ?? 'default',
      events: n,
      ingestRate,
      processing,
      seconds: Math.round(seconds * 1000) / 1000,
      eventsPerSecond: Math.round(n / seconds),
      queueS: Math.round(queueS * 1000) / 1000,
      firstJobS: Math.round(firstJobS * 1000) / 1000,
      firstLineS: Math.round(firstLineS * 1000) / 1000,
      cliExitS: Math.round(cliExitS * 1000) / 1000,
      cliExit: exit,
      cliSummary: summary,
      lines: t.lines,
      distinctIds: ids.size,
      duplicateLines: t.lines - ids.size,
      linesCheck: ids.size === n && exit === 0 ? 'ok' : 'FAILED',
      peakRssMB: mb(peak),
      loadAvg: la,
    };
  } finally {
    await t.stop().catch(() => undefined);
    if (r2.server.proc.exitCode === null) await r2.stop().catch(() => undefined);
  }
}

export type { Server };
