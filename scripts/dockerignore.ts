/**
 * .dockerignore read as Docker reads it (moby/patternmatcher, the matcher `docker build` and
 * buildx use), for the dry run: what of the checkout is in the build context, so a COPY replayed
 * from the checkout takes what the image's would, and a pattern that leaves out something the
 * Dockerfile copies fails there and in test/deploy, not at the first `docker build`.
 *
 * The rules: a line starting with `#` is a comment; a pattern is cleaned (`./a/` is `a`, a
 * leading `/` is dropped) and matched against the whole path from the context's root, `*` and `?`
 * within one path segment, `**` across any number of them (none too); a path is left out when it
 * or one of its parent folders matches; `!pattern` takes back what it matches; the last rule that
 * matches decides. So `test` leaves out `test/x.ts` but not `src/test/x.ts`, while `**\/*.sql`
 * leaves out every migration.
 */
import { readdirSync, statSync } from 'node:fs';
import { join, posix } from 'node:path';

export interface IgnoreRule {
  /** The pattern as cleaned, without its `!`. */
  pattern: string;
  /** `!pattern`: takes back what earlier rules left out. */
  exception: boolean;
  regex: RegExp;
}

/** A COPY source or a pattern as a path from the context's root: `./src/` is `src`. */
export const contextPath = (path: string): string => posix.normalize(path).replace(/\/+$/, '');

/** One cleaned pattern → the regular expression Docker's matcher builds from it. */
function compile(pattern: string): RegExp {
  let re = '^';
  for (let i = 0; i < pattern.length; i++) {
    const ch = pattern[i]!;
    if (ch === '*' && pattern[i + 1] === '*') {
      i++;
      if (pattern[i + 1] === '/') i++; // `**/` is `**`
      re += i + 1 >= pattern.length ? '.*' : '(.*/)?';
    } else if (ch === '*') re += '[^/]*';
    else if (ch === '?') re += '[^/]';
    else if (ch === '\\' && i + 1 < pattern.length) re += `\\${pattern[++i]}`;
    else if (ch === '[' || ch === ']') re += ch; // character classes, as in Go's filepath.Match
    else re += ch.replace(/[.+()|{}$^]/, '\\$&');
  }
  return new RegExp(`${re}$`);
}

/** The rules of a .dockerignore file's text, in order. */
export function parseDockerignore(text: string): IgnoreRule[] {
  const rules: IgnoreRule[] = [];
  for (const [n, raw] of text.replace(/^\uFEFF/, '').split(/\r?\n/).entries()) {
    if (raw.startsWith('#')) continue;
    let line = raw.trim();
    if (!line) continue;
    const exception = line.startsWith('!');
    if (exception) line = line.slice(1).trim();
    if (!line) throw new Error(`.dockerignore line ${n + 1}: "!" alone is not a pattern`);
    let pattern = contextPath(line);
    if (pattern.length > 1 && pattern.startsWith('/')) pattern = pattern.slice(1);
    if (pattern === '.') continue;
    rules.push({ pattern, exception, regex: compile(pattern) });
  }
  return rules;
}

/** Is `path` (from the context's root, `/`-separated) left out of the build context? */
export function isIgnored(rules: readonly IgnoreRule[], path: string): boolean {
  const parts = path.split('/');
  const candidates = parts.map((_, i) => parts.slice(0, i + 1).join('/'));
  let ignored = false;
  for (const rule of rules) {
    // A rule that cannot change the verdict is skipped, as Docker's matcher does.
    if (rule.exception !== ignored) continue;
    if (candidates.some((c) => rule.regex.test(c))) ignored = !rule.exception;
  }
  return ignored;
}

/**
 * The files below each of `sources` (paths from `root`, the context) that the rules leave out,
 * as paths from `root`; a source left out whole, or absent, is listed itself.
 */
export function leftOutOfContext(root: string, sources: readonly string[], rules: readonly IgnoreRule[]): string[] {
  const out: string[] = [];
  const walk = (rel: string): void => {
    let st;
    try {
      st = statSync(join(root, rel));
    } catch {
      out.push(rel);
      return;
    }
    if (!st.isDirectory()) {
      if (isIgnored(rules, rel)) out.push(rel);
      return;
    }
    for (const name of readdirSync(join(root, rel)).sort()) walk(`${rel}/${name}`);
  };
  for (const source of sources) {
    const rel = contextPath(source);
    if (isIgnored(rules, rel)) out.push(rel);
    else walk(rel);
  }
  return out;
}
