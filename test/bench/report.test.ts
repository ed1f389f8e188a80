/**
 * bench/lib/report.ts's verdicts (the MET/MISSED lines under the tables, what the README quotes):
 * a target is met by deliveries the receiver acknowledged, not by fast refusals or an empty sample.
 */
import { describe, expect, it } from 'vitest';
import type { FanOutResult } from '../../bench/lib/later.js';
import { renderMarkdown, type RateRow, type Results, type ThroughputRow } from '../../bench/lib/report.js';

const machine = { nproc: 2, cpuModel: 'test', memTotal: '1G', memFree: '1G', freeH: '', node: 'v22', kernel: 'Linux', loadAvgAtStart: '0', calibrationMs: { start: 1, end: 1 } };
const notRun = { status: 'not_enabled' as const, needs: [] };
const results = (over: Partial<Results>): Results => ({ when: 'now', machine, settings: {}, throughput: [], fixedRate: [], fanOut: notRun, replay: notRun, ...over });
const verdict = (r: Results, start: string) => renderMarkdown(r).split('\n').find((l) => l.startsWith(`- ${start}`)) ?? '';

const receiverRow = (over: Partial<ThroughputRow>): ThroughputRow => ({
  name: 'receiver LOG_LEVEL=info', generator: 'wrk', rps: 12_000, p50Ms: 1, p99Ms: 2, socketErrors: 0, non2xx: 0, status2xx: 180_000,
  peakRssMB: 100, exhausted: 0, cpu: null, ratio: 0.4, rowsStored: 180_000, acked2xx: 180_000, unanswered: 0, rowCheck: 'ok', ...over,
});
const rateRow = (over: Partial<RateRow>): RateRow => ({
  rate: 2500, name: 'receiver LOG_LEVEL=info', unanswered: 0, sentRate: 2500, p50Ms: 0.5, p99Ms: 3, p999Ms: 5, maxMs: 9, errors: 0, maxInFlight: 3,
  peakRssMB: 100, floorP50Ms: 0.1, floorP99Ms: 0.2, floorP999Ms: 0.3, sendLag: { p99: 0, p999: 0, max: 0 }, rowsStored: 37_500, acked2xx: 37_500,
  rowCheck: 'ok', meanBatch: 1, meanCommitMs: 1, catchUp: null, cpu: null, ...over,
});
const fanOut = (over: Partial<FanOutResult>): FanOutResult => ({
  status: 'measured', upstream: 'sandbox', setupS: 1, sinkConcurrency: 'default', rate: 200, warmupS: 1, durationS: 10, sinkLines: 2200, acked: 2200,
  measuredAcked: 2000, landed: 2200, notLanded: 0, latencyMs: { p50: 6, p99: 20, p999: 30, max: 40, mean: 7 }, withFetchMs: { p50: 7, p99: 20, max: 40 },
  withoutFetchMs: { p50: 5, p99: 19, max: 30 }, ackP99Ms: 3, stages: { count: 2000, settleMs: { p50: 2, p99: 9 }, deliverMs: { p50: 3, p99: 8 } }, peakRssMB: 100, loadAvg: '1 1 1', ...over,
});

