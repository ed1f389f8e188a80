/**
 * `npm run bench`: ingest throughput against a bare Hono endpoint, and latency
 * at fixed rates, in one run. See bench/README.md for what each figure means.
 *
 *   npx tsx bench/run.ts [--warmup 5] [--duration 15] [--connections 50]
 *     [--threads 1] [--receivers info,warn,info:0] [--rates 1000,2500]
 *     [--rate-receivers info,info:0] [--rate-warmup 3] [--rate-duration 15] [--no-build] [--cpu-prof]
 *     [--skip-throughput] [--skip-rates] [--skip-web-body] [--generator auto|wrk|node] [--open-generator auto|c|node]
 *     [--fanout] [--replay] [--skip-fanout] [--skip-replay] [--fanout-rate 200] [--fanout-duration 10] [--replay-events 5000] [--sink-concurrency n]
 *     [--baseline <dir>] [--receiver-env K=V,K2=V2] [--no-sync] [--out <file>]
 *
 * The fan-out and replay measurements (bench/lib/later.ts) are part of the default run; `--fanout` and/or
 * `--replay` run only them.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, openSync, closeSync, readFileSync, rmSync, statSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import BetterSqlite3 from 'better-sqlite3';
import { makeTemplates, newSigningSecret } from './lib/deliveries.js';
import { cpuBetween, measuredWindow, recordCpu, type CpuShare } from './lib/cpu.js';
import { calibrateHost, describeMachine } from './lib/machine.js';
import { measureFanOut, measureReplay } from './lib/later.js';
import { loopBetween, scrapeLoop } from './lib/loopWatch.js';
import { freePort, mb, readVmHwm, RECEIVER_NODE_FLAGS, runCommand, runLoadgen, startServer, stopChildren, tracked, type Server } from './lib/processes.js';
import { ackedIdsOf, missingEventIds, pastTolerance, rowsCheck } from './lib/checks.js';
import { printReport, writeMarkdown, type Results, type ThroughputRow, type RateRow } from './lib/report.js';
import { runWrk, wrkAvailable, writePool, writeShards, writeTemplates, type LoadResult } from './lib/wrk.js';
import { exitIfUnsupportedRuntime } from '../src/db/unsupportedRuntime.js';
import { TOLERANCE_SECONDS } from '../src/ingest/verifySignature.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const USAGE = `Usage: npm run bench -- [options]   (or: npx tsx bench/run.ts [options])

Ingest throughput against a bare Hono endpoint (wrk), latency at fixed rates (open loop),
fan-out and replay, in one run; bench/README.md says what each figure means.

  --no-build                 use dist/ as it is (default: npm run build first)
  --warmup 5 --duration 15   wrk's warm-up and measured seconds
  --connections 50 --threads 1
  --receivers LIST           receivers under wrk, LOG_LEVEL[:WORKER_CONCURRENCY|:split][@base],
                             default info,warn,info:0,info:split
  --rates 1000,2500          fixed rates (deliveries/s)
  --rate-receivers LIST      receivers at the fixed rates, default info,info:0,info:split
  --rate-warmup 3 --rate-duration 15
  --fanout / --replay        run only the fan-out and/or replay rows
  --skip-throughput --skip-rates --skip-web-body --skip-fanout --skip-replay
  --fanout-rate 200 --fanout-duration 10 --replay-events 5000 --sink-concurrency N
  --generator auto|wrk|node  closed-loop generator (auto: wrk if installed)
  --open-generator auto|c|node
  --baseline DIR             another built checkout, run for receiver specs ending in @base
  --receiver-env K=V,...     extra environment for every receiver
  --cpu-prof                 write CPU profiles to bench/results/profiles/
  --no-sync                  no sync before each receiver row
  --out FILE                 the JSON results (default bench/results/latest.json)
  -h, --help                 this text

Exit code: 0 done, 1 the bench could not run (a bad option, a server that would not start),
2 data went missing (rows against 2xx answers, fan-out or replay lines).
`;
/** A mistake in the options: said in one line, before anything is built or started. */
function usageError(message: string): never {
  process.stderr.write(`bench: ${message}\nRun \`npm run bench -- --help\` for the options.\n`);
  process.exit(1);
}
let parsed: ReturnType<typeof parseOptions>;
try {
  parsed = parseOptions();
} catch (err) {
  usageError((err as Error).message);
}
const { values: flags } = parsed;
if (flags.help) {
  process.stdout.write(USAGE);
  process.exit(0);
}
function parseOptions() {
  return parseArgs({
    options: {
      help: { type: 'boolean', short: 'h', default: false },
      warmup: { type: 'string', default: '5' },
      duration: { type: 'string', default: '15' },
      connections: { type: 'string', default: '50' },
      threads: { type: 'string', default: '1' },
      // LOG_LEVEL[:WORKER_CONCURRENCY] per receiver run; the worker count defaults to the production default (4).
      receivers: { type: 'string', default: 'info,warn,info:0,info:split' },
      rates: { type: 'string', default: '1000,2500' },
      // Receivers driven at each fixed rate, same LOG_LEVEL[:WORKER_CONCURRENCY] syntax as --receivers.
      'rate-receivers': { type: 'string', default: 'info,info:0,info:split' },
      'rate-warmup': { type: 'string', default: '3' },
      'rate-duration': { type: 'string', default: '15' },
      'no-build': { type: 'boolean', default: false },
      'cpu-prof': { type: 'boolean', default: false },
      'skip-throughput': { type: 'boolean', default: false },
      'skip-rates': { type: 'boolean', default: false },
      'skip-web-body': { type: 'boolean', default: false },
      generator: { type: 'string', default: 'auto' },
      // Open loop (fixed rates, fan-out, replay's ingest): the C generator (bench/opengen/opengen.c, compiled with `cc`) or node:http's client.
      'open-generator': { type: 'string', default: 'auto' },
      // Fan-out and replay run by default (about 45 s together); --fanout / --replay run only them (with --skip-* for the others).
      fanout: { type: 'boolean', default: false },
      replay: { type: 'boolean', default: false },
      'skip-fanout': { type: 'boolean', default: false },
      'skip-replay': { type: 'boolean', default: false },
      'fanout-rate': { type: 'string', default: '200' },
      'fanout-duration': { type: 'string', default: '10' },
      // Events stored, processed from a backlog (about 5 s for 5,000 here), then replayed to a file sink.
      'replay-events': { type: 'string', default: '5000' },
      // CONFIG_FILE `concurrency` of the bench's file sink (default: the kind's default, 512).
      'sink-concurrency': { type: 'string' },
      out: { type: 'string', default: join(ROOT, 'bench/results/latest.json') },
      // Another checkout (built, with node_modules) whose receiver runs for specs ending in `@base`,
      // so two builds are compared in one run: --baseline ../base --receivers info:0@base,info:0
      baseline: { type: 'string' },
      // Extra environment for every receiver (serve and work) of the run, e.g. PROCESSING_SHARE=10:
      // to measure a configuration knob, alternate runs with and without it.
      'receiver-env': { type: 'string' },
      // Each receiver row starts after a `sync`, so the previous row's dirty pages are not written back during it.
      'no-sync': { type: 'boolean', default: false },
    },
  });
}
/** LOG_LEVEL[:WORKER_CONCURRENCY|:split]; `split` = `serve` with WORKER_CONCURRENCY=0 beside a `work` process. */
type Workers = number | 'split' | null;
function receiverList(name: string, v: string): { level: string; workers: Workers; base: boolean }[] {
  return v.split(',').filter(Boolean).map((spec) => {
    const base = spec.endsWith('@base');
    if (base && !flags.baseline) usageError(`--${name}: ${spec} needs --baseline <dir>`);
    const r = base ? spec.slice(0, -'@base'.length) : spec;
    const [level, workers] = r.split(':');
    if (workers !== undefined && workers !== 'split' && !/^\d+$/.test(workers)) usageError(`--${name}: bad worker count in ${r} (a number or split)`);
    if (!/^(trace|debug|info|warn|error|fatal|silent)$/.test(level!)) usageError(`--${name}: ${JSON.stringify(level)} is not a LOG_LEVEL (info, warn, error, debug, ...)`);
    return { level: level!, workers: workers === undefined ? null : workers === 'split' ? 'split' : Number(workers), base };
  });
}
const workersLabel = (w: Workers, base = false) =>
  (w === null ? '' : w === 'split' ? ' + separate `work` process' : `, WORKER_CONCURRENCY=${w}`) + (base ? ' (baseline)' : '');
