import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { WalBlocked } from './openDatabase.js';

/**
 * What the receiver does when the checkpointer cannot reset the WAL (WalBlocked): shown in
 * receiver_sqlite_wal_blocked_seconds from the start, and logged at warn once it has lasted a
 * report interval (a minute), then each minute, with the WAL's size; its end at info. A reader
 * holding a read transaction open (a report, a BI tool's cursor) is the usual cause: nothing
 * else in the receiver's logs said why its disk was filling.
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
      logger.warn(
        { ...fields, hint: 'another program holds a read transaction open on the database: end it (README, "The database")' },
        'the WAL cannot be reset: most likely a reader holds an old snapshot; the -wal file grows with every commit until it ends',
      );
    }
  };
}
