import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/childServer.js';
import { tempDir } from '../helpers/receiver.js';

const { dir, cleanup } = tempDir('receiver-package-');
afterAll(cleanup);

/**
 * What `npm pack` (and so `npm publish`) puts in the package: the compiled receiver and CLI, the
 * migrations it applies at start, the docs README links to, and the license; not the sources,
 * tests, bench or tools. Until 2026-11-27 there was no `files` list, so the tarball held whatever
 * the checkout had: no dist/ in a fresh clone (no `hiring-receiver` for those who installed it,
 * without a warning), stale modules in an old one.
 */
const pkg = JSON.parse(readFileSync(`${ROOT}package.json`, 'utf8')) as { bin: Record<string, string>; scripts: Record<string, string> };

function packList(cwd = ROOT): string[] {
  // --ignore-scripts: the list only, without prepack's build (the test must not rewrite dist/).
  const r = spawnSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd, encoding: 'utf8', timeout: 60_000 });
  expect(r.status, r.stderr).toBe(0);
  const [report] = JSON.parse(r.stdout) as [{ files: { path: string }[] }];
  return report.files.map((f) => f.path);
}

describe('the npm package', () => {
  it('holds dist, the migrations, the docs, README, LICENSE and package.json, and nothing else', () => {
    const files = packList();
    const tops = new Set(files.map((f) => f.split('/')[0]));
    expect([...tops].sort()).toEqual(expect.arrayContaining(['LICENSE', 'README.md', 'docs', 'migrations', 'package.json']));
    for (const top of tops) expect(['LICENSE', 'README.md', 'package.json', 'dist', 'docs', 'migrations'], top).toContain(top);
    // Every migration the receiver would apply: a package missing one could not open a newer database.
    const migrations = readdirSync(`${ROOT}migrations`).filter((f) => f.endsWith('.sql'));
    expect(migrations.length).toBeGreaterThan(0);
    for (const m of migrations) expect(files).toContain(`migrations/${m}`);
  });

  it('ships the bundles of dist/vendor without the keys the build keeps beside them', () => {
    // scripts/bundle-vendor.mjs keeps `<package>.key` to know when a bundle can stay between
    // builds: nothing an installed receiver reads. A folder with this package.json and such a dist/.
    copyFileSync(`${ROOT}package.json`, join(dir, 'package.json'));
    mkdirSync(join(dir, 'dist', 'vendor'), { recursive: true });
    writeFileSync(join(dir, 'dist', 'main.js'), 'export {};\n');
    writeFileSync(join(dir, 'dist', 'vendor', 'kysely.js'), 'export {};\n');
    writeFileSync(join(dir, 'dist', 'vendor', 'kysely.key'), '{"package":"kysely@0.28.19"}');
    const files = packList(dir);
    expect(files).toEqual(expect.arrayContaining(['dist/main.js', 'dist/vendor/kysely.js']));
    expect(files.filter((f) => f.endsWith('.key'))).toEqual([]);
  });

  it('is built afresh when packed, and its bin is in what it ships', () => {
    // prepack empties dist/ first: tsc does not delete the output of a module that moved or went away.
    expect(pkg.scripts.prepack).toMatch(/rmSync\('dist'.*&& npm run build$/);
    for (const target of Object.values(pkg.bin)) expect(target).toMatch(/^dist\//);
  });
});