const num = (name: string, v: string | undefined) => {
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0) usageError(`--${name} must be a positive number, got ${JSON.stringify(v)}`);
  return n;
};
const opts = {
  warmupS: num('warmup', flags.warmup),
  durationS: num('duration', flags.duration),
  connections: num('connections', flags.connections),
  threads: num('threads', flags.threads),
  receivers: receiverList('receivers', flags.receivers!),
  rateReceivers: receiverList('rate-receivers', flags['rate-receivers']!),
  rates: flags.rates!.split(',').filter(Boolean).map((r) => num('rates', r)),
  rateWarmupS: num('rate-warmup', flags['rate-warmup']),
  rateDurationS: num('rate-duration', flags['rate-duration']),
  fanOutRate: num('fanout-rate', flags['fanout-rate']),
  fanOutDurationS: num('fanout-duration', flags['fanout-duration']),
  replayEvents: num('replay-events', flags['replay-events']),
  sinkConcurrency: flags['sink-concurrency'] === undefined ? undefined : num('sink-concurrency', flags['sink-concurrency']),
};
/**
 * Each period's deliveries carry the time they were signed (one timestamp, right before it) and the
 * receiver refuses a timestamp older than TOLERANCE_SECONDS: a longer period would end in 401s, which
 * the rows check cannot see (it counts 2xx) and the requests/s would count. A minute is left for the
 * signing itself and the generator's start.
 */
