import { writeFileSync } from 'node:fs';
import type { FanOutResult, Pending, ReplayResult } from './later.js';
import type { CpuShare } from './cpu.js';
import type { LoopWatch } from './loopWatch.js';
import type { Machine } from './machine.js';

export interface ThroughputRow {
  name: string;
  generator: string;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  socketErrors: number;
  non2xx: number;
  status2xx: number;
  peakRssMB: number;
  /** rows with a separate `work` process: that process's peak RSS */
  workPeakRssMB?: number;
  exhausted: number;
  /** CPU during the measured period (null where /proc is missing): see bench/lib/cpu.ts */
  cpu: CpuShare | null;
  /** receiver rows only */
  ratio?: number;
  rowsStored?: number;
  acked2xx?: number;
  unanswered?: number;
  rowCheck?: 'ok' | 'FAILED';
  jobsDone?: number;
  /** group-commit transactions over the receiver's life (warm-up included) and their mean size */
  commits?: number;
  meanBatch?: number;
  /** mean time of one ingest transaction, its fsync included (ms; NaN for a build without the metric) */
  meanCommitMs?: number;
  logBytes?: number;
  exit?: number | string | null;
}

export interface RateRow {
  rate: number;
  name: string;
  unanswered: number;
  sentRate: number;
  p50Ms: number;
  p99Ms: number;
  p999Ms: number;
  maxMs: number;
  errors: number;
  maxInFlight: number;
  peakRssMB: number;
  /** rows with a separate `work` process: that process's peak RSS */
  workPeakRssMB?: number;
  floorP50Ms: number;
  floorP99Ms: number;
  floorP999Ms: number;
  /** the generator's own lateness in this row (scheduled time → it took the request), p99 / p99.9 / max; part of every latency above */
  sendLag: { p99: number; p999: number; max: number };
  rowsStored: number;
  acked2xx: number;
  /** acknowledged event ids (the generator's 2xx, by id) not found in `events` */
  ackedMissing?: number;
  rowCheck: 'ok' | 'FAILED';
  meanBatch: number;
  meanCommitMs: number;
  /** ingest transactions that found the write lock held by another connection, and their mean wait to the commit (ms); NaN for a build without the metric */
  lockWaits?: number;
  meanLockWaitMs?: number;
  /** Processing when the load stopped: events not folded, jobs not finished, seconds to clear both (null: not within the bound). Null without workers. */
  catchUp: { unfolded: number; openJobs: number; seconds: number | null } | null;
  /** CPU during the measured period (null where /proc is missing): see bench/lib/cpu.ts */
  cpu: CpuShare | null;
  /** the receiver's event loop from before the load to its end (warm-up included): see bench/lib/loopWatch.ts; null if /metrics could not say */
  loop?: LoopWatch | null;
}

export interface Results {
  when: string;
  machine: Machine;
  settings: Record<string, unknown>;
  throughput: ThroughputRow[];
  fixedRate: RateRow[];
  fanOut: Pending | FanOutResult;
  replay: Pending | ReplayResult;
  /** The error that ended the run before its last row: the rows here are those measured before it. */
  failed?: string;
}

/** Issue 8's targets on the 2-core machine. */
export const TARGETS = { ratio: 0.3, p99AtRateMs: 10, p99Rate: 2500, peakRssMB: 128, fanOutP50Ms: 50, replayPerS: 5000 };

const fmt = (n: number | undefined, d = 0) => (n === undefined ? '' : n.toLocaleString('en-US', { minimumFractionDigits: d, maximumFractionDigits: d }));

/** "n, mean ms": ingest transactions that waited for another connection's write lock; '?' for a build without the metric. */
function lockWaitCell(f: RateRow): string {
  if (f.lockWaits === undefined || Number.isNaN(f.lockWaits)) return '?';
  return f.lockWaits === 0 ? '0' : `${fmt(f.lockWaits)}, ${fmt(f.meanLockWaitMs, 2)}`;
}

/** "main / other threads / generator, idle": percents of one core, then of the machine; µs of server CPU per request. */
function cpuCell(c: CpuShare | null | undefined): string {
  if (!c) return '';
  const perReq = c.serverUsPerRequest === null ? '' : `; ${fmt(c.serverUsPerRequest)} µs/req`;
  return `${fmt(c.serverMainPct)} / ${fmt(c.serverOtherPct)} / ${c.generatorPct === null ? '?' : fmt(c.generatorPct)}, idle ${fmt(c.machineIdlePct)}%${perReq}`;
}

