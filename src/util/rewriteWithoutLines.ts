import { closeSync, fchmodSync, fchownSync, fsyncSync, openSync, readFileSync, readSync, realpathSync, renameSync, rmSync, statSync, writeSync, type Stats } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { syncFolderSync } from './syncFolder.js';

const CHUNK = 1 << 20;
const NEWLINE = 0x0a;

/**
 * Takes out of the text file at `path` every line `drop` says (a line is given without its
 * newline; the last one may have none), and returns how many. Nothing is written when none is
 * dropped, or with `dryRun`. Otherwise the kept lines go to a temporary file beside it with the
 * file's mode and owner, which is fsynced and renamed over it, then the folder fsynced: a crash at
 * any point leaves either the old file or the new one whole, never a torn or a lost one. A symlink
 * is followed: the file it names is rewritten, the link stays. A name
 * ending in `.gz` (a rotated copy logrotate compressed) is read and written gzipped.
 */
export function rewriteWithoutLines(configured: string, drop: (line: string) => boolean, opts: { dryRun?: boolean } = {}): number {
  // The file a symlink names: renamed over, the link itself would become the new file, and the
  // file it named (that the receiver appends to through it) would keep every line.
  const path = realpathSync(configured);
  const st = statSync(path);
  if (path.endsWith('.gz')) {
    const { kept, dropped } = filterBuffer(gunzipSync(readFileSync(path)), drop);
    if (dropped > 0 && !opts.dryRun) replaceFile(path, st, (fd) => void writeSync(fd, gzipSync(kept)));
    return dropped;
  }
  if (opts.dryRun) return filterStream(path, drop, null);
  let dropped = 0;
  replaceFile(path, st, (fd) => {
    dropped = filterStream(path, drop, fd);
    // Nothing to take out: the file stays as it was (the temporary copy is removed).
    if (dropped === 0) throw UNCHANGED;
  });
  return dropped;
}

const UNCHANGED = Symbol('unchanged');

/**
 * The lines of `data` from its start, each given to `drop` without its newline: kept ones to
 * `keep`. Without `final`, a last line with no newline yet is left for the next chunk: returns
 * where it starts (with `final`, it is a line too, and the return is data.length).
 */
function eachLine(data: Buffer, final: boolean, drop: (line: string) => boolean, keep: (line: Buffer) => void): { dropped: number; rest: number } {
  let dropped = 0;
  let start = 0;
  while (start < data.length) {
    const nl = data.indexOf(NEWLINE, start);
    if (nl === -1 && !final) break;
    const end = nl === -1 ? data.length : nl + 1;
    const line = data.subarray(start, end);
    if (drop(line.toString('utf8', 0, nl === -1 ? line.length : line.length - 1))) dropped++;
    else keep(line);
    start = end;
  }
  return { dropped, rest: start };
}

/** Reads `path` in chunks (a sink's file may be gigabytes), writing the kept lines to `out` (none: only counts). */
function filterStream(path: string, drop: (line: string) => boolean, out: number | null): number {
  const fd = openSync(path, 'r');
  const keep = out === null ? () => {} : (line: Buffer) => void writeSync(out, line);
  let dropped = 0;
  try {
    let carry = Buffer.alloc(0);
    const chunk = Buffer.alloc(CHUNK);
    for (;;) {
      const n = readSync(fd, chunk, 0, CHUNK, null);
      const data = carry.length === 0 ? chunk.subarray(0, n) : Buffer.concat([carry, chunk.subarray(0, n)]);
      const lines = eachLine(data, n === 0, drop, keep);
      dropped += lines.dropped;
      if (n === 0) return dropped;
      carry = Buffer.from(data.subarray(lines.rest));
    }
  } finally {
    closeSync(fd);
  }
}

function filterBuffer(data: Buffer, drop: (line: string) => boolean): { kept: Buffer; dropped: number } {
  const parts: Buffer[] = [];
  const { dropped } = eachLine(data, true, drop, (line) => parts.push(line));
  return { kept: Buffer.concat(parts), dropped };
}

/** Writes a new version of `path` through `write` (to a temporary file beside it) and renames it into place. */
function replaceFile(path: string, st: Stats, write: (fd: number) => void): void {
  const temp = join(dirname(path), `.${basename(path)}.rewrite-${process.pid}`);
  const fd = openSync(temp, 'wx', 0o600);
  let renamed = false;
  try {
    // The mode given to open is narrowed by the umask: set it whole. Then the owner, when it is
    // not this process's (root rewriting the receiver's file): a file the receiver could no longer
    // append to would fail every delivery.
    fchmodSync(fd, st.mode & 0o7777);
    const uid = typeof process.getuid === 'function' ? process.getuid() : st.uid;
    const gid = typeof process.getgid === 'function' ? process.getgid() : st.gid;
    if (st.uid !== uid || st.gid !== gid) {
      try {
        fchownSync(fd, st.uid, st.gid);
      } catch (err) {
        throw new Error(`cannot give the rewritten ${path} its owner (uid ${st.uid}, gid ${st.gid}): ${(err as Error).message}; run as that user`);
      }
    }
    write(fd);
    fsyncSync(fd);
    closeSync(fd);
    renameSync(temp, path);
    renamed = true;
    syncFolderSync(dirname(path));
  } catch (err) {
    if (!renamed) {
      try {
        closeSync(fd);
      } catch {
        // already closed
      }
      rmSync(temp, { force: true });
    }
    if (err !== UNCHANGED) throw err;
  }
}