const SIGNED_SPAN_MAX_S = TOLERANCE_SECONDS - 60;
const signedSpan = (what: string, seconds: number) => {
  if (seconds > SIGNED_SPAN_MAX_S) usageError(`${what} send ${seconds} s of deliveries signed at once: at most ${SIGNED_SPAN_MAX_S} s, since the receiver refuses a webhook-timestamp older than ${TOLERANCE_SECONDS / 60} minutes`);
};
// A receiver row's wrk pools and the Node closed loop sign both periods at once (so both are summed);
// the checks before each wrk period (drive) also count the signing and the receiver's start.
signedSpan('--warmup + --duration', opts.warmupS + opts.durationS);
signedSpan('--rate-warmup + --rate-duration', opts.rateWarmupS + opts.rateDurationS);
signedSpan('1 s of warm-up + --fanout-duration', 1 + opts.fanOutDurationS);
signedSpan('--replay-events at 2,000/s', opts.replayEvents / 2000);
const oneOf = (name: string, v: string | undefined, choices: readonly string[]) => {
  if (!choices.includes(v!)) usageError(`--${name} must be one of ${choices.join(', ')}, got ${JSON.stringify(v)}`);
  return v!;
};
oneOf('generator', flags.generator, ['auto', 'wrk', 'node']);
oneOf('open-generator', flags['open-generator'], ['auto', 'c', 'node']);

/** `--receiver-env K=V,K2=V2`: added to every receiver's environment. */
const RECEIVER_ENV: Record<string, string> = Object.fromEntries(
  (flags['receiver-env'] ?? '').split(',').filter(Boolean).map((kv) => {
    const i = kv.indexOf('=');
    if (i <= 0) usageError(`--receiver-env: expected KEY=VALUE, got ${JSON.stringify(kv)}`);
    return [kv.slice(0, i), kv.slice(i + 1)];
  }),
);
/** The `--baseline` checkout, for receiver specs ending in `@base`. */
const BASELINE = flags.baseline ? resolve(flags.baseline) : null;
const log = (m: string) => process.stderr.write(`[bench] ${m}\n`);
// The bench reads the receivers' databases itself: on a Node.js without Node-API 10 the first
// one it opens would end it with a segmentation fault (`npx tsx bench/run.ts` on the machine's
// node). Refused before the scratch folder is made (made first, it was left behind).
exitIfUnsupportedRuntime();
const tmp = mkdtempSync(join(tmpdir(), 'receiver-bench-'));
const secret = newSigningSecret();
const templates = makeTemplates();
const started: Server[] = [];

async function ensureBuilt(): Promise<void> {
  if (!flags['no-build']) {
    log('npm run build');
    const r = await runCommand('npm', ['run', 'build'], { cwd: ROOT, timeoutMs: 180_000 });
    if (r.code !== 0) throw new Error(`npm run build failed:\n${r.stdout}${r.stderr}`);
  }
  if (!existsSync(join(ROOT, 'dist/main.js'))) throw new Error('dist/main.js is missing: run `npm run build` (or drop --no-build)');
  if (BASELINE && !existsSync(join(BASELINE, 'dist/main.js'))) throw new Error(`${join(BASELINE, 'dist/main.js')} is missing: build that checkout first`);
  opengen = await buildOpengen();
}

/** The open-loop C generator, compiled into the run's scratch directory; null = node:http's client sends. */
let opengen: string | null = null;
async function buildOpengen(): Promise<string | null> {
  const choice = flags['open-generator'];
  if (choice === 'node') return null;
  const out = join(tmp, 'opengen');
  const r = await runCommand('cc', ['-O2', '-std=gnu11', '-Wall', '-o', out, join(ROOT, 'bench/opengen/opengen.c')], { cwd: ROOT, timeoutMs: 60_000 }).catch(
    (err: Error) => ({ code: -1, stdout: '', stderr: err.message }),
  );
  if (r.code === 0) return out;
  const why = `cannot compile bench/opengen/opengen.c with cc (${r.stderr.trim().split('\n')[0] ?? ''})`;
  if (choice === 'c') throw new Error(`${why}; install a C compiler: apt-get install -y gcc`);
  log(`${why}: the open loop falls back to node:http's client, whose own floor is about 1 ms at p50 and 2 ms at p99 here.`);
  return null;
}

async function start(name: string, args: string[], env: Record<string, string> = {}, stdout?: number, cwd = ROOT): Promise<Server> {
  const port = await freePort();
  const s = await startServer({ name, args, env: { ...env, PORT: String(port) }, port, cwd, stdout });
  started.push(s);
  return s;
}

async function stop(s: Server) {
  const peak = s.peakRss();
  const exit = await s.stop();
  started.splice(started.indexOf(s), 1);
  return { peak, exit };
}

let stubUrl = '';
let receiverCount = 0;

