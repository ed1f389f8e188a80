/**
 * Why this Node.js cannot run the receiver, or null when it can.
 *
 * better-sqlite3 13 is built for Node-API 10, which Node.js has from 22.14.0 (and 23.6.0). On an
 * older one (Node.js 20 has Node-API 9) its module loads, and the first database it opens crashes
 * the process with a segmentation fault, no message (seen here with Node.js 20.20.2). So the entry
 * points ask first, and say it in one line. (better-sqlite3 12, which ran on Node.js 20, aborts on
 * Node.js 24.19 and later when V8 collects a statement: nodejs/node#65446.)
 */
export function unsupportedRuntime(versions: { node?: string; napi?: string } = process.versions): string | null {
  const napi = Number(versions.napi);
  if (Number.isInteger(napi) && napi >= 10) return null;
  return (
    `Node.js ${versions.node ?? '(unknown version)'} cannot run the receiver: its SQLite driver (better-sqlite3 13) needs Node-API 10, ` +
    `which Node.js has from 22.14.0 (this one has ${versions.napi ? `Node-API ${versions.napi}` : 'no Node-API version'}), and would crash the process. ` +
    'Use Node.js 22.14 or later 22.x, 24.x or 26.x; in a checkout, `npm start`, `npm test` and `npm run cli` run on the Node.js 22 that `npm ci` installs with the dev dependencies (on Linux and macOS, x64 and arm64, and Windows x64)'
  );
}

/** For the entry points, before anything opens a database: the problem said in one line on stderr, exit 1. */
export function exitIfUnsupportedRuntime(): void {
  const problem = unsupportedRuntime();
  if (problem === null) return;
  process.stderr.write(`error: ${problem}\n`);
  process.exit(1);
}
