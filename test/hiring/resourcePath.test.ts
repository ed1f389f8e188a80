import { describe, expect, it } from 'vitest';
import { resourcePath } from '../../src/hiring/resourcePath.js';
import { HIRING_RESOURCES } from '../../src/hiring/types.js';

describe('resourcePath', () => {
  it('maps each resource to its versioned path', () => {
    expect(HIRING_RESOURCES.map((r) => resourcePath(r, 'abc'))).toEqual([
      '/api/v2/applications/abc/interview',
      '/api/v2/applications/abc/cv-evaluation',
      '/api/v2/applications/abc/insights',
      '/api/v1/applications/abc/interview',
    ]);
  });

  it('encodes the id into a single segment', () => {
    expect(resourcePath('insights', '../x/%2e?#')).toBe('/api/v2/applications/..%2Fx%2F%252e%3F%23/insights');
  });

  it.each(['', '.', '..'])('rejects the id %j', (id) => {
    expect(() => resourcePath('interview', id)).toThrow(TypeError);
  });
});
