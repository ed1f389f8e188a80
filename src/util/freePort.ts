import { createServer } from 'node:net';

/** A port held on 127.0.0.1 until `release()`, so nothing else takes it while it is being set up. */
export interface PortReservation {
  port: number;
  release(): Promise<void>;
}

/**
 * A TCP port on 127.0.0.1, held by a listening socket until `release()`. The kernel may hand a
 * released port to anything else at once, so release it right before listening on it: the demo
 * registers its receiver's URL and builds the receiver while the port is held.
 */
export function reservePort(): Promise<PortReservation> {
  return new Promise((resolve, reject) => {
    // A connection while it is held is closed at once (the client retries, as if refused): kept
    // open, close() waited for it, and release() with it, as long as the client kept it open.
    const s = createServer((socket) => socket.destroy());
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      resolve({ port, release: () => new Promise<void>((done) => s.close(() => done())) });
    });
  });
}

/** A TCP port on 127.0.0.1 that was free a moment ago (the bench and scripts start servers on it). */
export async function freePort(): Promise<number> {
  const reserved = await reservePort();
  await reserved.release();
  return reserved.port;
}