/** The real receiver, built, with production settings (WAL + synchronous=FULL, group commit, 4 workers). */
async function startReceiver(label: string, logLevel: string, workers: Workers = null, base = false) {
  // The previous rows' databases and logs leave dirty pages; written back during this row, they
  // would compete with its fsyncs.
  if (!flags['no-sync']) await runCommand('sync', [], { cwd: ROOT, timeoutMs: 60_000 });
  const n = ++receiverCount;
  const cwd = base ? BASELINE! : ROOT;
  const dbPath = join(tmp, `receiver-${n}-${label}.db`);
  const logPath = join(tmp, `receiver-${n}-${label}.log`);
  const logFd = openSync(logPath, 'w');
  const prof = flags['cpu-prof'] ? ['--cpu-prof', `--cpu-prof-dir=${join(ROOT, 'bench/results/profiles')}`, `--cpu-prof-name=receiver-${n}-${label}.cpuprofile`] : [];
  const server = await start(`receiver ${label}`, [...RECEIVER_NODE_FLAGS, ...prof, 'dist/main.js'], {
    NODE_ENV: 'production',
    HOST: '127.0.0.1',
    DATABASE_PATH: dbPath,
    WEBHOOK_SECRET: secret.secret,
    HIRING_API_URL: stubUrl,
    HIRING_API_KEY: 'sk-bench.benchkey',
    LOG_LEVEL: logLevel,
    ...(workers === null ? {} : { WORKER_CONCURRENCY: workers === 'split' ? '0' : String(workers) }),
    ...RECEIVER_ENV,
  }, logFd, cwd);
  // split: the workers run in their own process on the same database (`hiring-receiver work`).
  const work =
    workers === 'split'
      ? tracked(spawn(process.execPath, [...RECEIVER_NODE_FLAGS, 'dist/cli/main.js', 'work'], {
          cwd,
          env: {
            PATH: process.env.PATH ?? '',
            NODE_ENV: 'production',
            DATABASE_PATH: dbPath,
            WEBHOOK_SECRET: secret.secret,
            HIRING_API_URL: stubUrl,
            HIRING_API_KEY: 'sk-bench.benchkey',
            LOG_LEVEL: logLevel,
            ...RECEIVER_ENV,
          },
          stdio: ['ignore', logFd, 'inherit'],
        }))
      : null;
  const workExited = work ? new Promise<void>((r) => work.once('exit', () => r())) : null;
  return {
    server,
    /**
     * Processing's lag when the load stops: events not folded yet and queued jobs not finished,
     * then the seconds until both are 0 (null past `boundS`). Null for a receiver without workers.
     */
    async catchUp(boundS = 60): Promise<CatchUp | null> {
      if (workers === 0) return null;
      const db = new BetterSqlite3(dbPath, { readonly: true });
      try {
        const unfolded = db.prepare('SELECT max(0, coalesce((SELECT max(rowid) FROM events), 0) - last_event_rowid) FROM processing_cursor').pluck();
        const open = db.prepare("SELECT COUNT(*) FROM jobs WHERE state IN ('pending', 'running')").pluck();
        const read = () => ({ unfolded: unfolded.get() as number, openJobs: open.get() as number });
        const t0 = performance.now();
        const atEnd = read();
        for (let now = atEnd; ; now = read()) {
          if (now.unfolded === 0 && now.openJobs === 0) return { ...atEnd, seconds: Math.round((performance.now() - t0) / 100) / 10 };
          if (performance.now() - t0 > boundS * 1000) return { ...atEnd, seconds: null };
          await new Promise((r) => setTimeout(r, 100));
        }
      } finally {
        db.close();
      }
    },
    /**
     * Stops it (drain, close) and counts what it stored; with `ackedIds` (the event ids the
     * generator saw a 2xx for), also how many of them are not in `events`.
     */
    async finish(ackedIds: readonly string[] = []) {
      const batches = await groupCommitStats(server.url);
      const { peak, exit } = await stop(server);
      // The `work` process's own high-water mark, read before it exits (its RSS counts as well).
      let workPeak: number | null = null;
      if (work) {
        workPeak = work.pid === undefined ? null : readVmHwm(work.pid);
        work.kill('SIGTERM');
        await workExited;
      }
      closeSync(logFd);
      const db = new BetterSqlite3(dbPath, { readonly: true });
      const rows = db.prepare('SELECT COUNT(*) FROM events').pluck().get() as number;
      const jobsDone = db.prepare("SELECT COUNT(*) FROM jobs WHERE state = 'done'").pluck().get() as number;
      const ackedMissing = missingEventIds(db, ackedIds);
      db.close();
      return { peak, workPeak, exit, rows, jobsDone, ackedMissing, logBytes: statSync(logPath).size, ...batches };
    },
  };
}

/** Processing's backlog when the load stopped, and how long it took to clear (null: not within the bound). */
interface CatchUp {
  unfolded: number;
  openJobs: number;
  seconds: number | null;
}

/**
 * Group-commit transactions, their mean size and their mean duration (fsync included; NaN for a
 * baseline build without `receiver_group_commit_duration_seconds`), from the receiver's own /metrics.
 */
