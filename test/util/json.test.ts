import { describe, expect, it } from 'vitest';
import { parseForComparison, sameJson } from '../../src/util/json.js';

/** Two texts compared as ingest compares a repeat with the stored event (eventStore.ts repeatOutcome). */
const sameJsonText = (a: string, b: string) => sameJson(parseForComparison(a), parseForComparison(b));

describe('sameJson of parseForComparison: the same event serialized otherwise', () => {
  it('ignores key order, spacing and string escapes', () => {
    expect(sameJsonText('{"a":1,"b":[1,2,{"c":"é"}]}', '{ "b" : [1, 2, {"c": "\\u00e9"}], "a": 1 }')).toBe(true);
    expect(sameJsonText('{"s":"a \\"quoted\\" 12, [x]"}', '{"s": "a \\"quoted\\" 12, [x]"}')).toBe(true);
  });

  it('tells apart what differs: a value, an array order, a missing key, a string against a number', () => {
    expect(sameJsonText('{"a":[1,2]}', '{"a":[2,1]}')).toBe(false);
    expect(sameJsonText('{"a":1,"b":null}', '{"a":1}')).toBe(false);
    expect(sameJsonText('{"a":"1"}', '{"a":1}')).toBe(false);
    expect(sameJsonText('{"a":true}', '{"a":"true"}')).toBe(false);
  });

  it('compares numbers as written, so values JSON.parse rounds to one double still differ', () => {
    expect(sameJson(JSON.parse('9007199254740993'), JSON.parse('9007199254740992'))).toBe(true);
    expect(sameJsonText('{"n":9007199254740993}', '{"n":9007199254740992}')).toBe(false);
    expect(sameJsonText('{"n":-1.5e3}', '{ "n" : -1.5e3 }')).toBe(true);
    expect(sameJsonText('{"n":1.0}', '{"n":1}')).toBe(false);
  });

  it('compares values nested deeper than the call stack allows recursion', () => {
    const deep = (inner: string) => `${'['.repeat(50_000)}${inner}${']'.repeat(50_000)}`;
    expect(sameJsonText(deep('1'), deep(' 1 '))).toBe(true);
    expect(sameJsonText(deep('1'), deep('2'))).toBe(false);
  });
});
