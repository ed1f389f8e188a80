import { describe, expect, it } from 'vitest';
import { parseApiErrors } from '../../src/hiring/parseApiErrors.js';

describe('parseApiErrors', () => {
  it('parses the error array of spec 2.1', () => {
    const body = JSON.stringify([
      { code: 'required', detail: 'This field is required.', attr: 'email' },
      { code: 'not_found', detail: 'Not found.', attr: null },
    ]);
    expect(parseApiErrors(body)).toEqual({
      errors: [
        { code: 'required', detail: 'This field is required.', attr: 'email' },
        { code: 'not_found', detail: 'Not found.', attr: null },
      ],
      rawBody: null,
    });
  });

  it('is lenient about element shapes and drops unknown fields', () => {
    const body = JSON.stringify([{ code: 5, detail: null, extra: 1 }, 'oops', null, [1], { code: 'error' }]);
    expect(parseApiErrors(body)).toEqual({
      errors: [
        { code: '', detail: '', attr: null },
        { code: 'error', detail: '', attr: null },
      ],
      rawBody: null,
    });
  });

  it('gives an empty list for an empty array', () => {
    expect(parseApiErrors('[]')).toEqual({ errors: [], rawBody: null });
  });

  it.each([
    ['an object', '{"detail":"Not found."}'],
    ['HTML', '<html><body>Bad gateway</body></html>'],
    ['empty text', ''],
    ['truncated JSON', '[{"code":'],
  ])('keeps %s as raw text', (_label, body) => {
    expect(parseApiErrors(body)).toEqual({ errors: [], rawBody: body });
  });

  it('truncates raw text to 500 characters', () => {
    const result = parseApiErrors('e'.repeat(501) + 'TAIL');
    expect(result.rawBody).toBe('e'.repeat(500));
  });

  it('does not split a surrogate pair when truncating', () => {
    const result = parseApiErrors('a'.repeat(499) + '😀' + 'b');
    expect(result.rawBody).toBe('a'.repeat(499));
  });
});
