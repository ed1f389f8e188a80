import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../db/schema.js';
import { immediateTransaction } from './immediateTransaction.js';

export interface BatchOptions {
  /** Between two transactions (never before the first or after the last): a running receiver's ingest commits meanwhile. */
  pause?: () => Promise<void>;
  /** Checked before each transaction: once aborted, no further one begins (those committed stay). */
  signal?: AbortSignal;
  /** After each committed transaction: rows written so far, and transactions committed. */
  onBatch?: (written: number, batches: number) => void;
}

export interface BatchOutcome {
  /** Rows written by the committed transactions. */
  written: number;
  /** `signal` ended it before its last transaction. */
  stopped: boolean;
}

/**
 * A bulk change cut short by a failure: `written` rows committed in the transactions before it
 * stay written. `cause` is what failed (rethrow it to report it as before).
 */
export class PartlyWritten extends Error {
  /** The cause's code (SQLITE_BUSY, SQLITE_FULL): what callers tell failures apart by. */
  readonly code: unknown;
  constructor(
    readonly written: number,
    override readonly cause: unknown,
  ) {
    super(cause instanceof Error ? cause.message : String(cause));
    this.name = 'PartlyWritten';
    this.code = (cause as { code?: unknown } | null)?.code;
  }
}

/**
 * The shape of every bulk change beside a running receiver (prune, dead-letters retry and discard,
 * sinks send-now, the sink housekeeping at the workers' start): one BEGIN IMMEDIATE transaction
 * per batch, so the write lock is held one batch at a time; `pause` between two; `signal` checked
 * before each; `onBatch` after each commit. `batch` writes the `index`-th batch in its
 * transaction and says how many rows it wrote and whether it was the last. A failure throws
 * PartlyWritten with the rows committed before it.
 */
export async function writeInBatches(
  db: Kysely<Database>,
  batch: (trx: Transaction<Database>, index: number) => Promise<{ written: number; last: boolean }>,
  opts: BatchOptions = {},
): Promise<BatchOutcome> {
  let written = 0;
  for (let i = 0; ; i++) {
    if (i > 0) await opts.pause?.();
    if (opts.signal?.aborted) return { written, stopped: true };
    let r: { written: number; last: boolean };
    try {
      r = await immediateTransaction(db, (trx) => batch(trx, i));
    } catch (err) {
      throw new PartlyWritten(written, err);
    }
    written += r.written;
    opts.onBatch?.(written, i + 1);
    if (r.last) return { written, stopped: false };
  }
}

/** writeInBatches over batches read beforehand (inChunks of the ids to change): `write` one per transaction. */
export async function writeBatches<B>(
  db: Kysely<Database>,
  batches: readonly B[],
  write: (trx: Transaction<Database>, batch: B) => Promise<number>,
  opts: BatchOptions = {},
): Promise<BatchOutcome> {
  if (batches.length === 0) return { written: 0, stopped: false };
  return writeInBatches(db, async (trx, i) => ({ written: await write(trx, batches[i]!), last: i === batches.length - 1 }), opts);
}
