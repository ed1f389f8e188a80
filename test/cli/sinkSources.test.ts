import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/receiver.js';
import { cli } from './helpers.js';

const { dir, cleanup } = tempDir('receiver-cli-sinks-');
afterAll(cleanup);

describe('sink commands with only DATABASE_PATH and CONFIG_FILE', () => {
  it('take a sink filtered to the "default" source (WEBHOOK_SECRET is the server\'s, not theirs)', async () => {
    const dbPath = join(dir, 'receiver.db');
    const configFile = join(dir, 'config.json');
    writeFileSync(configFile, JSON.stringify({ sinks: [{ name: 'archive', type: 'file', path: join(dir, 'a.ndjson'), sources: ['default'] }] }));
    const env = { DATABASE_PATH: dbPath, CONFIG_FILE: configFile };
    expect((await cli(['migrate'], env)).code).toBe(0);
    const list = await cli(['sinks', 'list', '--json'], env);
    expect(list.code, list.stderr).toBe(0);
    expect(JSON.parse(list.stdout)).toMatchObject([{ name: 'archive', configured: true }]);
    const enable = await cli(['sinks', 'enable', 'archive'], env);
    expect(enable.code, enable.stderr).toBe(0);
    const replay = await cli(['replay', '--all', '--sink', 'archive', '--dry-run'], env);
    expect(replay.code, replay.stderr).toBe(0);
    // A source that is named nowhere is still refused.
    writeFileSync(configFile, JSON.stringify({ sinks: [{ name: 'archive', type: 'file', path: join(dir, 'a.ndjson'), sources: ['ghost'] }] }));
    const ghost = await cli(['sinks', 'enable', 'archive'], env);
    expect(ghost.code).toBe(1);
    expect(ghost.stderr).toContain('CONFIG_FILE sinks.0.sources.0: no source named "ghost" is configured');
  }, 40_000);
});