async function groupCommitStats(url: string): Promise<{ commits: number; meanBatch: number; meanCommitMs: number; lockWaits: number; meanLockWaitMs: number }> {
  try {
    const text = await (await fetch(`${url}/metrics`)).text();
    const get = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
    const commits = get('receiver_group_commit_batch_size_count');
    return {
      commits,
      meanBatch: Math.round((get('receiver_group_commit_batch_size_sum') / commits) * 10) / 10,
      meanCommitMs: Math.round((get('receiver_group_commit_duration_seconds_sum') / get('receiver_group_commit_duration_seconds_count')) * 1e5) / 100,
      // Transactions that found the write lock held by another connection (a `work` process), and
      // their mean wait from the first refusal to the commit (NaN for a build without the metric).
      lockWaits: get('receiver_ingest_lock_wait_seconds_count'),
      meanLockWaitMs: Math.round((get('receiver_ingest_lock_wait_seconds_sum') / get('receiver_ingest_lock_wait_seconds_count')) * 1e5) / 100,
    };
  } catch {
    return { commits: NaN, meanBatch: NaN, meanCommitMs: NaN, lockWaits: NaN, meanLockWaitMs: NaN };
  }
}

const loadgen = (url: string, a: Record<string, unknown>, onSpawn?: (child: ChildProcess) => void) => runLoadgen(ROOT, secret.secret, { url, ...a }, onSpawn);

/**
 * Runs `load` (which spawns the generator and hands it to the callback) while sampling the CPU of
 * `server`'s threads, the generator and the machine; the share is that of the generator's last
 * `durationS` seconds before it exited (its measured period), over `requests(result, seconds)`.
 */
async function withCpu<T>(server: Server, durationS: number, load: (onSpawn: (child: ChildProcess) => void) => Promise<T>, requests: (r: T, seconds: number) => number): Promise<{ result: T; cpu: CpuShare | null }> {
  let generator: number | null = null;
  let exitedAt: number | null = null;
  const recorder = recordCpu(server.pid, () => generator);
  let result: T;
  try {
    result = await load((child) => {
      generator = child.pid ?? null;
      child.once('exit', () => (exitedAt = performance.now()));
    });
  } catch (err) {
    recorder.stop();
    throw err;
  }
  const w = measuredWindow(recorder.stop(), exitedAt ?? performance.now(), durationS);
  return { result, cpu: w ? cpuBetween(w.a, w.b, requests(result, (w.b.at - w.a.at) / 1000)) : null };
}

/** A receiver row's pre-signed wrk pools (shards only: writeTemplates adds the server's port). */
interface SignedPools {
  warmup: string;
  measured: string;
  /** When their signing began: every delivery's `webhook-timestamp` is this second's. */
  signedAtMs: number;
}

/**
 * A receiver row's two pools, each delivery sent once, signed and written before the receiver
 * starts: the `sync` before its start then writes them out too, and the receiver is not left idle
 * between its warm-up and its measured period while they are signed. Sized above what the server
 * can take. Their timestamps are then the signing time's, up to the warm-up and measured period
 * later (SIGNED_SPAN_MAX_S keeps that inside the 5-minute tolerance).
 */
async function signPools(label: string, expectedRps: number): Promise<SignedPools> {
  const sized = (durationS: number) => Math.ceil((expectedRps * durationS * 1.05) / opts.threads) + 2000;
  return {
    signedAtMs: Date.now(),
    warmup: await writeShards(join(tmp, `pool-${label}-warmup`), secret, templates, opts.threads, sized(opts.warmupS)),
    measured: await writeShards(join(tmp, `pool-${label}-measured`), secret, templates, opts.threads, sized(opts.durationS)),
  };
}

/**
 * Drives the server through a warm-up and a measured period. For a receiver row (`receiver`), each
 * delivery is sent once: from its pre-signed pools with wrk (signPools), from the Node closed loop's
 * own otherwise. For the baseline servers (null), which store nothing, a pool of 20,000 a thread is
 * sent round and round.
 */
