import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/**
 * A port for a child process of a test to listen on, taken from below the
 * kernel's ephemeral range (32768-60999 on Linux).
 *
 * `src/util/freePort` asks the kernel for a free port and closes it; the child
 * binds it a second or so later (tsx's start). In that window the kernel may
 * hand the same port to any `listen(0)` or outgoing connection of a test in the
 * other worker, and then the child fails to bind while `/healthz` is answered
 * by that other test's receiver (CI saw its signed post come back 401). Ports
 * from 20000-31999 (or, on a machine whose ephemeral range covers them, the
 * 12,000 beside that range: firstPort) are never handed out that way, each
 * vitest worker draws from its own 1,500 of them, and the walk starts at a
 * random place in the slice, so
 * two suites running at once on one machine rarely meet either; a port is
 * checked free before it is given.
 *
 * Within a worker the slice is walked in turn, so a port is not given twice
 * (before 1,500 others): a test that asks for two ports (PORT and
 * METRICS_PORT, or a second receiver's) before its children bind them gets two
 * different ones. Drawn at random, the second was the first about once in
 * 1,500, and the child then failed to start (METRICS_PORT must differ from
 * PORT, or EADDRINUSE).
 */
const PER_WORKER = 1_500;
const WORKERS = 8;
const SPAN = PER_WORKER * WORKERS;

/**
 * The first port of the slices: 20000, unless the machine's ephemeral range (`range`, the two
 * numbers of /proc/sys/net/ipv4/ip_local_port_range) covers part of 20000-31999, as on a host
 * tuned for many connections (1024-65535, 15000-64000): then the 12,000 ports below that range or
 * above it, where they fit, since inside it the kernel hands them out again. 20000 where neither
 * fits (nothing better is left).
 */
export function firstPort(range: string | null): number {
  const [lo, hi] = (range ?? '').trim().split(/\s+/).map(Number);
  if (!Number.isInteger(lo) || !Number.isInteger(hi) || hi! < 20_000 || lo! > 20_000 + SPAN - 1) return 20_000;
  if (lo! - SPAN >= 1_024) return lo! - SPAN;
  if (hi! + SPAN <= 65_535) return hi! + 1;
  return 20_000;
}

function ephemeralRange(): string | null {
  try {
    return readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8');
  } catch {
    return null;
  }
}

const FIRST = firstPort(ephemeralRange());

function workerIndex(): number {
  const id = Number(process.env.VITEST_POOL_ID ?? process.env.VITEST_WORKER_ID ?? '1');
  return Number.isInteger(id) && id > 0 ? (id - 1) % WORKERS : 0;
}

function isFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

/** The next place in the worker's slice to try: random at first, then one further per port tried. */
let next = Math.floor(Math.random() * PER_WORKER);

export async function freePort(): Promise<number> {
  const base = FIRST + workerIndex() * PER_WORKER;
  for (let tries = 0; tries < PER_WORKER; tries += 1) {
    const port = base + (next % PER_WORKER);
    next = (next + 1) % PER_WORKER;
    if (await isFree(port)) return port;
  }
  throw new Error(`no free port in ${base}-${base + PER_WORKER - 1}`);
}