describe('bench report verdicts', () => {
  it('meets the targets with every delivery acknowledged', () => {
    expect(verdict(results({ throughput: [receiverRow({})] }), 'receiver')).toMatch(/ratio 0\.400 \(target >= 0\.3\) MET/);
    expect(verdict(results({ fixedRate: [rateRow({})] }), 'fixed 2500/s')).toMatch(/p99 3\.00 ms \(target <= 10 ms\) MET/);
    expect(verdict(results({ fanOut: fanOut({}) }), 'fan-out')).toMatch(/p50 6\.0 ms \(target < 50\) MET/);
  });

  it('a throughput ratio made of non-2xx answers (401s, 503s) does not meet the target', () => {
    const v = verdict(results({ throughput: [receiverRow({ non2xx: 150_000, status2xx: 30_000, acked2xx: 30_000, rowsStored: 30_000 })] }), 'receiver');
    expect(v).toMatch(/ratio 0\.400 \(target >= 0\.3\) MISSED \(150,000 answers were not 2xx\)/);
  });

  it('a p99 at the fixed rate made of errors does not meet the target', () => {
    expect(verdict(results({ fixedRate: [rateRow({ errors: 37_500, acked2xx: 0, rowsStored: 0 })] }), 'fixed 2500/s')).toMatch(/MISSED \(37,500 errors\)/);
  });

  it('a fan-out row with nothing acknowledged (percentiles of an empty sample: 0 ms) does not meet the target', () => {
    const empty = fanOut({ acked: 0, measuredAcked: 0, landed: 0, notLanded: 0, sinkLines: 0, latencyMs: { p50: 0, p99: 0, p999: 0, max: 0, mean: 0 } });
    expect(verdict(results({ fanOut: empty }), 'fan-out')).toMatch(/p50 0\.0 ms \(target < 50\) MISSED; 0 of 0 acknowledged events landed \(none acknowledged/);
  });

  it('a peak RSS that could not be read (0: the process had exited, or no /proc) does not meet the target, nor does a work process\'s', () => {
    expect(verdict(results({ throughput: [receiverRow({})] }), 'receiver')).toMatch(/peak RSS 100\.0 MB \(target <= 128\) MET/);
    expect(verdict(results({ throughput: [receiverRow({ peakRssMB: 0 })] }), 'receiver')).toMatch(/peak RSS 0\.0 MB \(target <= 128\) MISSED/);
    expect(verdict(results({ fixedRate: [rateRow({ workPeakRssMB: 0 })] }), 'fixed 2500/s')).toMatch(/peak RSS 100\.0 \+ work 0\.0 MB MISSED/);
  });

  it('the fixed-rate rows check says how many acknowledged event ids were not stored', () => {
    const md = renderMarkdown(results({ fixedRate: [rateRow({ rowCheck: 'FAILED', ackedMissing: 2 })] }));
    expect(md).toContain('FAILED (37,500 rows, 37,500 2xx, 0 timed out; 2 acknowledged ids not stored) |');
    expect(renderMarkdown(results({ fixedRate: [rateRow({ ackedMissing: 0 })] }))).toContain('ok (37,500 rows, 37,500 2xx, 0 timed out) |');
  });

  it('a run that stopped early says so above the rows it kept', () => {
    const md = renderMarkdown(results({ throughput: [receiverRow({})], failed: 'receiver tp-info-default exited during start-up (1)' }));
    expect(md).toContain('**This run stopped early** (receiver tp-info-default exited during start-up (1)): the rows below are those measured before it');
    expect(md).toContain('| receiver LOG_LEVEL=info | 12,000 |');
    expect(renderMarkdown(results({ throughput: [receiverRow({})] }))).not.toContain('stopped early');
  });

  it("the rows check's cell says when the generator's pool ran out (a FAILED that is not a lost event)", () => {
    const md = renderMarkdown(results({ throughput: [receiverRow({ exhausted: 1_200, rowCheck: 'FAILED', acked2xx: 181_200 })] }));
    expect(md).toContain("FAILED (180,000 rows, 181,200 2xx, 0 in flight at stop; the generator's pool ran out: 1,200 requests past its end, the run is invalid)");
    expect(renderMarkdown(results({ throughput: [receiverRow({})] }))).toContain('ok (180,000 rows, 180,000 2xx, 0 in flight at stop) |');
  });

  it("the fan-out row splits its time at the receiver's settled stamp, and says ? when no event had both stamps", () => {
    expect(renderMarkdown(results({ fanOut: fanOut({}) }))).toContain('| 3.00 | 2 (9) / 3 (8) | 2,200 of 2,200 |');
    expect(renderMarkdown(results({ fanOut: fanOut({ stages: { count: 0, settleMs: { p50: 0, p99: 0 }, deliverMs: { p50: 0, p99: 0 } } }) }))).toContain('| 3.00 | ? | 2,200 of 2,200 |');
  });
});
