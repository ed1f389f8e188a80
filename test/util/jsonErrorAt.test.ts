import { describe, expect, it } from 'vitest';
import { jsonErrorAt, jsonErrorOffset } from '../../src/util/jsonErrorAt.js';

describe('jsonErrorAt (where a file stops being JSON, without quoting it)', () => {
  it.each([
    ['{"email":jane.doe@example.com}', 9, 'line 1, column 10'],
    ['{\n  "a": 1,\n  "b": tru\n}', 19, 'line 3, column 8'],
    ['{"a": 1,}', 8, 'line 1, column 9'],
    ['[1, 2', 5, 'line 1, column 6'],
    ['', 0, 'line 1, column 1'],
    ['{"a": "x\ny"}', 8, 'line 1, column 9'],
    ['{"a": "\\q"}', 8, 'line 1, column 9'],
    ['{"a": 01}', 7, 'line 1, column 8'],
    ['{"a": 1} x', 9, 'line 1, column 10'],
    ["{'a': 1}", 1, 'line 1, column 2'],
  ])('finds the error in %j', (text, offset, said) => {
    expect(() => JSON.parse(text)).toThrow(SyntaxError);
    expect(jsonErrorOffset(text)).toBe(offset);
    expect(jsonErrorAt(text)).toBe(said);
  });

  it.each(['{}', '[]', ' {"a": [1, -2.5e3, true, false, null, "\\u00e9\\n", {"b": {}}]} ', '"x"', '0'])('takes %j as JSON.parse does', (text) => {
    expect(() => JSON.parse(text)).not.toThrow();
    expect(jsonErrorAt(text)).toBeNull();
  });
});
