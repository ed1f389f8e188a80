import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from '../observability/logger.js';

const connectionsOf = new WeakMap<Server, Set<Socket>>();

/**
 * Keeps the open connections of `s` (from its listen on), for closeWithinGrace: Node's
 * closeIdleConnections() counts a connection idle only once a request on it has ended, so one on
 * which nothing was sent yet (a spare one a sender or a proxy opened ahead, or one left after an
 * aborted request) held stop() for the whole SHUTDOWN_GRACE_MS, which then warned of a request in
 * progress.
 */
export function trackConnections(s: Server): void {
  const sockets = new Set<Socket>();
  connectionsOf.set(s, sockets);
  s.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
}

/** Closes the connections with no request in progress: those idle after a request, and those on which nothing was received. */
function closeUnused(s: Server): void {
  s.closeIdleConnections();
  for (const socket of connectionsOf.get(s) ?? []) if (socket.bytesRead === 0) socket.destroy();
}

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
    const idle = setInterval(() => closeUnused(s), 25);
    s.close(() => {
      clearTimeout(grace);
      clearInterval(idle);
      resolve();
    });
    closeUnused(s);
  });
}
