import { createServer } from 'node:net';

/** A TCP port on 127.0.0.1 that was free a moment ago (the demo, the bench, scripts and tests start servers on it). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}
