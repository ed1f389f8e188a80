/**
 * Where a JSON text stops being valid, as "line L, column C", or null when JSON.parse takes it.
 * For error messages about files that may hold secrets or candidates' data: V8's own message
 * quotes the text around the error, and on Node 20 it often gives no position at all.
 */
export function jsonErrorAt(text: string): string | null {
  const offset = jsonErrorOffset(text);
  if (offset === null) return null;
  const before = text.slice(0, offset);
  const line = before.split('\n').length;
  return `line ${line}, column ${offset - (before.lastIndexOf('\n') + 1) + 1}`;
}

const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
const HEX4 = /^[0-9a-fA-F]{4}$/;

/** The offset of the first character JSON's grammar (RFC 8259) does not allow, or null if none. */
export function jsonErrorOffset(text: string): number | null {
  let i = 0;
  const fail = (): never => {
    throw new JsonSyntaxAt(i);
  };
  const ws = () => {
    while (i < text.length && (text[i] === ' ' || text[i] === '\t' || text[i] === '\n' || text[i] === '\r')) i++;
  };
  const string = () => {
    i++; // the opening quote
    while (i < text.length) {
      const c = text.charCodeAt(i);
      if (c === 0x22) {
        i++;
        return;
      }
      if (c === 0x5c) {
        const next = text[i + 1];
        if (next !== undefined && '"\\/bfnrt'.includes(next)) i += 2;
        else if (next === 'u' && HEX4.test(text.slice(i + 2, i + 6))) i += 6;
        else {
          i++;
          fail();
        }
      } else if (c < 0x20) fail();
      else i++;
    }
    fail();
  };
  /** `open item (, item)* close`, at the opening bracket. */
  const list = (close: string, item: () => void): void => {
    i++;
    ws();
    if (text[i] === close) {
      i++;
      return;
    }
    for (;;) {
      item();
      ws();
      if (text[i] === ',') i++;
      else if (text[i] === close) {
        i++;
        return;
      } else fail();
    }
  };
  const member = (): void => {
    ws();
    if (text[i] !== '"') fail();
    string();
    ws();
    if (text[i] !== ':') fail();
    i++;
    value();
  };
  const value = (): void => {
    ws();
    const c = text[i];
    if (c === '{') return list('}', member);
    if (c === '[') return list(']', value);
    if (c === '"') return string();
    if (c === '-' || (c !== undefined && c >= '0' && c <= '9')) {
      NUMBER.lastIndex = i;
      if (!NUMBER.test(text)) fail();
      i = NUMBER.lastIndex;
      return;
    }
    for (const literal of ['true', 'false', 'null']) {
      if (text.startsWith(literal, i)) {
        i += literal.length;
        return;
      }
    }
    fail();
  };
  try {
    value();
    ws();
    if (i < text.length) fail();
    return null;
  } catch (err) {
    if (err instanceof JsonSyntaxAt) return err.offset;
    // Nesting deeper than the stack: said as the start (JSON.parse may still take it).
    if (err instanceof RangeError) return 0;
    throw err;
  }
}

class JsonSyntaxAt {
  constructor(readonly offset: number) {}
}
