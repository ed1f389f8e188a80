import { chmodSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { describe, expect, it, onTestFinished } from 'vitest';
import { rewriteWithoutLines } from '../../src/util/rewriteWithoutLines.js';
import { tempDir } from '../helpers/receiver.js';

describe('rewriteWithoutLines (erase: a file sink\'s file without the candidate\'s lines)', () => {
  it('keeps every other byte (lines across its 1 MiB reads, a last line without its newline), the mode, and leaves no temporary file', async () => {
    const { dir, cleanup } = tempDir('rewrite-');
    onTestFinished(cleanup);
    const path = join(dir, 'events.ndjson');
    const lines = Array.from({ length: 3000 }, (_, i) => `{"id":"evt-${i}","pad":"${'x'.repeat(700 + (i % 13))}","é":"ü"}`);
    writeFileSync(path, `${lines.join('\n')}\n{"id":"evt-drop"}\n{"id":"evt-last-part"`);
    chmodSync(path, 0o640);
    const drop = (l: string) => l.includes('"evt-drop"') || /"evt-\d*7"/.test(l);
    expect(await rewriteWithoutLines(path, drop, { dryRun: true })).toBe(301);
    expect(readFileSync(path, 'utf8')).toContain('evt-drop');
    expect(await rewriteWithoutLines(path, drop)).toBe(301);
    expect(readFileSync(path, 'utf8')).toBe(`${lines.filter((l) => !drop(l)).join('\n')}\n{"id":"evt-last-part"`);
    expect(statSync(path).mode & 0o777).toBe(0o640);
    expect(readdirSync(dir)).toEqual(['events.ndjson']);
    // Nothing to take out: the file is left as it was, not replaced.
    const inode = statSync(path).ino;
    expect(await rewriteWithoutLines(path, drop)).toBe(0);
    expect(statSync(path).ino).toBe(inode);
    expect(readdirSync(dir)).toEqual(['events.ndjson']);
  });

  it('reads and writes a gzipped rotated copy gzipped', async () => {
    const { dir, cleanup } = tempDir('rewrite-');
    onTestFinished(cleanup);
    const path = join(dir, 'events.ndjson.1.gz');
    writeFileSync(path, gzipSync('{"id":"a"}\n{"id":"b"}\n{"id":"c"}\n'));
    expect(await rewriteWithoutLines(path, (l) => l.includes('"b"'))).toBe(1);
    expect(gunzipSync(readFileSync(path)).toString()).toBe('{"id":"a"}\n{"id":"c"}\n');
  });
});
