import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/childServer.js';

/** The project's Markdown that readers follow links in: README, docs/, and the READMEs beside the proof. */
const DOCS = ['README.md', ...readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`), 'bench/README.md', 'test/reliability/README.md'];

/** The text outside fenced code blocks (a `#` line or a `](…)` in a shell example is neither a heading nor a link). */
const prose = (text: string): string => text.replace(/^```[\s\S]*?^```/gm, '');

/** GitHub's anchor of a heading: lower case, punctuation dropped (but `-` and `_`), each space a `-`. */
const slug = (heading: string): string =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');

/** Every anchor a file offers: its headings' (a repeated one as `-1`, `-2`, …) and its `<a id>`/`<a name>`. */
function anchorsOf(file: string): Set<string> {
  const text = prose(readFileSync(file, 'utf8'));
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const m of text.matchAll(/^#{1,6}\s+(.+)$/gm)) {
    const s = slug(m[1]!);
    const n = seen.get(s) ?? 0;
    seen.set(s, n + 1);
    anchors.add(n === 0 ? s : `${s}-${n}`);
  }
  for (const m of text.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) anchors.add(m[1]!);
  return anchors;
}

/** The relative links of a file (`[text](target)`) that lead nowhere: no such file, or no such anchor in it. */
function brokenLinks(doc: string): string[] {
  const file = join(ROOT, doc);
  const broken: string[] = [];
  for (const m of prose(readFileSync(file, 'utf8')).matchAll(/\]\(([^)\s]+)\)/g)) {
    const target = m[1]!;
    if (/^[a-z][a-z+.-]*:/i.test(target)) continue; // https:, mailto: …
    const [path, anchor] = target.split('#') as [string, string | undefined];
    const to = path === '' ? file : resolve(dirname(file), path);
    if (!existsSync(to)) broken.push(`${target} (no file ${relative(ROOT, to)})`);
    else if (anchor !== undefined && statSync(to).isFile() && to.endsWith('.md') && !anchorsOf(to).has(anchor)) {
      broken.push(`${target} (no heading of ${relative(ROOT, to)} has the anchor #${anchor})`);
    }
  }
  return broken;
}

describe('links in README.md and docs/', () => {
  it('reads the anchors GitHub gives headings', () => {
    // The checks below would pass on anything if the anchors were wrong: pin a few of README's.
    const readme = anchorsOf(join(ROOT, 'README.md'));
    for (const a of ['quick-start', 'receiving-webhooks-post-webhooks', 'the-command-line-hiring-receiver', 'the-database-a-public-contract', 'proof-reliability-and-performance']) {
      expect(readme, a).toContain(a);
    }
    expect(slug('`events`: every verified event, exactly once')).toBe('events-every-verified-event-exactly-once');
  });

  it.each(DOCS)('%s: every relative link names a file that exists and a heading it has', (doc) => {
    expect(existsSync(join(ROOT, doc)), doc).toBe(true);
    expect(brokenLinks(doc)).toEqual([]);
  });

  it('README links to anchors of its own and to docs/ (so the check above checks something)', () => {
    const links = [...prose(readFileSync(join(ROOT, 'README.md'), 'utf8')).matchAll(/\]\((#[^)\s]+|docs\/[^)\s]+)\)/g)];
    expect(links.length).toBeGreaterThan(30);
  });
});
