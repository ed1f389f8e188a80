/**
 * Summarises a V8 .cpuprofile (from `node --cpu-prof`, e.g. `npx tsx bench/run.ts --cpu-prof`):
 * self time by function and by file/package, so "where does the time go" has numbers.
 *   npx tsx bench/profileSummary.ts bench/results/profiles/<file>.cpuprofile [top=25]
 */
import { readFileSync } from 'node:fs';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
const [file, topArg] = process.argv.slice(2);
if (!file) throw new Error('usage: profileSummary.ts <file.cpuprofile> [top]');
const prof = JSON.parse(readFileSync(file, 'utf8')) as { nodes: Node[]; samples: number[]; timeDeltas: number[] };
const byId = new Map(prof.nodes.map((n) => [n.id, n]));
const self = new Map<number, number>();
prof.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (prof.timeDeltas[i] ?? 0)));
const total = [...self.values()].reduce((a, b) => a + b, 0);

const where = (url: string) => {
  if (!url) return '(native/vm)';
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (m) return m[1]!;
  if (url.startsWith('node:')) return url;
  // `npm run build` bundles these packages into dist/vendor/<package>.js (scripts/bundle-vendor.mjs):
  // their time is the package's, as from node_modules.
  const v = /\/dist\/vendor\/([^/]+)\.js$/.exec(url);
  if (v) return `${v[1]} (bundled)`;
  const d = /\/dist\/(.+)$/.exec(url);
  return d ? `dist/${d[1]}` : url;
};
const fnTotals = new Map<string, number>();
const fileTotals = new Map<string, number>();
for (const [id, us] of self) {
  const n = byId.get(id)!;
  const f = `${n.callFrame.functionName || '(anonymous)'} ${where(n.callFrame.url)}:${n.callFrame.lineNumber + 1}`;
  fnTotals.set(f, (fnTotals.get(f) ?? 0) + us);
  const w = where(n.callFrame.url);
  fileTotals.set(w, (fileTotals.get(w) ?? 0) + us);
}
const top = Number(topArg ?? 25);
const pct = (us: number) => `${((100 * us) / total).toFixed(1).padStart(5)}%`;
console.log(`total sampled ${(total / 1e6).toFixed(2)} s`);
console.log('\nself time by file/package:');
for (const [k, v] of [...fileTotals].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${pct(v)}  ${k}`);
console.log('\nself time by function:');
for (const [k, v] of [...fnTotals].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${pct(v)}  ${k}`);
