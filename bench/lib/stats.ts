/** Percentiles of a latency sample (nearest rank), in the sample's unit, rounded to µs. */
export function summarize(samples: number[]): { count: number; p50: number; p99: number; p999: number; max: number; mean: number } {
  if (samples.length === 0) return { count: 0, p50: 0, p99: 0, p999: 0, max: 0, mean: 0 };
  const s = Float64Array.from(samples).sort();
  const at = (q: number) => s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))]!;
  const r = (x: number) => Math.round(x * 1000) / 1000;
  let sum = 0;
  for (const x of s) sum += x;
  return { count: s.length, p50: r(at(0.5)), p99: r(at(0.99)), p999: r(at(0.999)), max: r(s[s.length - 1]!), mean: r(sum / s.length) };
}
