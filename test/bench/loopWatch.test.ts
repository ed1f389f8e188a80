import { describe, expect, it } from 'vitest';
import { loopBetween, parseLoopMetrics } from '../../bench/lib/loopWatch.js';

/** prom-client's default metrics as the receiver's /metrics gives them (trimmed to what is read). */
const exposition = (lagS: number, gc: { kind: string; le: Record<string, number>; count: number }[]) =>
  [
    '# HELP nodejs_eventloop_lag_max_seconds The maximum recorded event loop delay.',
    '# TYPE nodejs_eventloop_lag_max_seconds gauge',
    `nodejs_eventloop_lag_max_seconds ${lagS}`,
    '# TYPE nodejs_gc_duration_seconds histogram',
    ...gc.flatMap((g) => [
      ...Object.entries(g.le).map(([le, n]) => `nodejs_gc_duration_seconds_bucket{le="${le}",kind="${g.kind}"} ${n}`),
      `nodejs_gc_duration_seconds_sum{kind="${g.kind}"} 0.5`,
      `nodejs_gc_duration_seconds_count{kind="${g.kind}"} ${g.count}`,
    ]),
    'receiver_group_commit_batch_size_count 12',
  ].join('\n');

describe('bench/lib/loopWatch', () => {
  it("reads the loop's max delay and the GC pauses over 10 and 100 ms, and takes the pauses between two scrapes", () => {
    const before = parseLoopMetrics(
      exposition(0.014, [
        { kind: 'minor', le: { '0.001': 40, '0.01': 49, '0.1': 50, '1': 50, '+Inf': 50 }, count: 50 },
        { kind: 'major', le: { '0.001': 0, '0.01': 1, '0.1': 2, '1': 2, '+Inf': 2 }, count: 2 },
      ]),
    );
    expect(before).toEqual({ lagMaxMs: 14, gcPauses: 52, gcOver10ms: 2, gcOver100ms: 0 });
    const after = parseLoopMetrics(
      exposition(1.2835, [
        { kind: 'minor', le: { '0.001': 900, '0.01': 990, '0.1': 1000, '1': 1000, '+Inf': 1000 }, count: 1000 },
        { kind: 'major', le: { '0.001': 0, '0.01': 3, '0.1': 5, '1': 6, '+Inf': 6 }, count: 6 },
      ]),
    );
    expect(loopBetween(before!, after!)).toEqual({ maxDelayMs: 1283.5, gcPauses: 954, gcOver10ms: 11, gcOver100ms: 1 });
  });

  it('says nothing (null) of metrics without the event loop delay', () => {
    expect(parseLoopMetrics('receiver_group_commit_batch_size_count 12\n')).toBeNull();
  });
});
