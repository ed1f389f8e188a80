/**
 * Where the CPU went during a measured period, read from /proc (Linux): the server's main thread
 * (its event loop) and its other threads (the WAL checkpointer, V8's GC and compiler helpers,
 * libuv's pool), the load generator's processes, and the machine as a whole. A row that is slow
 * with its main thread near 100% is bound by the event loop; one with the main thread well below
 * 100% and the machine idle waits on something else (the disk, the closed loop's round trips).
 *
 * Tick counts are in USER_HZ (100 a second on Linux, whatever the kernel's HZ). Elsewhere (no
 * /proc), samples are empty and the figures come out null.
 */
import { readdirSync, readFileSync } from 'node:fs';

const TICKS_PER_S = 100;

export interface CpuSample {
  /** performance.now() when taken. */
  at: number;
  /**
   * Ticks (user + system) of the whole server process (its exited threads included) and of its
   * main thread (the thread whose id is the pid); null when the process could not be read.
   */
  server: { total: number; main: number } | null;
  /**
   * Ticks of the generator's processes, each with its threads and its reaped children; null when
   * the generator itself could not be read (not spawned yet, or exited: its time then went to its
   * parent, this bench, which is not counted).
   */
  generator: number | null;
  /** /proc/stat's first line: user nice system idle iowait irq softirq steal, in ticks over all CPUs. */
  machine: number[];
}

export interface CpuShare {
  /** Percent of one core: the server's main thread and its other threads together. */
  serverMainPct: number;
  serverOtherPct: number;
  /** Percent of one core for the generator's processes; null if either sample could not read it. */
  generatorPct: number | null;
  /** Percent of the whole machine (all CPUs) that was idle, and that was idle waiting on I/O. */
  machineIdlePct: number;
  machineIowaitPct: number;
  /** Server CPU (all its threads) per request answered in the window, when `requests` is given. */
  serverUsPerRequest: number | null;
  seconds: number;
}

const readOr = (path: string): string | null => {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null;
  }
};

/** The fields of a /proc/.../stat line after the name (which may hold spaces and parentheses). */
const statFields = (stat: string): string[] => stat.slice(stat.lastIndexOf(')') + 2).split(' ');

/** utime + stime (proc(5) fields 14 and 15), with cutime + cstime (16 and 17) when `withChildren`. */
function statTicks(stat: string, withChildren = false): number {
  const f = statFields(stat);
  const own = Number(f[11]) + Number(f[12]);
  return withChildren ? own + Number(f[13]) + Number(f[14]) : own;
}

/**
 * The /proc stat lines of `pid` and of every process descending from it (loadgen.ts starts
 * opengen, for instance), from one scan of /proc; null when `pid` itself is not there.
 */
function treeStats(pid: number): string[] | null {
  const stats = new Map<number, string>();
  const children = new Map<number, number[]>();
  let entries: string[];
  try {
    entries = readdirSync('/proc').filter((e) => /^\d+$/.test(e));
  } catch {
    return null;
  }
  for (const e of entries) {
    const stat = readOr(`/proc/${e}/stat`);
    if (!stat) continue;
    stats.set(Number(e), stat);
    const ppid = Number(statFields(stat)[1]);
    const list = children.get(ppid) ?? [];
    list.push(Number(e));
    children.set(ppid, list);
  }
  if (!stats.has(pid)) return null;
  const out: string[] = [];
  const todo = [pid];
  while (todo.length > 0) {
    const p = todo.pop()!;
    out.push(stats.get(p)!);
    todo.push(...(children.get(p) ?? []));
  }
  return out;
}

function serverTicks(pid: number): CpuSample['server'] {
  const total = readOr(`/proc/${pid}/stat`);
  const main = readOr(`/proc/${pid}/task/${pid}/stat`);
  return total && main ? { total: statTicks(total), main: statTicks(main) } : null;
}

/**
 * The generator's processes, each with its reaped children's time: a descendant reaped by a
 * process of the tree is counted from then on in that process's children's time.
 */
function generatorTicks(pid: number | null): number | null {
  const stats = pid === null ? null : treeStats(pid);
  return stats === null ? null : stats.reduce((sum, stat) => sum + statTicks(stat, true), 0);
}

export function sampleCpu(serverPid: number, generatorPid: number | null): CpuSample {
  const line = readOr('/proc/stat')?.split('\n')[0] ?? '';
  return {
    at: performance.now(),
    server: serverTicks(serverPid),
    generator: generatorTicks(generatorPid),
    machine: line.split(/\s+/).slice(1, 9).map(Number),
  };
}

/** The shares between two samples of the same server and generator. Null when /proc gave nothing. */
export function cpuBetween(a: CpuSample, b: CpuSample, requests?: number): CpuShare | null {
  const seconds = (b.at - a.at) / 1000;
  if (seconds <= 0 || !a.server || !b.server || b.machine.length < 5) return null;
  const pct = (ticks: number) => Math.round((ticks / TICKS_PER_S / seconds) * 1000) / 10;
  const main = b.server.main - a.server.main;
  const other = b.server.total - a.server.total - main;
  const dm = b.machine.map((v, i) => v - (a.machine[i] ?? 0));
  const total = dm.reduce((s, v) => s + v, 0);
  const share = (i: number) => (total > 0 ? Math.round(((dm[i] ?? 0) / total) * 1000) / 10 : 0);
  return {
    serverMainPct: pct(main),
    serverOtherPct: pct(other),
    generatorPct: a.generator === null || b.generator === null ? null : pct(b.generator - a.generator),
    machineIdlePct: share(3),
    machineIowaitPct: share(4),
    serverUsPerRequest: requests && requests > 0 ? Math.round((((main + other) / TICKS_PER_S) * 1e6) / requests) : null,
    seconds: Math.round(seconds * 10) / 10,
  };
}

/**
 * Samples every `everyMs` while a load runs; `stop()` ends it. The generator's pid is asked for at
 * each sample (it is spawned after the recorder starts).
 */
export function recordCpu(serverPid: number, generatorPid: () => number | null, everyMs = 500): { stop(): CpuSample[] } {
  const samples: CpuSample[] = [sampleCpu(serverPid, generatorPid())];
  const timer = setInterval(() => samples.push(sampleCpu(serverPid, generatorPid())), everyMs);
  return {
    stop() {
      clearInterval(timer);
      samples.push(sampleCpu(serverPid, generatorPid()));
      return samples;
    },
  };
}

/**
 * The measured period of a generator that ran it last, for `durationS` seconds, and exited at
 * `endedAt` (performance.now()): the first sample 1 s into that period and the last one at least
 * 0.5 s before its end, so its start (connections, a generator's warm-up) and its stop are left out.
 */
export function measuredWindow(samples: CpuSample[], endedAt: number, durationS: number): { a: CpuSample; b: CpuSample } | null {
  const from = endedAt - durationS * 1000 + 1000;
  const to = endedAt - 500;
  const a = samples.find((s) => s.at >= from);
  const b = [...samples].reverse().find((s) => s.at <= to);
  return a && b && b.at - a.at >= 1000 ? { a, b } : null;
}
