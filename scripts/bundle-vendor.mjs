#!/usr/bin/env node
/**
 * The second step of `npm run build`, after tsc: kysely and zod, each bundled into one file in
 * `<dist>/vendor/`, and every compiled module's `from "kysely"` / `from "zod"` pointed at it.
 *
 * Why: Node.js loads an ES module file by file. kysely is 263 files and zod 95 (of the 514 that
 * `replay` loads before its first write), and a bare import of them in a fresh node took 121 ms
 * and 63 ms, against 12 ms and 25 ms bundled; the receiver answers `/healthz` 282-296 ms after
 * its spawn against 345-370 ms, a 5,000-event `replay` with no receiver ends in 385-402 ms
 * against 443-488 ms (AMD EPYC host, bench/README.md "Thirtieth round"). The bundles are the
 * installed packages' own ESM builds, unchanged (esbuild, no minification); the packages stay
 * dependencies, for their types and licences. esbuild-wasm, not esbuild: the Dockerfile's build
 * stage installs with --ignore-scripts --omit=optional, which leaves esbuild's native binary out.
 *
 * Usage: node scripts/bundle-vendor.mjs [dist folder, default dist]. Fails (exit 1) when a
 * compiled module still imports one of them by name afterwards.
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ImportType, init, parse } from 'es-module-lexer';
import { build } from 'esbuild-wasm';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const PACKAGES = ['kysely', 'zod'];
const dist = resolve(process.argv[2] ?? join(ROOT, 'dist'));
const vendor = join(dist, 'vendor');

/**
 * What a bundle is made from: the package's version, esbuild's, and this script. A bundle whose
 * `<pkg>.key` beside it says the same is kept: esbuild-wasm takes about 5 s for the two, and
 * `npm start` builds before each start. Any change to one of the three makes it again.
 */
const scriptHash = createHash('sha256').update(readFileSync(fileURLToPath(import.meta.url))).digest('hex');
const versionOf = (pkg) => JSON.parse(readFileSync(join(ROOT, 'node_modules', pkg, 'package.json'), 'utf8')).version;
const keyOf = (pkg) => JSON.stringify({ package: `${pkg}@${versionOf(pkg)}`, esbuild: versionOf('esbuild-wasm'), script: scriptHash });
const readOrNull = (path) => {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null;
  }
};

let kept = 0;
for (const pkg of PACKAGES) {
  const key = keyOf(pkg);
  if (readOrNull(join(vendor, `${pkg}.key`)) === key && existsSync(join(vendor, `${pkg}.js`))) {
    kept++;
    continue;
  }
  // The old key goes first: a build that fails or is stopped halfway leaves no key, where the old
  // one would vouch for a half-written bundle once the versions are those of that key again.
  rmSync(join(vendor, `${pkg}.key`), { force: true });
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
  writeFileSync(join(vendor, `${pkg}.key`), key);
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

/** The relative path from `file` to the bundle of `pkg`. */
function bundlePath(file, pkg) {
  const target = relative(dirname(file), join(vendor, `${pkg}.js`)).split(sep).join('/');
  return target.startsWith('.') ? target : `./${target}`;
}

/** `pkg` when `specifier` names one of PACKAGES or a path inside it (`zod/v4`), else undefined. */
const packageOf = (specifier) => PACKAGES.find((p) => specifier === p || specifier.startsWith(`${p}/`));

// The imports found by a lexer (es-module-lexer, what Vite rewrites bare imports with), not a
// regular expression over the text: a string or a comment holding `from "zod"` or 'kysely' is
// neither rewritten nor taken for an import, and `export * as x from`, a template literal's
// dynamic import are seen as imports.
await init;
// A require of either (`require('zod')`, `createRequire(url)('zod')`): the lexer sees ES imports only.
const required = new RegExp(`(?:\\brequire|\\))\\s*\\(\\s*(["'\`])(${PACKAGES.join('|')})(/[^"'\`]*)?\\1`);
const left = [];
/** Modules that import a bundle: rewritten now, or by an earlier run on the same compiled output. */
let pointing = 0;
for (const file of modules(dist)) {
  const text = readFileSync(file, 'utf8');
  const [imports] = parse(text, file);
  let next = '';
  let at = 0;
  let stays = false;
  let points = false;
  for (const i of imports) {
    if (i.n !== undefined && PACKAGES.some((p) => i.n === bundlePath(file, p))) points = true;
    const pkg = i.n === undefined ? undefined : packageOf(i.n);
    if (pkg === undefined) continue;
    // A static import or export-from of the package itself: `s`..`e` is its name, quotes excluded.
    // Anything else (a dynamic import, a path inside the package) would load a second copy.
    if (i.t === ImportType.Static && i.n === pkg && text.slice(i.s, i.e) === pkg) {
      next += text.slice(at, i.s) + bundlePath(file, pkg);
      at = i.e;
      points = true;
    } else stays = true;
  }
  next += text.slice(at);
  if (next !== text) writeFileSync(file, next);
  if (points) pointing++;
  if (stays || required.test(next)) left.push(relative(dist, file));
}
if (left.length > 0) {
  process.stderr.write(`bundle-vendor: still importing ${PACKAGES.join(' or ')} by name: ${left.join(', ')}\n`);
  process.exit(1);
}
// On stderr, like the failure above: `npm start` runs this build first (prestart), and with a stdout
// sink, `npm start --silent` must leave standard output to the messages (README, "stdout").
process.stderr.write(`bundle-vendor: ${PACKAGES.join(', ')} bundled in ${relative(ROOT, vendor) || vendor}${kept > 0 ? ` (${kept === PACKAGES.length ? 'both' : kept} kept from the last build: same versions)` : ''}; ${pointing} modules point at them\n`);
