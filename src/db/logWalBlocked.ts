import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { WalBlocked } from './checkpointer.js';

/** What each cause of WalBlocked is said as, with the hint on what to do. */
const SAID: Record<'reader' | 'writes', { msg: string; hint: string }> = {
  reader: {
    msg: 'the WAL cannot be reset: a reader holds an old snapshot; the -wal file grows with every commit until it ends',
    hint: 'another program holds a read transaction open on the database: end it (README, "The database")',
  },
  writes: {
    msg: 'the WAL cannot be reset: commits come back to back and leave the checkpointer no moment to reset it (no reader is the cause); the -wal file grows with every commit until the load eases',
    hint: 'sustained load past what the disk commits, or another process writing to the database in a loop',
  },
};

/**
 * What the receiver does when the checkpointer cannot reset the WAL (WalBlocked): shown in
 * receiver_sqlite_wal_blocked_seconds from the start, and logged at warn once it has lasted a
 * report interval (a minute), then each minute, with the WAL's size and its cause; its end at
 * info. A reader holding a read transaction open (a report, a BI tool's cursor) is the usual
 * cause: nothing else in the receiver's logs said why its disk was filling. Writes that never
 * leave the write lock free are the other, said otherwise: no reader is to be looked for then.
 */
export function logWalBlocked(metrics: Metrics, logger: Logger): (b: WalBlocked) => void {
  let warned = false;
  return (b) => {
    metrics.walBlockedSince.at = b.since;
    const fields = { wal_bytes: b.walBytes, blocked_seconds: Math.round(b.blockedMs / 1000) };
    if (b.since === null) {
      if (warned) logger.info(fields, 'the WAL can be reset again');
      warned = false;
    } else if (b.blockedMs > 0) {
      warned = true;
      const cause = b.cause ?? 'reader';
      logger.warn({ ...fields, cause, hint: SAID[cause].hint }, SAID[cause].msg);
    }
  };
}
