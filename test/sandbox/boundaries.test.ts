import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

/** Issue 3: the sandbox shares no code with the receiver, so a signing bug cannot hide on both sides. */
describe('sandbox boundaries', () => {
  it('src/sandbox imports nothing from elsewhere in src/', () => {
    const root = resolve('src/sandbox');
    const files = readdirSync(root, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts'));
    expect(files.length).toBeGreaterThan(10);
    for (const file of files) {
      const source = readFileSync(join(root, file), 'utf8');
      for (const m of source.matchAll(/from '(\.[^']+)'/g)) {
        const target = relative(root, resolve(dirname(join(root, file)), m[1]!));
        expect(target.startsWith('..'), `${file} imports ${m[1]}`).toBe(false);
      }
    }
  });
});
