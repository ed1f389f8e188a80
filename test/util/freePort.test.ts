import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { reservePort } from '../../src/util/freePort.js';

describe('reservePort', () => {
  it('release() ends the hold even while a client is connected to the held port (it waited for the client to hang up)', async () => {
    const held = await reservePort();
    const client = connect(held.port, '127.0.0.1');
    client.on('error', () => {});
    try {
      await new Promise((resolve, reject) => client.once('connect', resolve).once('error', reject));
      // A turn of the loop past the one that saw the connect, so the holding server has accepted it.
      await new Promise((resolve) => setImmediate(resolve));
      const outcome = await Promise.race([
        held.release().then(() => 'released'),
        new Promise<string>((resolve) => setTimeout(() => resolve('still held after 2 s'), 2_000).unref()),
      ]);
      expect(outcome).toBe('released');
    } finally {
      client.destroy();
      await held.release();
    }
  });
});
