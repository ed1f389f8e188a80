import { closeSync, createReadStream, fchmodSync, fchownSync, fsyncSync, openSync, realpathSync, renameSync, rmSync, statSync, writeSync, type Stats } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { createGunzip, createGzip } from 'node:zlib';
import { copyFormat } from './copyFormat.js';
import { syncFolderSync } from './syncFolder.js';

const CHUNK = 1 << 20;
const NEWLINE = 0x0a;

/** What stops a rewrite: `signal` aborted ends it at its next chunk; `atOnce` cleanups run before a second signal ends the process. */
export interface RewriteStop {
  readonly signal: AbortSignal;
  atOnce(cleanup: () => void): () => void;
}

/**
 * Takes out of the text file at `path` every line `drop` says (a line is given without its
 * newline; the last one may have none), and returns how many. Nothing is written when none is
 * dropped, or with `dryRun`. Otherwise the kept lines go to a temporary file beside it with the
 * file's mode and owner, which is fsynced and renamed over it, then the folder fsynced: a crash at
 * any point leaves either the old file or the new one whole, never a torn or a lost one. A symlink
 * is followed: the file it names is rewritten, the link stays. A gzipped file (a rotated copy
 * logrotate compressed; known by its bytes, copyFormat) is read and written gzipped, streamed as the plain file is: a
 * copy of 200 MB (206,000 lines) peaked at 95 MB of memory, 65 MB of it node's own; read whole,
 * as before, at 709 MB, in about the same 1.5 s. Stopped by `stop` (Ctrl-C), the
 * temporary file is removed and the file left as it was, and the stop's reason is thrown.
 */
export async function rewriteWithoutLines(configured: string, drop: (line: string) => boolean, opts: { dryRun?: boolean; stop?: RewriteStop } = {}): Promise<number> {
  // The file a symlink names: renamed over, the link itself would become the new file, and the
  // file it named (that the receiver appends to through it) would keep every line.
  const path = realpathSync(configured);
  const st = statSync(path);
  // By its bytes, not its name: a gzipped copy not named `.gz` read as text had no line to take out.
  const gzipped = copyFormat(path) === 'gzip';
  const counted = { dropped: 0 };
  const kept = (source: AsyncIterable<Buffer>) => keptChunks(source, drop, counted, opts.stop?.signal);
  const read = () => createReadStream(path, { highWaterMark: CHUNK });
  if (opts.dryRun) {
    await (gzipped ? pipeline(read(), createGunzip(), kept, discard) : pipeline(read(), kept, discard));
    return counted.dropped;
  }
  await replaceFile(path, st, opts.stop, async (fd) => {
    const out = async (source: AsyncIterable<Buffer>) => {
      for await (const b of source) writeAll(fd, b);
    };
    await (gzipped ? pipeline(read(), createGunzip(), kept, createGzip(), out) : pipeline(read(), kept, out));
    // Nothing to take out: the file stays as it was (the temporary copy is removed).
    if (counted.dropped === 0) throw UNCHANGED;
  });
  return counted.dropped;
}

const UNCHANGED = Symbol('unchanged');

/**
 * All of `data` to `fd`. write(2) may write less than it was given and say so by its count, not
 * by an error (at a file size limit, a quota, a full disk): one writeSync per chunk dropped the
 * rest of a chunk cut so, and a last one cut renamed a file short of the other candidates' last
 * lines over the sink's. Written again from there, the next write fails with the cause.
 */
function writeAll(fd: number, data: Buffer): void {
  for (let at = 0; at < data.length; ) {
    const n = writeSync(fd, data, at);
    if (n === 0) throw new Error(`wrote 0 of ${data.length - at} bytes`);
    at += n;
  }
}

const discard = async (source: AsyncIterable<Buffer>) => {
  for await (const _ of source);
};

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

/**
 * The kept lines of `source` (a sink's file may be gigabytes: read in chunks), a chunk's worth at
 * a time; the dropped ones counted in `counted`. Each chunk is a turn of the event loop, where an
 * aborted `signal` (Ctrl-C) ends it.
 */
async function* keptChunks(source: AsyncIterable<Buffer>, drop: (line: string) => boolean, counted: { dropped: number }, signal?: AbortSignal): AsyncGenerator<Buffer> {
  let carry = Buffer.alloc(0);
  const take = (data: Buffer, final: boolean): Buffer | null => {
    const parts: Buffer[] = [];
    const lines = eachLine(data, final, drop, (line) => parts.push(line));
    counted.dropped += lines.dropped;
    carry = Buffer.from(data.subarray(lines.rest));
    return parts.length === 0 ? null : Buffer.concat(parts);
  };
  for await (const chunk of source) {
    signal?.throwIfAborted();
    const kept = take(carry.length === 0 ? chunk : Buffer.concat([carry, chunk]), false);
    if (kept) yield kept;
  }
  signal?.throwIfAborted();
  const last = take(carry, true);
  if (last) yield last;
}

/** Writes a new version of `path` through `write` (to a temporary file beside it) and renames it into place. */
async function replaceFile(path: string, st: Stats, stop: RewriteStop | undefined, write: (fd: number) => Promise<void>): Promise<void> {
  const temp = join(dirname(path), `.${basename(path)}.rewrite-${process.pid}`);
  const fd = openSync(temp, 'wx', 0o600);
  // It holds the other candidates' lines: not left behind by a second Ctrl-C either.
  const offStop = stop?.atOnce(() => rmSync(temp, { force: true }));
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
    await write(fd);
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
  } finally {
    offStop?.();
  }
}
