/** Narrowing helpers for JSON read leniently (envelopes, payloads, fetched results). */
export type JsonRecord = Record<string, unknown>;

/** Whether the value is a plain object (arrays and primitives are not objects here). */
export const isJsonObject = (v: unknown): v is JsonRecord => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The value as a plain object, or null (arrays and primitives are not objects here). */
export const asObject = (v: unknown): JsonRecord | null => (isJsonObject(v) ? v : null);

/** The value as a string, or null. */
export const asString = (v: unknown): string | null => (typeof v === 'string' ? v : null);

/**
 * Same JSON value: objects compared by key whatever their order, arrays in order. Iterative, so
 * a value nested thousands deep (which JSON.parse accepts) is compared rather than overflowing
 * the stack.
 */
export function sameJson(a: unknown, b: unknown): boolean {
  const stack: [unknown, unknown][] = [[a, b]];
  while (stack.length > 0) {
    const [x, y] = stack.pop()!;
    if (x === y) continue;
    if (typeof x !== 'object' || typeof y !== 'object' || x === null || y === null) return false;
    if (Array.isArray(x) !== Array.isArray(y)) return false;
    if (Array.isArray(x)) {
      const ya = y as unknown[];
      if (x.length !== ya.length) return false;
      for (let i = 0; i < x.length; i++) stack.push([x[i], ya[i]]);
      continue;
    }
    const xo = x as Record<string, unknown>;
    const yo = y as Record<string, unknown>;
    const keys = Object.keys(xo);
    if (keys.length !== Object.keys(yo).length) return false;
    for (const k of keys) {
      if (!Object.prototype.hasOwnProperty.call(yo, k)) return false;
      stack.push([xo[k], yo[k]]);
    }
  }
  return true;
}

/**
 * A valid JSON text parsed for comparing with another (sameJson of two of them): every string
 * (keys too) carries a leading `s`, every number is the string `n` + its digits as written. Only
 * for comparison (and for paths, with each key's first character dropped), never to read values.
 * So two texts compare alike whatever their key order, spacing and string escapes (`"\u00e9"` is
 * `"é"`), and numbers by their literal text: JSON.parse turns 9007199254740993 and
 * 9007199254740992 into the same double, so two bodies differing only there would compare equal
 * and the second one be dropped as a duplicate; here they differ, and `1.0` differs from `1` too
 * (a body that may differ is kept as a conflict, never lost). The text must already have parsed.
 */
export function parseForComparison(text: string): unknown {
  return JSON.parse(numbersAsText(text));
}

/**
 * The JSON text with every string marked `s` and every number turned into a string marked `n`
 * (`{"a":12}` → `{"sa":"n12"}`), so that JSON.parse keeps each number's digits. Strings keep
 * their escapes (JSON.parse decodes them); keys are marked alike on both sides of a comparison.
 */
function numbersAsText(text: string): string {
  let out = '';
  let from = 0;
  let i = 0;
  const n = text.length;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      out += text.slice(from, i + 1) + 's';
      i++;
      from = i;
      while (i < n) {
        const d = text.charCodeAt(i);
        if (d === 0x5c /* \ */) i += 2;
        else if (d === 0x22) break;
        else i++;
      }
      i++; // past the closing quote (copied with the next slice)
    } else if (c === 0x2d /* - */ || (c >= 0x30 && c <= 0x39)) {
      let j = i + 1;
      while (j < n && /[0-9.eE+-]/.test(text[j]!)) j++;
      out += `${text.slice(from, i)}"n${text.slice(i, j)}"`;
      i = j;
      from = j;
    } else i++;
  }
  return out + text.slice(from);
}

/**
 * Whether a text nests arrays and objects more than `max` levels deep, brackets inside strings
 * not counted. One pass over the text, no parse: a check before JSON.parse, whose result
 * JSON.stringify cannot write past about 4,000 levels (it runs out of stack).
 */
export function jsonNestsDeeperThan(text: string, max: number): boolean {
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      for (i++; i < text.length; i++) {
        const d = text.charCodeAt(i);
        if (d === 0x5c /* \ */) i++;
        else if (d === 0x22) break;
      }
    } else if (c === 0x5b /* [ */ || c === 0x7b /* { */) {
      if (++depth > max) return true;
    } else if (c === 0x5d /* ] */ || c === 0x7d /* } */) depth--;
  }
  return false;
}
