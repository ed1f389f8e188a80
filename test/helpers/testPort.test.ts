import { describe, expect, it } from 'vitest';
import { freePort } from './testPort.js';

describe('freePort (tests)', () => {
  it('gives a port only once, so two asked for before either is bound (PORT, METRICS_PORT) differ', async () => {
    // Drawn at random from the worker's 1,500, 300 ports held more than one pair (the birthday
    // problem); nothing is bound here, as between a test's freePort() and its child's listen.
    const ports: number[] = [];
    for (let i = 0; i < 300; i++) ports.push(await freePort());
    expect(new Set(ports).size).toBe(300);
    for (const p of ports) expect(p >= 20_000 && p < 32_000).toBe(true);
  });
});
