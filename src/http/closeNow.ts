import type { Server } from 'node:http';

/**
 * Closes a server and every connection at once (close() alone would wait for a client stalled
 * mid-request, whose request timeout close() also stops checking).
 */
export function closeNow(s: Server): Promise<void> {
  return new Promise<void>((resolve) => {
    s.close(() => resolve());
    s.closeAllConnections();
  });
}