async function drive(
  s: Server,
  receiver: { expectedRps: number; pools: SignedPools | null } | null,
  gen: 'wrk' | 'node',
): Promise<{ warm: LoadResult; measured: LoadResult; cpu: CpuShare | null }> {
  const unique = receiver !== null;
  const expectedRps = receiver?.expectedRps ?? 0;
  const pools = receiver?.pools ?? null;
  if (gen === 'node') {
    const { result, cpu } = await withCpu(
      s,
      opts.durationS,
      (onSpawn) => loadgen(s.url, { mode: 'closed', connections: opts.connections, warmupS: opts.warmupS, durationS: opts.durationS, rate: expectedRps, wrap: !unique }, onSpawn),
      (res, seconds) => (res as { rps: number }).rps * seconds,
    );
    const r = result as {
      rps: number; requests: number; exhausted: number; pool: number;
      warmup: { s2xx: number; non2xx: number; socketErrors: number; accepted: number };
      measured: { p50: number; p99: number; p999: number; max: number; mean: number; s2xx: number; non2xx: number; socketErrors: number; accepted: number };
    };
    const m = r.measured;
    const base = { generator: 'node closed-loop', unanswered: 0, exhausted: r.exhausted, pool: r.pool };
    return {
      cpu,
      warm: { ...base, requests: 0, durationS: opts.warmupS, rps: 0, latencyMs: { p50: 0, p90: 0, p99: 0, p999: 0, max: 0, mean: 0 }, socketErrors: r.warmup.socketErrors, status2xx: r.warmup.s2xx, non2xx: r.warmup.non2xx, accepted: r.warmup.accepted },
      measured: { ...base, requests: r.requests, durationS: opts.durationS, rps: r.rps, latencyMs: { p50: m.p50, p90: 0, p99: m.p99, p999: m.p999, max: m.max, mean: m.mean }, socketErrors: m.socketErrors, status2xx: m.s2xx, non2xx: m.non2xx, accepted: m.accepted },
    };
  }
  const lua = join(ROOT, 'bench/wrk/deliveries.lua');
  const run = async (phase: 'warmup' | 'measured', durationS: number, onSpawn?: (child: ChildProcess) => void) => {
    // The signing, the sync and the warm-up took their time: a period whose last deliveries would be
    // past the receiver's tolerance would end in 401s (the rows check counts only 2xx).
    const ageS = pools ? (Date.now() - pools.signedAtMs) / 1000 : 0;
    if (pastTolerance(ageS, durationS, TOLERANCE_SECONDS)) {
      throw new Error(`the ${phase} period's deliveries were signed ${Math.round(ageS)} s ago: the last of ${durationS} s more would be past the receiver's ${TOLERANCE_SECONDS / 60}-minute tolerance; shorten --warmup/--duration`);
    }
    const dir = pools ? writeTemplates(pools[phase], templates, s.port) : await writePool(join(tmp, `pool-${s.port}-${phase}`), secret, templates, opts.threads, 20_000, s.port);
    const r = await runWrk({ url: s.url, luaScript: lua, poolDir: dir, wrap: !pools, threads: opts.threads, connections: opts.connections, durationS, cwd: ROOT, ...(onSpawn ? { onSpawn } : {}) });
    rmSync(dir, { recursive: true, force: true });
    return r;
  };
  const warm = await run('warmup', opts.warmupS);
  const { result: measured, cpu } = await withCpu(s, opts.durationS, (onSpawn) => run('measured', opts.durationS, onSpawn), (r, seconds) => r.rps * seconds);
  return { warm, measured, cpu };
}

function row(name: string, measured: LoadResult, peakRss: number, cpu: CpuShare | null, extra: Partial<ThroughputRow> = {}): ThroughputRow {
  return {
    name,
    cpu,
    generator: measured.generator,
    rps: Math.round(measured.rps),
    p50Ms: measured.latencyMs.p50,
    p99Ms: measured.latencyMs.p99,
    socketErrors: measured.socketErrors,
    non2xx: measured.non2xx,
    status2xx: measured.status2xx,
    peakRssMB: mb(peakRss),
    exhausted: measured.exhausted,
    ...extra,
  };
}

/** The throughput rows, each pushed onto `rows` once measured (a later row's failure keeps them). */
async function throughput(gen: 'wrk' | 'node', rows: ThroughputRow[]): Promise<void> {
  const servers = [
    ['raw node:http (generator ceiling)', 'bench/servers/rawNode.mjs', 'incoming'],
    ['bare Hono', 'bench/servers/bareHono.mjs', 'incoming'],
    ...(flags['skip-web-body'] ? [] : [['bare Hono, c.req.arrayBuffer() (reference)', 'bench/servers/bareHono.mjs', 'web']]),
  ] as const;
  for (const [name, file, bodyRead] of servers) {
    log(`${name}: ${opts.warmupS} s warm-up + ${opts.durationS} s`);
    const s = await start(name, [file], { BODY_READ: bodyRead });
    const { measured, cpu } = await drive(s, null, gen);
    const { peak } = await stop(s);
    rows.push(row(name, measured, peak, cpu));
  }
  const bare = rows[1]!.rps;
  if (bare >= 0.9 * rows[0]!.rps) {
    log(`WARNING: bare Hono (${bare}/s) is within 10% of the generator's ceiling (${rows[0]!.rps}/s): the bare figure and the ratio are generator-bound.`);
  }
  for (const { level, workers, base } of opts.receivers) {
    const name = `receiver LOG_LEVEL=${level}${workersLabel(workers, base)}`;
    log(`${name}: ${opts.warmupS} s warm-up + ${opts.durationS} s`);
    const label = `tp-${level}-${workers ?? 'default'}${base ? '-base' : ''}`;
    const expectedRps = Math.max(bare, 5000);
    const pools = gen === 'wrk' ? await signPools(`${receiverCount + 1}-${label}`, expectedRps) : null;
    const r = await startReceiver(label, level, workers, base);
    const { warm, measured, cpu } = await drive(r.server, { expectedRps, pools }, gen);
    const f = await r.finish();
    const acked = warm.status2xx + measured.status2xx;
    const acceptedTotal = warm.accepted + measured.accepted;
    const unanswered = warm.unanswered + measured.unanswered;
    const exhausted = warm.exhausted + measured.exhausted;
    const rowCheck = rowsCheck({ rows: f.rows, acked, accepted: acceptedTotal, unanswered, exhausted });
    rows.push(
      row(name, measured, f.peak, cpu, {
        ...(f.workPeak === null ? {} : { workPeakRssMB: mb(f.workPeak) }),
        ratio: Math.round((measured.rps / bare) * 1000) / 1000,
        rowsStored: f.rows,
        acked2xx: acked,
        unanswered,
        rowCheck,
        jobsDone: f.jobsDone,
        commits: f.commits,
        meanBatch: f.meanBatch,
        meanCommitMs: f.meanCommitMs,
        logBytes: f.logBytes,
        exit: f.exit.code ?? f.exit.signal ?? null,
      }),
    );
  }
}

