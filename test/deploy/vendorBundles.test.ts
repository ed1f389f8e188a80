import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/childServer.js';
import { tempDir } from '../helpers/receiver.js';

const { dir, cleanup } = tempDir('receiver-vendor-');
afterAll(cleanup);

/** `node scripts/bundle-vendor.mjs <dist>`, as `npm run build` runs it after tsc. */
const bundle = (dist: string) => spawnSync(process.execPath, [`${ROOT}scripts/bundle-vendor.mjs`, dist], { cwd: ROOT, encoding: 'utf8', timeout: 120_000 });

describe('the build bundles kysely and zod into dist/vendor', { timeout: 180_000 }, () => {
  it('points every compiled import of them at the bundles, which work as the packages do', async () => {
    const dist = join(dir, 'dist');
    mkdirSync(join(dist, 'db'), { recursive: true });
    // One module at the top, one a folder down (tsc keeps the sources' quotes; these use double ones).
    writeFileSync(
      join(dist, 'main.js'),
      'import { z } from "zod";\nimport { open } from "./db/open.js";\nexport const parsed = z.object({ n: z.number() }).parse({ n: 2 });\nexport const compiled = open();\n',
    );
    writeFileSync(
      join(dist, 'db', 'open.js'),
      'import { Kysely, SqliteAdapter, DummyDriver, SqliteIntrospector, SqliteQueryCompiler, sql } from "kysely";\n' +
        'export function open() {\n' +
        '  const db = new Kysely({ dialect: { createAdapter: () => new SqliteAdapter(), createDriver: () => new DummyDriver(), createIntrospector: (d) => new SqliteIntrospector(d), createQueryCompiler: () => new SqliteQueryCompiler() } });\n' +
        '  return db.selectFrom("events").select(["id"]).where("id", "=", "evt_1").where(sql`rowid > ${3}`).compile().sql;\n' +
        '}\n',
    );
    const r = bundle(dist);
    expect(r.status, r.stderr).toBe(0);
    // Its report on stderr: `npm start --silent` (which builds first) with a stdout sink gave this
    // line on stdout ahead of the messages, which a strict NDJSON reader refuses.
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/kysely, zod bundled in .*vendor; 2 modules point at them/);
    expect(existsSync(join(dist, 'vendor', 'kysely.js')) && existsSync(join(dist, 'vendor', 'zod.js'))).toBe(true);
    expect(readFileSync(join(dist, 'main.js'), 'utf8')).toContain('import { z } from "./vendor/zod.js";');
    expect(readFileSync(join(dist, 'db', 'open.js'), 'utf8')).toContain('} from "../vendor/kysely.js";');
    const m = (await import(pathToFileURL(join(dist, 'main.js')).href)) as { parsed: unknown; compiled: string };
    expect(m.parsed).toEqual({ n: 2 });
    expect(m.compiled).toBe('select "id" from "events" where "id" = ? and rowid > ?');

    // The next build (tsc writes the bare imports again) keeps bundles made from the same versions
    // and script, and makes one again when its key differs (a package upgraded).
    writeFileSync(join(dist, 'main.js'), 'import { z } from "zod";\nexport const parsed = z.string().parse("x");\n');
    const zodBefore = statSync(join(dist, 'vendor', 'zod.js')).mtimeMs;
    writeFileSync(join(dist, 'vendor', 'kysely.key'), '{"package":"kysely@0.0.1"}');
    const again = bundle(dist);
    expect(again.status, again.stderr).toBe(0);
    // Both modules point at the bundles: main.js rewritten now, db/open.js by the first run.
    expect(again.stderr).toMatch(/bundled in .*vendor \(1 kept from the last build: same versions\); 2 modules point at them/);
    expect(statSync(join(dist, 'vendor', 'zod.js')).mtimeMs).toBe(zodBefore);
    expect(readFileSync(join(dist, 'vendor', 'kysely.key'), 'utf8')).toMatch(/^\{"package":"kysely@\d+\.\d+\.\d+","esbuild":"[^"]+","script":"[0-9a-f]{64}"\}$/);
    expect(readFileSync(join(dist, 'main.js'), 'utf8')).toContain('from "./vendor/zod.js";');
  });

  it('leaves no key beside a bundle it failed to make again (the old key would vouch for what is there)', () => {
    const dist = join(dir, 'failed');
    mkdirSync(join(dist, 'vendor', 'zod.js'), { recursive: true });
    writeFileSync(join(dist, 'main.js'), 'import { z } from "zod";\nexport const parsed = z.string().parse("x");\n');
    // A key of other versions: the bundle is made again, and its output path is a folder.
    writeFileSync(join(dist, 'vendor', 'zod.key'), '{"package":"zod@0.0.1"}');
    const r = bundle(dist);
    expect(r.status).not.toBe(0);
    expect(existsSync(join(dist, 'vendor', 'zod.key'))).toBe(false);
  });

  it('fails, naming the module, when one would still load a package of its own copy (a dynamic import)', () => {
    const dist = join(dir, 'dynamic');
    mkdirSync(dist, { recursive: true });
    writeFileSync(join(dist, 'late.js'), 'export const load = () => import("zod");\n');
    const r = bundle(dist);
    expect(r.status).toBe(1);
    expect(r.stderr).toBe('bundle-vendor: still importing kysely or zod by name: late.js\n');
  });

  it('exports every name the package does, zod\'s default export among them', async () => {
    const dist = join(dir, 'names');
    mkdirSync(dist, { recursive: true });
    // Typechecks (zod declares its default export) and runs under tsx; from dist it needs the bundle's default.
    writeFileSync(join(dist, 'main.js'), 'import z from "zod";\nexport const parsed = z.string().parse("a");\n');
    const r = bundle(dist);
    expect(r.status, r.stderr).toBe(0);
    const m = (await import(pathToFileURL(join(dist, 'main.js')).href)) as { parsed: unknown };
    expect(m.parsed).toBe('a');
    for (const name of ['kysely', 'zod']) {
      const bundled = Object.keys((await import(pathToFileURL(join(dist, 'vendor', `${name}.js`)).href)) as object).sort();
      expect(bundled, name).toEqual(Object.keys((await import(name)) as object).sort());
    }
  });

  it('rewrites the imports only: strings and comments that name the packages stay as they are and pass', async () => {
    const dist = join(dir, 'strings');
    mkdirSync(dist, { recursive: true });
    const source =
      'import { z } from \'zod\';\n' +
      'export { sql } from"kysely";\n' +
      'export * as k from "kysely";\n' +
      '// the rows come from "kysely", the schemas from \'zod\'\n' +
      'export const hint = \'add it: import { z } from "zod"\';\n' +
      'export const library = \'zod\';\n' +
      'export const parsed = z.number().parse(1);\n';
    writeFileSync(join(dist, 'main.js'), source);
    const r = bundle(dist);
    expect(r.status, r.stderr).toBe(0);
    expect(readFileSync(join(dist, 'main.js'), 'utf8')).toBe(
      source.replace("from 'zod';", "from './vendor/zod.js';").replace('from"kysely"', 'from"./vendor/kysely.js"').replace('k from "kysely"', 'k from "./vendor/kysely.js"'),
    );
    const m = (await import(pathToFileURL(join(dist, 'main.js')).href)) as { hint: string; library: string; parsed: unknown; sql: unknown; k: { sql: unknown } };
    expect([m.hint, m.library, m.parsed]).toEqual(['add it: import { z } from "zod"', 'zod', 1]);
    expect(m.k.sql).toBe(m.sql);
  });

  it('fails on every other way of loading them: a template literal\'s dynamic import, a path inside one, a require', () => {
    const dist = join(dir, 'others');
    mkdirSync(dist, { recursive: true });
    writeFileSync(join(dist, 'tick.js'), 'export const load = () => import(`kysely`);\n');
    writeFileSync(join(dist, 'sub.js'), 'export { z } from "zod/v4";\n');
    writeFileSync(join(dist, 'req.js'), 'import { createRequire } from "node:module";\nexport const z = createRequire(import.meta.url)("zod");\n');
    writeFileSync(join(dist, 'fine.js'), 'import { sql } from "kysely";\nexport { sql };\n');
    const r = bundle(dist);
    expect(r.status).toBe(1);
    const [, named] = /^bundle-vendor: still importing kysely or zod by name: (.*)\n$/.exec(r.stderr) ?? [];
    expect(named?.split(', ').sort()).toEqual(['req.js', 'sub.js', 'tick.js']);
  });

  it('is the build\'s second step, here and in the Dockerfile\'s build stage', () => {
    const pkg = JSON.parse(readFileSync(`${ROOT}package.json`, 'utf8')) as { scripts: Record<string, string>; devDependencies: Record<string, string> };
    expect(pkg.scripts.build).toBe('tsc -p tsconfig.build.json && node scripts/bundle-vendor.mjs');
    // The wasm build: the image's build stage installs without optional packages, esbuild's native binary among them.
    expect(pkg.devDependencies).toHaveProperty('esbuild-wasm');
    const dockerfile = readFileSync(`${ROOT}Dockerfile`, 'utf8');
    expect(dockerfile.indexOf('COPY scripts/bundle-vendor.mjs ./scripts/bundle-vendor.mjs')).toBeGreaterThan(-1);
    expect(dockerfile.indexOf('COPY scripts/bundle-vendor.mjs')).toBeLessThan(dockerfile.indexOf('RUN npm run build'));
  });
});
