import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { firstPort, freePort } from './testPort.js';

describe('freePort (tests)', () => {
  it('gives a port only once, so two asked for before either is bound (PORT, METRICS_PORT) differ', async () => {
    // Drawn at random from the worker's 1,500, 300 ports held more than one pair (the birthday
    // problem); nothing is bound here, as between a test's freePort() and its child's listen.
    const ports: number[] = [];
    for (let i = 0; i < 300; i++) ports.push(await freePort());
    expect(new Set(ports).size).toBe(300);
    let range: string | null = null;
    try {
      range = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8');
    } catch {
      // not Linux: the default slices
    }
    const [lo, hi] = (range ?? '0 0').trim().split(/\s+/).map(Number);
    // Outside the kernel's ephemeral range, where it has room for them.
    for (const p of ports) expect(p < lo! || p > hi! || firstPort(range) === 20_000, `${p} in ${range}`).toBe(true);
  });

  it('takes its slices outside the kernel\'s ephemeral range where they fit beside it', () => {
    expect(firstPort('32768\t60999\n')).toBe(20_000); // Linux's default
    expect(firstPort(null)).toBe(20_000);
    expect(firstPort('15000 64000')).toBe(3_000); // 3000-14999
    expect(firstPort('20000 30000')).toBe(8_000);
    expect(firstPort('2000 40000')).toBe(40_001); // 40001-52000
    expect(firstPort('1024 65535')).toBe(20_000); // no room: nothing better
    expect(firstPort('49152 65535')).toBe(20_000); // IANA's: clear of it already
  });
});