/** The fixed-rate rows, each pushed onto `rows` once measured (a later row's failure keeps them). */
async function fixedRates(rows: RateRow[]): Promise<void> {
  for (const rate of opts.rates) {
    // The generator's own floor at this rate (send lag, client, loopback) against raw node:http.
    const raw = await start('raw node:http', ['bench/servers/rawNode.mjs']);
    log(`fixed rate ${rate}/s: generator floor against raw node:http`);
    const floor = (await loadgen(raw.url, { mode: 'open', rate, connections: 256, warmupS: opts.rateWarmupS, durationS: opts.rateDurationS, opengen })) as OpenResult;
    await stop(raw);
    for (const { level, workers, base } of opts.rateReceivers) {
      const name = `receiver LOG_LEVEL=${level}${workersLabel(workers, base)}`;
      log(`fixed rate ${rate}/s: ${name}`);
      const label = `rate-${rate}-${level}-${workers ?? 'default'}${base ? '-base' : ''}`;
      const r = await startReceiver(label, level, workers, base);
      const ackFile = join(tmp, `acks-${receiverCount}-${label}.txt`);
      // The loop's max delay from here (this scrape resets it) to the end of the load.
      const loopBefore = await scrapeLoop(r.server.url);
      const { result, cpu } = await withCpu(
        r.server,
        opts.rateDurationS,
        (onSpawn) => loadgen(r.server.url, { mode: 'open', rate, connections: 256, warmupS: opts.rateWarmupS, durationS: opts.rateDurationS, opengen, ackFile }, onSpawn),
        (_res, seconds) => rate * seconds,
      );
      const res = result as OpenResult;
      const loopAfter = await scrapeLoop(r.server.url);
      const catchUp = await r.catchUp();
      // Each acknowledged event by its id, not only their count: a lost acknowledged event and an
      // unanswered request that was committed would cancel out in the counts.
      const ackedIds = ackedIdsOf(readFileSync(ackFile, 'utf8'));
      const f = await r.finish(ackedIds);
      const acked = res.warmup.s2xx + res.measured.s2xx;
      // A request that timed out at the client may still have been committed (the service would redeliver it).
      const unanswered = res.warmup.socketErrors + res.measured.socketErrors;
      rows.push({
        rate,
        name,
        sentRate: Math.round(res.sentRate),
        p50Ms: res.measured.p50,
        p99Ms: res.measured.p99,
        p999Ms: res.measured.p999,
        maxMs: res.measured.max,
        errors: res.measured.socketErrors + res.measured.non2xx,
        maxInFlight: res.maxInFlight,
        peakRssMB: mb(f.peak),
        ...(f.workPeak === null ? {} : { workPeakRssMB: mb(f.workPeak) }),
        floorP50Ms: floor.measured.p50,
        floorP99Ms: floor.measured.p99,
        floorP999Ms: floor.measured.p999,
        sendLag: { p99: res.sendLagMs.p99, p999: res.sendLagMs.p999, max: res.sendLagMs.max },
        rowsStored: f.rows,
        acked2xx: acked,
        unanswered,
        ackedMissing: f.ackedMissing,
        rowCheck: rowsCheck({ rows: f.rows, acked, accepted: res.warmup.accepted + res.measured.accepted, unanswered, byId: { listed: ackedIds.length, missing: f.ackedMissing } }),
        meanBatch: f.meanBatch,
        meanCommitMs: f.meanCommitMs,
        lockWaits: f.lockWaits,
        meanLockWaitMs: f.meanLockWaitMs,
        catchUp,
        cpu,
        loop: loopBefore && loopAfter ? loopBetween(loopBefore, loopAfter) : null,
      });
    }
  }
}

interface OpenResult {
  sentRate: number;
  maxInFlight: number;
  sendLagMs: { p50: number; p99: number; p999: number; max: number };
  warmup: { s2xx: number; accepted: number; socketErrors: number };
  measured: { p50: number; p99: number; p999: number; max: number; s2xx: number; non2xx: number; socketErrors: number; accepted: number };
}

