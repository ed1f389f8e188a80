import type { Server } from 'node:http';
import type { Logger } from '../observability/logger.js';

/**
 * Stops the server accepting and waits for the requests in progress, up to SHUTDOWN_GRACE_MS
 * (`graceMs`); `abandonCommits` runs when the grace has passed, before the connections are cut.
 */
export function closeWithinGrace(s: Server, graceMs: number, logger: Logger, abandonCommits: () => void): Promise<void> {
  return new Promise<void>((resolve) => {
    // close() also stops Node's checks of requestTimeout/headersTimeout, so a client stalled
    // mid-request would hold the shutdown until the orchestrator's SIGKILL. After the grace,
    // its connection is closed: a delivery not answered yet is retried by the service.
    const grace = setTimeout(() => {
      logger.warn({ graceMs }, 'closing connections with a request still in progress after SHUTDOWN_GRACE_MS');
      // Deliveries still waiting for the write lock fail uncommitted first, and are answered
      // 503 (Retry-After) before their connections close. Cut first, the sender got a reset
      // (and one whose retried commit went through before the abandon, a reset for a delivery
      // stored).
      abandonCommits();
      setImmediate(() => s.closeAllConnections());
    }, graceMs);
    // A keep-alive connection whose request ends during the grace goes idle and stays open:
    // closed as soon as it is idle, so stop() does not wait out the grace for it.
    const idle = setInterval(() => s.closeIdleConnections(), 25);
    s.close(() => {
      clearTimeout(grace);
      clearInterval(idle);
      resolve();
    });
    s.closeIdleConnections();
  });
}
