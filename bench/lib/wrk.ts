import { appendFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { execFileSync, type ChildProcess } from 'node:child_process';
import { deliveryLine, signDeliveries, type SigningSecret, type Template } from './deliveries.js';
import { runCommand } from './processes.js';

export interface LoadResult {
  generator: string;
  requests: number;
  durationS: number;
  rps: number;
  latencyMs: { p50: number; p90: number; p99: number; p999: number; max: number; mean: number };
  /** socket errors (connect/read/write/timeout) */
  socketErrors: number;
  status2xx: number;
  non2xx: number;
  /** 2xx answers whose body said "accepted" (a new event row) */
  accepted: number;
  /** requests written but not answered when the generator stopped (may or may not be committed) */
  unanswered: number;
  /** requests that found the pre-signed pool empty (the run is then invalid for the row check) */
  exhausted: number;
  pool: number;
}

export function wrkAvailable(): string | null {
  try {
    return execFileSync('wrk', ['-v'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).split('\n')[0] ?? 'wrk';
  } catch (err) {
    // `wrk -v` prints its version and usage and exits 1.
    const out = `${(err as { stdout?: string }).stdout ?? ''}`;
    return out.startsWith('wrk') ? (out.split('\n')[0] ?? 'wrk') : null;
  }
}

const luaString = (s: string) => `[==[${s}]==]`;

/**
 * Signs `perThread` deliveries for each wrk thread and writes the pool files
 * the Lua script reads at init. Resolves with the pool directory.
 */
export async function writePool(dir: string, secret: SigningSecret, templates: Template[], threads: number, perThread: number, port: number): Promise<string> {
  await writeShards(dir, secret, templates, threads, perThread);
  return writeTemplates(dir, templates, port);
}

/** Deliveries signed and written per step of writeShards, between which the event loop runs. */
const SIGN_CHUNK = 20_000;

/**
 * The pool's signed deliveries (the large part: about 170 bytes a delivery), one shard per wrk
 * thread. Port-free, so a receiver row's pools are written before its server starts (and before
 * the `sync` that precedes it): written between its warm-up and its measured period, 100 MB of
 * them were signed (about 19 s, the receiver idle) and written back to the disk the receiver's
 * fsyncs went to, during the measured period. Signed SIGN_CHUNK at a time with the event loop
 * let in between, so a Ctrl-C during the 20-odd seconds of a large pool is handled at once (each
 * chunk's timestamp is its own: the first is the oldest).
 */
export async function writeShards(dir: string, secret: SigningSecret, templates: Template[], threads: number, perThread: number): Promise<string> {
  mkdirSync(dir, { recursive: true });
  for (let t = 1; t <= threads; t++) {
    const file = join(dir, `shard-${t}.tsv`);
    writeFileSync(file, '');
    for (let done = 0; done < perThread; done += SIGN_CHUNK) {
      const lines = signDeliveries(secret, templates, Math.min(SIGN_CHUNK, perThread - done)).map(deliveryLine);
      appendFileSync(file, `${lines.join('\n')}\n`);
      await new Promise((r) => setImmediate(r));
    }
  }
  return dir;
}

/** The pool's request templates, with the server's address in their `Host`. */
export function writeTemplates(dir: string, templates: Template[], port: number): string {
  const types = templates.map((t) => `{${t.parts.map(luaString).join(',')}}`).join(',\n');
  writeFileSync(join(dir, 'templates.lua'), `return { path = "/webhooks", host = "127.0.0.1:${port}", types = {\n${types}\n} }\n`);
  return dir;
}

export interface WrkOptions {
  url: string;
  luaScript: string;
  poolDir: string;
  wrap: boolean;
  threads: number;
  connections: number;
  durationS: number;
  cwd: string;
  /** Gets wrk's process once it is spawned (for the CPU accounting of the measured period). */
  onSpawn?: (child: ChildProcess) => void;
}

export async function runWrk(o: WrkOptions): Promise<LoadResult> {
  const args = ['-t', String(o.threads), '-c', String(o.connections), '-d', `${o.durationS}s`, '--timeout', '10s', '-s', o.luaScript, `${o.url}/webhooks`, '--', o.poolDir, o.wrap ? '1' : '0'];
  const { code, stdout, stderr } = await runCommand('wrk', args, { cwd: o.cwd, timeoutMs: (o.durationS + 60) * 1000, ...(o.onSpawn ? { onSpawn: o.onSpawn } : {}) });
  const line = stdout.split('\n').find((l) => l.startsWith('BENCH_JSON '));
  if (code !== 0 || !line) throw new Error(`wrk failed (exit ${code}): ${stderr}\n${stdout}`);
  const j = JSON.parse(line.slice('BENCH_JSON '.length)) as {
    requests: number; duration_us: number;
    errors: { connect: number; read: number; write: number; status: number; timeout: number };
    latency_us: { p50: number; p90: number; p99: number; p999: number; max: number; mean: number };
    issued: number; exhausted: number; s2xx: number; s4xx: number; s5xx: number; sother: number; accepted: number; pool: number;
  };
  const ms = (us: number) => Math.round(us) / 1000;
  const durationS = j.duration_us / 1e6;
  const answered = j.s2xx + j.s4xx + j.s5xx + j.sother;
  return {
    generator: 'wrk',
    requests: j.requests,
    durationS,
    rps: j.requests / durationS,
    latencyMs: { p50: ms(j.latency_us.p50), p90: ms(j.latency_us.p90), p99: ms(j.latency_us.p99), p999: ms(j.latency_us.p999), max: ms(j.latency_us.max), mean: ms(j.latency_us.mean) },
    socketErrors: j.errors.connect + j.errors.read + j.errors.write + j.errors.timeout,
    status2xx: j.s2xx,
    non2xx: j.s4xx + j.s5xx + j.sother,
    accepted: j.accepted,
    unanswered: Math.max(0, j.issued - answered),
    exhausted: j.exhausted,
    pool: j.pool,
  };
}