/** `--fanout` and/or `--replay` alone: run only those (they are part of the default run otherwise). */
const only = flags.fanout || flags.replay;

async function main() {
  const machine = describeMachine();
  await ensureBuilt();
  const wrk = flags.generator === 'node' ? null : wrkAvailable();
  if (!wrk) {
    if (flags.generator === 'wrk') throw new Error('wrk not found; install it with: apt-get update && apt-get install -y wrk');
    log(flags.generator === 'node'
      ? 'using the Node closed-loop generator (--generator node).'
      : 'wrk not found (install: apt-get update && apt-get install -y wrk); falling back to the Node closed-loop generator.');
    log('Its ceiling is the raw node:http row: if bare Hono is close to it, the bare Hono figure (and the ratio) is generator-bound.');
  }
  const stub = await start('hiring stub', ['bench/servers/hiringStub.mjs'], {}, undefined);
  stubUrl = stub.url;
  const laterCtx = { root: ROOT, tmp, secret: secret.secret, stubUrl, log, opengen, receiverEnv: RECEIVER_ENV, ...(opts.sinkConcurrency === undefined ? {} : { sinkConcurrency: opts.sinkConcurrency }), ...(flags['cpu-prof'] ? { cpuProfDir: join(ROOT, 'bench/results/profiles') } : {}) };
  const results: Results = {
    when: new Date().toISOString(),
    machine,
    settings: { ...opts, receiverEnv: RECEIVER_ENV, generator: wrk ?? 'node closed-loop (wrk missing)', openGenerator: opengen ? 'bench/opengen/opengen.c' : 'node:http client', bodyBytes: 2048, workerConcurrency: 4 },
    throughput: [],
    fixedRate: [],
    fanOut: { status: 'not_enabled', needs: ['not selected (--skip-fanout, or --replay alone)'] },
    replay: { status: 'not_enabled', needs: ['not selected (--skip-replay, or --fanout alone)'] },
  };
  // A row that fails ends the run, but the rows measured before it are still reported (and a
  // data-loss verdict among them still sets exit code 2).
  try {
    if (!(flags['skip-throughput'] || only)) await throughput(wrk ? 'wrk' : 'node', results.throughput);
    if (!(flags['skip-rates'] || only)) await fixedRates(results.fixedRate);
    if (!(flags['skip-fanout'] || (only && !flags.fanout))) results.fanOut = await measureFanOut(laterCtx, { rate: opts.fanOutRate, durationS: opts.fanOutDurationS });
    if (!(flags['skip-replay'] || (only && !flags.replay))) results.replay = await measureReplay(laterCtx, { events: opts.replayEvents });
    await stop(stub);
  } catch (err) {
    if (stoppedBy) throw err;
    process.stderr.write(`bench failed: ${(err as Error).stack ?? String(err)}\n`);
    results.failed = (err as Error).message.split('\n')[0]!;
    process.exitCode = 1;
    // The failed row's processes (a receiver, its `work` process, a generator) would still be
    // running through the end-of-run calibration below and skew it.
    await stopAll();
  }
  machine.calibrationMs.end = calibrateHost();
  mkdirSync(join(ROOT, 'bench/results'), { recursive: true });
  writeFileSync(flags.out!, `${JSON.stringify(results, null, 2)}\n`);
  writeMarkdown(join(ROOT, 'bench/results/latest.md'), results);
  printReport(results);
  log(`wrote ${flags.out} and bench/results/latest.md`);
  // Exit 2 when the bench saw data go missing: rows against 2xx answers, an acknowledged event
  // that never reached the file sink, or a replay that did not write every event once.
  const lost =
    [...results.throughput, ...results.fixedRate].some((r) => r.rowCheck === 'FAILED') ||
    (results.fanOut.status === 'measured' && results.fanOut.notLanded > 0) ||
    (results.replay.status === 'measured' && results.replay.linesCheck === 'FAILED');
  if (lost) process.exitCode = 2;
}

/**
 * Every process the bench started: its servers first (peak RSS read, drained), then the rest (a
 * `work` process, the later rows' receivers and sandbox, a generator in its period).
 */
async function stopAll(): Promise<void> {
  for (const s of [...started]) await s.stop(2000).catch(() => undefined);
  await stopChildren(2000);
}

const cleanup = async () => {
  await stopAll();
  rmSync(tmp, { recursive: true, force: true });
};
/** The signal the bench was stopped by: the row it ends then fails for that reason, not its own. */
let stoppedBy: NodeJS.Signals | null = null;
for (const [signal, code] of [['SIGINT', 130], ['SIGTERM', 143]] as const) {
  process.once(signal, () => {
    stoppedBy = signal;
    process.stderr.write(`bench stopped (${signal}): stopping its processes and removing ${tmp}\n`);
    void cleanup().then(() => process.exit(code));
  });
}
main()
  .catch((err: unknown) => {
    if (stoppedBy) return;
    process.stderr.write(`bench failed: ${(err as Error).stack ?? String(err)}\n`);
    process.exitCode = 1;
  })
  .finally(cleanup);