function table(head: string[], rows: string[][]): string[] {
  return [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`, ...rows.map((r) => `| ${r.join(' | ')} |`)];
}

/**
 * A generator whose pre-signed pool ran out resent its last delivery (wrk) or stopped (the Node
 * closed loop): the rows check then fails for the bench's own reason, not for a lost event.
 */
const exhaustedNote = (n: number): string => (n > 0 ? `; the generator's pool ran out: ${fmt(n)} requests past its end, the run is invalid` : '');

/** Peak RSS of the row's processes: the server, and the `work` process where there is one. */
const rssCell = (r: { peakRssMB: number; workPeakRssMB?: number }): string =>
  r.workPeakRssMB === undefined ? fmt(r.peakRssMB, 1) : `${fmt(r.peakRssMB, 1)} + work ${fmt(r.workPeakRssMB, 1)}`;
/**
 * Each process within the target (the target is per process: a `work` process is its own). A peak
 * of 0 is one that could not be read (the process had exited, or no /proc): not a figure that meets it.
 */
const withinRss = (mb: number): boolean => mb > 0 && mb <= TARGETS.peakRssMB;
const rssMet = (r: { peakRssMB: number; workPeakRssMB?: number }): boolean => withinRss(r.peakRssMB) && (r.workPeakRssMB === undefined || withinRss(r.workPeakRssMB));

/**
 * The targets are about deliveries the receiver acknowledged: a figure made of refusals (a 401 or a
 * 503 is answered fast and counts in requests/s and in the latencies) or of nothing (an empty sample's
 * percentiles are 0) is not one that meets them.
 */
const refused = (n: number) => (n > 0 ? ` (${fmt(n)} answers were not 2xx)` : '');

function verdicts(r: Results): string[] {
  const out: string[] = [];
  for (const t of r.throughput.filter((x) => x.ratio !== undefined)) {
    const met = t.ratio! >= TARGETS.ratio && t.non2xx === 0 && t.status2xx > 0;
    out.push(`${t.name}: ratio ${fmt(t.ratio, 3)} (target >= ${TARGETS.ratio}) ${met ? 'MET' : 'MISSED'}${refused(t.non2xx)}; peak RSS ${rssCell(t)} MB (target <= ${TARGETS.peakRssMB}) ${rssMet(t) ? 'MET' : 'MISSED'}`);
  }
  for (const f of r.fixedRate) {
    const met = f.p99Ms <= TARGETS.p99AtRateMs && f.errors === 0 && f.acked2xx > 0;
    const target = f.rate === TARGETS.p99Rate ? ` (target <= ${TARGETS.p99AtRateMs} ms) ${met ? 'MET' : 'MISSED'}${f.errors > 0 ? ` (${fmt(f.errors)} errors)` : ''}` : '';
    out.push(`fixed ${f.rate}/s, ${f.name}: p99 ${fmt(f.p99Ms, 2)} ms${target}; peak RSS ${rssCell(f)} MB ${rssMet(f) ? 'MET' : 'MISSED'}`);
  }
  if (r.fanOut.status === 'measured') {
    const f = r.fanOut;
    const met = f.latencyMs.p50 < TARGETS.fanOutP50Ms && f.notLanded === 0 && f.measuredAcked > 0 && f.landed === f.acked;
    out.push(`fan-out to a file sink: p50 ${fmt(f.latencyMs.p50, 1)} ms (target < ${TARGETS.fanOutP50Ms}) ${met ? 'MET' : 'MISSED'}; ${fmt(f.landed)} of ${fmt(f.acked)} acknowledged events landed${f.measuredAcked === 0 ? ' (none acknowledged in the measured period)' : ''}`);
  }
  if (r.replay.status === 'measured') {
    const p = r.replay;
    out.push(`replay to a file sink: ${fmt(p.eventsPerSecond)} events/s (target >= ${fmt(TARGETS.replayPerS)}) ${p.eventsPerSecond >= TARGETS.replayPerS && p.linesCheck === 'ok' ? 'MET' : 'MISSED'}`);
  }
  return out;
}

function sinkTables(r: Results): string[] {
  const lines: string[] = [];
  if (r.fanOut.status === 'measured') {
    const f = r.fanOut;
    lines.push(...table(
      ['fan-out (ack → line in file sink)', 'rate /s', 'p50 ms', 'p99 ms', 'p99.9 ms', 'max ms', 'p50 / p99 with result GET', 'p50 / p99 without', 'ack p99 ms', 'stored → settled / settled → delivered p50 (p99) ms, receiver stamps', 'landed', 'peak RSS MB', 'load avg'],
      [[
        `receiver, 1 file sink (concurrency ${String(f.sinkConcurrency)}), results from the ${f.upstream}, ${f.warmupS} s warm-up + ${f.durationS} s`, fmt(f.rate), fmt(f.latencyMs.p50, 2), fmt(f.latencyMs.p99, 2), fmt(f.latencyMs.p999, 2), fmt(f.latencyMs.max, 1),
        `${fmt(f.withFetchMs.p50, 2)} / ${fmt(f.withFetchMs.p99, 2)}`, `${fmt(f.withoutFetchMs.p50, 2)} / ${fmt(f.withoutFetchMs.p99, 2)}`, fmt(f.ackP99Ms, 2),
        f.stages.count === 0 ? '?' : `${fmt(f.stages.settleMs.p50)} (${fmt(f.stages.settleMs.p99)}) / ${fmt(f.stages.deliverMs.p50)} (${fmt(f.stages.deliverMs.p99)})`,
        `${fmt(f.landed)} of ${fmt(f.acked)}`, fmt(f.peakRssMB, 1), f.loadAvg,
      ]],
    ), '');
  }
  if (r.replay.status === 'measured') {
    const q = r.replay.processing;
    lines.push(...table(
      ['processing from a backlog (workers on, stub answers at once)', 'events (measured)', 'with a result to read', 'events/s', 'seconds', 'receiver CPU µs/event', 'main thread %', 'peak RSS MB'],
      [[
        'stored events → settled, no job open', `${fmt(q.events)} (${fmt(q.measuredEvents)})`, fmt(q.fetching), fmt(q.eventsPerSecond), fmt(q.seconds, 2),
        q.cpuUsPerEvent === null ? '?' : fmt(q.cpuUsPerEvent), q.mainPct === null ? '?' : fmt(q.mainPct, 1), fmt(q.peakRssMB, 1),
      ]],
    ), '');
    const p = r.replay;
    lines.push(...table(
      ['replay (`replay --all --sink <file> --wait`)', 'events', 'events/s', 'seconds to N lines', 'CLI first job s', 'CLI queueing s', 'first line s', 'CLI exit s', 'distinct ids = N (lines, exit)', 'receiver peak RSS MB', 'load avg'],
      [[
        `stored, settled events → file sink (concurrency ${String(p.sinkConcurrency)})`, fmt(p.events), fmt(p.eventsPerSecond), fmt(p.seconds, 2), fmt(p.firstJobS, 2), fmt(p.queueS, 2), fmt(p.firstLineS, 2), fmt(p.cliExitS, 2),
        `${p.linesCheck} (${fmt(p.distinctIds)} ids, ${fmt(p.lines)} lines, exit ${String(p.cliExit)})`, fmt(p.peakRssMB, 1), p.loadAvg,
      ]],
    ), '');
  }
  return lines;
}

export function renderMarkdown(r: Results): string {
  const m = r.machine;
  const lines: string[] = [];
  lines.push(`Run ${r.when}; ${m.nproc} CPUs (${m.cpuModel}), ${m.memTotal} RAM, Node ${m.node}, ${m.kernel}; load average at start ${m.loadAvgAtStart}.`);
  lines.push(`Host calibration (bench/lib/machine.ts, a fixed JSON and SHA-256 workload; lower is faster): ${m.calibrationMs.start ?? '?'} ms at the start, ${m.calibrationMs.end ?? '?'} ms at the end. Compare runs only where these are close.`);
  if (r.failed !== undefined) lines.push(`**This run stopped early** (${r.failed}): the rows below are those measured before it; the ones after it are missing.`, '');
  lines.push(`Generator: ${String(r.settings.generator)}, ${String(r.settings.connections)} keep-alive connections, ${String(r.settings.threads)} thread(s), 2,048-byte signed bodies; ${String(r.settings.warmupS)} s warm-up + ${String(r.settings.durationS)} s measured. Open loop: ${String(r.settings.openGenerator ?? 'node:http client')}.`, '');
  if (r.throughput.length > 0) {
    lines.push(...table(
      ['server', 'req/s', 'p50 ms', 'p99 ms', 'errors / non-2xx', 'peak RSS MB', 'vs bare Hono', 'CPU %: main / other threads / generator, machine idle', 'mean batch', 'mean commit ms', 'rows = 2xx'],
      r.throughput.map((t) => [
        t.name, fmt(t.rps), fmt(t.p50Ms, 2), fmt(t.p99Ms, 2), `${t.socketErrors} / ${t.non2xx}`, rssCell(t),
        t.ratio === undefined ? '' : `${fmt(t.ratio, 3)}x`,
        cpuCell(t.cpu),
        fmt(t.meanBatch, 1),
        fmt(t.meanCommitMs, 2),
        t.rowCheck === undefined ? '' : `${t.rowCheck} (${fmt(t.rowsStored)} rows, ${fmt(t.acked2xx)} 2xx, ${fmt(t.unanswered)} in flight at stop${exhaustedNote(t.exhausted)})`,
      ]),
    ), '');
  }
  if (r.fixedRate.length > 0) {
    lines.push(...table(
      ['rate /s', 'receiver', 'sent /s', 'p50 ms', 'p99 ms', 'p99.9 ms', 'max ms', 'errors', 'peak RSS MB', 'CPU %: main / other threads / generator, machine idle', 'mean batch', 'mean commit ms', 'lock waits: n, mean ms', 'processing behind at stop', 'generator floor p50/p99/p99.9 ms', 'generator late p99/p99.9/max ms', 'receiver loop: max delay ms; GC pauses (> 10 ms, > 100 ms)', 'rows = 2xx'],
      r.fixedRate.map((f) => [
        fmt(f.rate), f.name.replace('receiver ', ''), fmt(f.sentRate), fmt(f.p50Ms, 2), fmt(f.p99Ms, 2), fmt(f.p999Ms, 2), fmt(f.maxMs, 1), fmt(f.errors), rssCell(f), cpuCell(f.cpu), fmt(f.meanBatch, 1), fmt(f.meanCommitMs, 2),
        lockWaitCell(f),
        f.catchUp ? `${fmt(f.catchUp.unfolded)} events, ${fmt(f.catchUp.openJobs)} jobs; clear in ${f.catchUp.seconds === null ? '> 60' : fmt(f.catchUp.seconds, 1)} s` : '',
        `${fmt(f.floorP50Ms, 2)} / ${fmt(f.floorP99Ms, 2)} / ${fmt(f.floorP999Ms, 2)}`,
        f.sendLag ? `${fmt(f.sendLag.p99, 2)} / ${fmt(f.sendLag.p999, 2)} / ${fmt(f.sendLag.max, 1)}` : '',
        f.loop ? `${fmt(f.loop.maxDelayMs, 1)}; ${fmt(f.loop.gcPauses)} (${fmt(f.loop.gcOver10ms)}, ${fmt(f.loop.gcOver100ms)})` : '',
        `${f.rowCheck} (${fmt(f.rowsStored)} rows, ${fmt(f.acked2xx)} 2xx, ${fmt(f.unanswered)} timed out${f.ackedMissing ? `; ${fmt(f.ackedMissing)} acknowledged ids not stored` : ''})`,
      ]),
    ), '');
  }
  lines.push(...sinkTables(r));
  lines.push(...verdicts(r).map((v) => `- ${v}`));
  if (r.fanOut.status !== 'measured') lines.push(`- fan-out: ${JSON.stringify(r.fanOut)}`);
  if (r.replay.status !== 'measured') lines.push(`- replay: ${JSON.stringify(r.replay)}`);
  return `${lines.join('\n')}\n`;
}

export function printReport(r: Results): void {
  process.stdout.write(`\n${renderMarkdown(r)}`);
}

export function writeMarkdown(path: string, r: Results): void {
  writeFileSync(path, `${renderMarkdown(r)}\n\`free -h\` at start:\n\n\`\`\`\n${r.machine.freeH}\n\`\`\`\n`);
}
