#!/usr/bin/env node
/**
 * The second step of `npm run build`, after tsc: kysely and zod, each bundled into one file in
 * `<dist>/vendor/`, and every compiled module's `from "kysely"` / `from "zod"` pointed at it.
 *
 * Why: Node.js loads an ES module file by file. kysely is 263 files and zod 95, and importing
 * them took 121 ms and 63 ms of every start (the receiver's and each CLI command's: `replay`
 * loads about 510 modules before its first write), against 12 ms and 25 ms bundled (AMD EPYC
 * host, bench/README.md "Thirtieth round"). The bundles are the installed packages' own ESM
 * builds, unchanged (esbuild, no minification); the packages stay dependencies, for their types
 * and licences. esbuild-wasm, not esbuild: the Dockerfile's build stage installs with
 * --ignore-scripts --omit=optional, which leaves esbuild's native binary out.
 *
 * Usage: node scripts/bundle-vendor.mjs [dist folder, default dist]. Fails (exit 1) when a
 * compiled module still imports one of them by name afterwards.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild-wasm';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const PACKAGES = ['kysely', 'zod'];
const dist = resolve(process.argv[2] ?? join(ROOT, 'dist'));
const vendor = join(dist, 'vendor');

for (const pkg of PACKAGES) {
  // `export *` leaves a default export out: zod has one (`import z from 'zod'`), which the bundle
  // without this line did not provide (a SyntaxError at the start of dist only, never under tsx).
  const reexport = `export * from '${pkg}';\n` + ('default' in (await import(pkg)) ? `export { default } from '${pkg}';\n` : '');
  await build({
    stdin: { contents: reexport, resolveDir: ROOT, sourcefile: `vendor-${pkg}.js`, loader: 'js' },
    bundle: true,
    format: 'esm',
    platform: 'node',
    target: 'node22',
    outfile: join(vendor, `${pkg}.js`),
    legalComments: 'eof',
    logLevel: 'warning',
  });
}

/** The compiled modules: every .js under `dist` but the bundles. */
function modules(dir) {
  const out = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      if (path !== vendor) out.push(...modules(path));
    } else if (entry.name.endsWith('.js')) out.push(path);
  }
  return out;
}

// tsc writes static imports as `from "name";` (and `import "name";`); src has no dynamic import of these.
const bare = new RegExp(`(\\bfrom\\s*|\\bimport\\s*)(["'])(${PACKAGES.join('|')})\\2`, 'g');
const left = [];
let rewritten = 0;
for (const file of modules(dist)) {
  const text = readFileSync(file, 'utf8');
  const next = text.replace(bare, (_m, head, quote, pkg) => {
    let target = relative(dirname(file), join(vendor, `${pkg}.js`)).split(sep).join('/');
    if (!target.startsWith('.')) target = `./${target}`;
    return `${head}${quote}${target}${quote}`;
  });
  if (next !== text) {
    writeFileSync(file, next);
    rewritten++;
  }
  // Any other way of naming them (a dynamic import, a require) would load a second copy.
  if (new RegExp(`(["'])(${PACKAGES.join('|')})(/[^"']*)?\\1`).test(next)) left.push(relative(dist, file));
}
if (left.length > 0) {
  process.stderr.write(`bundle-vendor: still importing ${PACKAGES.join(' or ')} by name: ${left.join(', ')}\n`);
  process.exit(1);
}
process.stdout.write(`bundle-vendor: ${PACKAGES.join(', ')} bundled in ${relative(ROOT, vendor) || vendor}; ${rewritten} modules point at them\n`);
