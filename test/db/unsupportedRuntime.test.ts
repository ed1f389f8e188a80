import { spawn, spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join, resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { unsupportedRuntime } from '../../src/db/unsupportedRuntime.js';
import { ROOT } from '../helpers/childServer.js';

const TSX = `${ROOT}node_modules/tsx/dist/loader.mjs`;
// Makes the child's Node.js report Node-API 9, as Node.js 20 does (process.versions is not frozen).
const NAPI_9 = `data:text/javascript,Object.defineProperty(process.versions,'napi',{value:'9'})`;

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** Runs an entry file with `node` and `preload`, a fresh DATABASE_PATH (bounded: killed after 20 s). */
async function run(node: string, entry: string, args: string[], preload: string[] = []) {
  const dir = mkdtempSync(join(tmpdir(), 'runtime-'));
  dirs.push(dir);
  const database = join(dir, 'receiver.db');
  const child = spawn(node, [...preload, '--import', TSX, `${ROOT}${entry}`, ...args], {
    cwd: ROOT,
    // Its temp folder too: what a refused start leaves there is counted (`scratchLeft`; tsx's own cache aside).
    env: { PATH: process.env.PATH ?? '', TMPDIR: dir, DATABASE_PATH: database, WEBHOOK_SECRET: 'whsec_dGVzdHNlY3JldHRlc3RzZWNyZXQ=', HIRING_API_URL: 'http://127.0.0.1:9', HIRING_API_KEY: 'sk-test.key', PORT: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  child.stdout.resume();
  const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((r) => child.on('exit', (c, s) => r([c, s])));
  clearTimeout(timer);
  return { code, signal, stderr, databaseCreated: existsSync(database), scratchLeft: readdirSync(dir).filter((n) => n !== 'receiver.db' && !n.startsWith('tsx-')) };
}

/** A `node` on PATH, outside this checkout's node_modules, whose Node-API is older than 10 (CI's system Node.js 20). */
function olderNodeOnPath(): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (!dir || resolve(dir).startsWith(resolve(ROOT, 'node_modules'))) continue;
    const bin = join(dir, 'node');
    try {
      accessSync(bin, constants.X_OK);
    } catch {
      continue;
    }
    const napi = Number(spawnSync(bin, ['-p', 'process.versions.napi'], { encoding: 'utf8' }).stdout.trim());
    if (napi < 10) return bin;
  }
  return undefined;
}

describe('a Node.js too old for the SQLite driver', () => {
  it('is named, with the version it needs', () => {
    const problem = unsupportedRuntime({ node: '20.20.2', napi: '9' });
    expect(problem).toMatch(/^Node\.js 20\.20\.2 cannot run the receiver: its SQLite driver \(better-sqlite3 13\) needs Node-API 10, which Node\.js has from 22\.14\.0 \(this one has Node-API 9\)/);
    expect(unsupportedRuntime({ node: '22.13.1', napi: '9' })).toContain('Use Node.js 22.14 or later 22.x, 24.x or 26.x');
    expect(unsupportedRuntime({ node: '1.0.0' })).toContain('(this one has no Node-API version)');
  });

  it('names the Node.js major that `npm ci` installs for the npm scripts (the dev dependency tools/pinned-node)', () => {
    // The message is hand-written: c652e14 moved the dev dependency from 24 to 22 and had to edit it too.
    const pkg = JSON.parse(readFileSync(`${ROOT}tools/pinned-node/package.json`, 'utf8')) as { version: string };
    const major = /^(\d+)\./.exec(pkg.version)![1];
    expect(unsupportedRuntime({ node: '20.20.2', napi: '9' })).toContain(`run on the Node.js ${major} that \`npm ci\` installs with the dev dependencies`);
  });

  it('is not said of one with Node-API 10 or later', () => {
    expect(unsupportedRuntime({ node: '22.14.0', napi: '10' })).toBeNull();
    expect(unsupportedRuntime({ node: '24.21.0', napi: '10' })).toBeNull();
    expect(unsupportedRuntime({ node: '99.0.0', napi: '12' })).toBeNull();
    // This test's own runtime runs the suite, so it must be one.
    expect(unsupportedRuntime()).toBeNull();
  });

  it.each([
    ['src/cli/main.ts', ['migrate']],
    ['src/cli/main.ts', ['serve']],
    ['src/main.ts', []],
    // The bench opens the receivers' databases itself (`npx tsx bench/run.ts` runs on the machine's node).
    ['bench/run.ts', ['--no-build', '--replay']],
  ])('%s %j refuses to start, in one line, and creates no database', async (entry, args) => {
    const r = await run(process.execPath, entry, args, ['--import', NAPI_9]);
    expect(r.signal).toBeNull();
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^error: Node\.js \S+ cannot run the receiver: its SQLite driver \(better-sqlite3 13\) needs Node-API 10, .*\n$/);
    expect(r.databaseCreated).toBe(false);
    // Nothing left behind (the bench made its scratch folder before the check, and kept it).
    expect(r.scratchLeft).toEqual([]);
  });

  // better-sqlite3 13's module loads on Node.js 20 and the first database it opens ends the process
  // with SIGSEGV. Where such a Node.js is on PATH (CI machines have Node.js 20 as the system's), the
  // CLI run with it says why instead.
  const older = olderNodeOnPath();
  it.skipIf(older === undefined)('run with an older Node.js on PATH, the CLI says why instead of crashing', async () => {
    const r = await run(older!, 'src/cli/main.ts', ['migrate']);
    expect(r.signal).toBeNull();
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^error: Node\.js v?\d+\.\d+\.\d+ cannot run the receiver/);
    expect(r.databaseCreated).toBe(false);
  });
});
