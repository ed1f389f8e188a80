/**
 * The two measurements of issue 8 that need parts still being built: the
 * file sink fan-out and the `replay` CLI. Each is a function run.ts calls
 * with --fanout / --replay; until their prerequisites exist they report what
 * is missing instead of a number.
 *
 * Fan-out latency (target: p50 < 50 ms): time from a delivery's 2xx to its
 * message landing in a file sink, with the hiring stub answering at once.
 *   Needs: (1) a `file` sink in CONFIG_FILE `sinks` whose options name the
 *   output path (src/sinks/kinds/file.ts); (2) one JSON line per message
 *   carrying the event id (field name to confirm, e.g. `event.id`);
 *   (3) the file written as soon as the delivery is made (no batching
 *   timer, or a documented one). Then: start the receiver with that
 *   CONFIG_FILE, run bench/loadgen.ts in `open` mode at a modest rate (e.g.
 *   200/s for 10 s) extended to print each event id's ack time
 *   (Date.now() at the 2xx, same host clock), tail the sink file every 5 ms
 *   recording when each event id's line appears, and report p50/p99/max of
 *   landed - acked. Needs a fast hiring stub (bench/servers/hiringStub.mjs)
 *   so result events settle at once; ingest-only events settle without it.
 *
 * Replay throughput (target: >= 5,000 events/s): stored events per second
 * through `replay` to a file sink.
 *   Needs: (1) the CLI built (`dist/cli.js`, bin `hiring-receiver`) with a
 *   `replay` command, its flags (which events: all / --since / --source;
 *   which sink), and whether it waits until every message is written or
 *   only enqueues; (2) the same file sink. Then: fill a fresh database with
 *   N events (e.g. 50,000: POST them through a receiver with
 *   WORKER_CONCURRENCY=0, or the ingest writer directly), run
 *   `node dist/cli.js replay ...` as a child process, time it to exit (and
 *   until the sink file holds N lines if replay only enqueues), report N /
 *   seconds and the line count check.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';

export interface Pending {
  status: 'not_enabled' | 'missing_prerequisites';
  needs: string[];
}

export interface LaterContext {
  root: string;
}

export async function measureFanOut(ctx: LaterContext): Promise<Pending> {
  const needs: string[] = [];
  if (!existsSync(join(ctx.root, 'dist/sinks/kinds/file.js'))) needs.push('file sink built (dist/sinks/kinds/file.js)');
  needs.push('file sink message format with the event id (confirm field) and CONFIG_FILE sinks shape for type "file"');
  needs.push('loadgen open mode printing per-event ack times (small extension of bench/loadgen.ts)');
  return { status: 'not_enabled', needs };
}

export async function measureReplay(ctx: LaterContext): Promise<Pending> {
  const needs: string[] = [];
  if (!existsSync(join(ctx.root, 'dist/cli.js'))) needs.push('CLI built (dist/cli.js)');
  needs.push('`replay` command: flags to select events and the target sink; whether it returns after writing or after enqueueing');
  needs.push('file sink (same as fan-out)');
  return { status: 'not_enabled', needs };
}
