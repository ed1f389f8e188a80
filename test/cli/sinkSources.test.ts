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

  it('say what a refused source or sink name lacks: one starting with "_", "." or "-" (README: "starting with a letter or digit")', async () => {
    const configFile = join(dir, 'names.json');
    const rule = 'must be 1-64 letters, digits, "_", "." or "-", starting with a letter or a digit';
    writeFileSync(configFile, JSON.stringify({ sinks: [{ name: '_archive', type: 'stdout' }] }));
    const sinks = await cli(['sinks', 'list'], { DATABASE_PATH: join(dir, 'names.db'), CONFIG_FILE: configFile });
    expect(sinks.stderr).toContain(`CONFIG_FILE sinks.0.name: ${rule}`);
    const source = { name: '-acme', secrets: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', api_url: 'https://hiring.example.com', api_key: 'sk-test.unused' };
    writeFileSync(configFile, JSON.stringify({ sources: [source] }));
    const webhooks = await cli(['webhooks', 'list'], { CONFIG_FILE: configFile });
    expect({ code: webhooks.code, stdout: webhooks.stdout }).toEqual({ code: 1, stdout: '' });
    expect(webhooks.stderr).toContain(`CONFIG_FILE sources.0.name: ${rule}`);
  }, 40_000);
});
