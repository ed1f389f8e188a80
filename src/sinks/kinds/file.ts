import { constants } from 'node:fs';
import { open, stat as statPath } from 'node:fs/promises';
import { dirname } from 'node:path';
import { z } from 'zod';
import { RetryableError } from '../../hiring/errors.js';
import { serializeMessage } from '../serializeMessage.js';
import type { Logger } from '../../observability/logger.js';
import { makeFolderFor, syncFolder } from '../../util/syncFolder.js';
import { tildeProblem } from '../../util/tildeProblem.js';
import type { DeliveryOutcome, Sink, SinkDeps, SinkKind, SinkMessage } from '../types.js';

export interface FileSinkOptions {
  path: string;
}

/** The few file operations the sink uses (a FileHandle has them); tests substitute one that fails (ENOSPC, short writes). */
export interface SinkFile {
  /** `ino`/`dev` (a real file has them) let the sink notice that its path now names another file. */
  stat(): Promise<{ size: number; ino?: number; dev?: number }>;
  read(buffer: Buffer, offset: number, length: number, position: number): Promise<{ bytesRead: number }>;
  write(buffer: Buffer): Promise<{ bytesWritten: number }>;
  truncate(length: number): Promise<void>;
  sync(): Promise<void>;
  close(): Promise<void>;
}
export type OpenSinkFile = (path: string) => Promise<SinkFile>;

const NEWLINE = 0x0a;
const CHUNK = 64 * 1024;

/** The code openAppend fails with for a path that names a pipe, a socket or a device. */
const NOT_REGULAR = 'ENOTREGULAR';

export async function openAppend(path: string, sync: (folder: string) => Promise<void> = syncFolder): Promise<SinkFile> {
  const folder = dirname(path);
  const madeDurable = await makeFolderFor(folder, { sync });
  // O_APPEND: every write lands at the end, as one write(2) of the whole line. A new file is
  // its owner's only (0600), like the database: its lines hold candidate names, emails, phones.
  const fh = await open(path, constants.O_RDWR | constants.O_APPEND | constants.O_CREAT, 0o600);
  // A pipe or a device (`/dev/stdout` in a container) takes the write, then refuses the fsync
  // (EINVAL): each retry would write the line again, up to max_attempts times, and then dead-letter it.
  if (!(await fh.stat()).isFile()) {
    await fh.close();
    throw Object.assign(new Error(`${path} is not a regular file`), { code: NOT_REGULAR });
  }
  // The fsync of a line makes its bytes durable, not a new file's name in its folder (nor a new
  // folder's in its parent): without this, a power loss soon after the first lines of a new file
  // (at the first start, after a rotation) could lose the whole file, its deliveries recorded done.
  // The file is opened at start and after a rotation only, so this costs next to nothing.
  try {
    await madeDurable();
  } catch (err) {
    await fh.close();
    throw err;
  }
  return fh;
}

/** The code a file sink's open fails with for a file at its path that holds something other than its lines. */
const NOT_SINK_LINES = 'ENOTSINKLINES';
const OPEN_BRACE = 0x7b;

/** The byte at `position`, or null past the end. */
async function byteAt(file: SinkFile, position: number): Promise<number | null> {
  const one = Buffer.alloc(1);
  const { bytesRead } = await file.read(one, 0, 1, position);
  return bytesRead === 1 ? one[0]! : null;
}

/**
 * Drops a last line without its newline: what a crash in the middle of a
 * write leaves. Returns the size kept. Reads backwards in 64 KiB chunks, so a
 * large file costs one read when it is whole.
 *
 * `sinkLinesOnly` (opening the file at the path): the file must read as this sink's lines, each a
 * JSON object: a non-empty file whose first byte, or whose torn last line's, is not `{` is another
 * program's (a sink path that names a notes file, a database backup) and is refused untouched.
 * Cut at its last newline, such a file lost its last line, and a binary one everything after its
 * last 0x0a byte, at the start, before any message was written.
 */
export async function repairTornTail(file: SinkFile, sinkLinesOnly = false): Promise<{ size: number; dropped: number }> {
  const { size } = await file.stat();
  if (size === 0) return { size, dropped: 0 };
  // A file of NUL bytes only is a first batch a power loss took (see zerosOnly): none of its bytes is anyone's.
  if (sinkLinesOnly && (await byteAt(file, 0)) !== OPEN_BRACE && !(await zerosOnly(file, 0, size))) throw notSinkLines('it does not start with "{"');
  const buf = Buffer.alloc(CHUNK);
  let end = size;
  let keep = 0;
  while (end > 0) {
    const start = Math.max(0, end - CHUNK);
    const { bytesRead } = await file.read(buf, 0, end - start, start);
    const i = buf.subarray(0, bytesRead).lastIndexOf(NEWLINE);
    if (i >= 0) {
      keep = start + i + 1;
      break;
    }
    end = start;
  }
  if (keep === size) return { size, dropped: 0 };
  if (sinkLinesOnly && (await byteAt(file, keep)) !== OPEN_BRACE && !(await zerosOnly(file, keep, size))) {
    throw notSinkLines('its last line has no newline and does not start with "{"');
  }
  await file.truncate(keep);
  await file.sync();
  return { size: keep, dropped: size - keep };
}

/**
 * Whether the bytes from `start` to `end` are all NUL. A power loss during a write that was not
 * fsynced yet can leave the file's new size with the write's blocks never on disk (XFS, ext4
 * data=writeback): they read back as zeros, from a line's start when the whole batch was lost. Such
 * a tail is this sink's torn write, as a cut line is; refused as another program's, it stopped the start.
 */
async function zerosOnly(file: SinkFile, start: number, end: number): Promise<boolean> {
  const buf = Buffer.alloc(CHUNK);
  for (let at = start; at < end; ) {
    const { bytesRead } = await file.read(buf, 0, Math.min(CHUNK, end - at), at);
    if (bytesRead === 0) return false;
    if (buf.subarray(0, bytesRead).some((b) => b !== 0)) return false;
    at += bytesRead;
  }
  return true;
}

const notSinkLines = (why: string) => Object.assign(new Error(`not lines of JSON objects: ${why}`), { code: NOT_SINK_LINES });

/**
 * Appends one NDJSON line per message. A line is written whole or not at all:
 * one write of the full line, and on any failure (ENOSPC, a short write) the
 * bytes it left are cut off (see cutBack); if even that fails, the
 * handle is dropped and the torn tail is repaired when the file is reopened
 * (as at start-up after a crash). The line is fsynced before the delivery
 * counts as done. Writes of one sink are serialized (lines waiting meanwhile
 * go out together in the next write); one process per file.
 */
export function createFileSink(options: FileSinkOptions, deps: { logger: Logger; openFile?: OpenSinkFile }): Sink {
  const openFile = deps.openFile ?? openAppend;
  let file: SinkFile | null = null;

  /**
   * Whether the open file is no longer the one at the path: moved away by log rotation
   * (`mv events.ndjson events.ndjson.1`, logrotate's default), or deleted. The next lines then
   * go to a new file at the path, without a signal or a restart.
   */
  async function rotated(f: SinkFile): Promise<boolean> {
    const open = await f.stat();
    if (open.ino === undefined || open.dev === undefined) return false;
    try {
      const now = await statPath(options.path);
      return now.ino !== open.ino || now.dev !== open.dev;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return true;
      throw err;
    }
  }

  async function ensureOpen(): Promise<SinkFile> {
    if (file && (await rotated(file))) {
      deps.logger.info({ path: options.path }, 'file sink: the file was moved or removed (rotation); writing to a new file at the path');
      await drop();
    }
    if (file) return file;
    const f = await openFile(options.path);
    try {
      const repaired = await repairTornTail(f, true);
      if (repaired.dropped > 0) {
        deps.logger.warn({ path: options.path, bytes: repaired.dropped }, 'file sink: removed a torn last line left by an interrupted write');
      }
    } catch (err) {
      await f.close().catch(() => {});
      throw err;
    }
    file = f;
    return f;
  }

  async function drop(): Promise<void> {
    const f = file;
    file = null;
    await f?.close().catch(() => {});
  }

  /**
   * Undoes a failed write. What the file gained since `before` is cut off when it is all this
   * write's (a prefix of `line`). Otherwise another writer appended in between (a second
   * process, an operator's `>>`), or the file was emptied in place (`: > file`): a cut to
   * `before` would take that writer's lines, or fill the file with zero bytes up to a size it
   * no longer has. Then only a torn last line is cut off, as at open after a crash.
   */
  async function cutBack(f: SinkFile, before: number, line: Buffer): Promise<void> {
    const { size } = await f.stat();
    if (size === before) return;
    const added = size - before;
    if (size > before && added <= line.length) {
      const buf = Buffer.alloc(added);
      const { bytesRead } = await f.read(buf, 0, added, before);
      if (bytesRead === added && buf.equals(line.subarray(0, added))) {
        await f.truncate(before);
        await f.sync();
        return;
      }
    }
    await repairTornTail(f);
  }

  /**
   * Writes the lines whole and fsyncs them. A rotation can move the file away between
   * ensureOpen's check and the write: the lines then went into the moved file, which logrotate's
   * `compress` may have read already and be deleting. So the path is checked once more after the
   * fsync, and the lines are written again to the new file if it names another (a line twice,
   * under the same id, is the sink's at-least-once; a line lost is not).
   */
  async function append(line: Buffer): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const f = await ensureOpen();
      // The size the file has now, not the sum of what this sink wrote: the file may have been
      // emptied meanwhile (`: > events.ndjson`, logrotate's copytruncate), and a cut back to a
      // size it no longer has would fill the gap with zero bytes ahead of the next lines.
      const before = (await f.stat()).size;
      try {
        const { bytesWritten } = await f.write(line);
        if (bytesWritten !== line.length) throw Object.assign(new Error(`short write: ${bytesWritten} of ${line.length} bytes (disk full?)`), { code: 'ESHORT' });
        await f.sync();
      } catch (err) {
        try {
          await cutBack(f, before, line);
        } catch {
          await drop(); // reopening repairs the tail
        }
        throw err;
      }
      if (!(await rotated(f))) return;
      // Bounded: a path rotated at every write is retried as a failed delivery instead.
      if (attempt === 3) throw Object.assign(new Error('the file was moved or removed during each of 3 writes'), { code: 'EROTATED' });
      deps.logger.info({ path: options.path }, 'file sink: the file was moved or removed while lines were written to it; writing them again to the new file');
    }
  }

  // Group commit, as for ingest: lines of deliveries running at once share one
  // write and one fsync. Measured by bench/ (replay to a file sink): one fsync
  // per line capped the sink near 350 lines/s.
  let pending: { line: Buffer; done: (err?: unknown) => void }[] = [];
  let flushing: Promise<void> | null = null;

  async function flush(): Promise<void> {
    while (pending.length > 0) {
      const batch = pending;
      pending = [];
      try {
        await append(batch.length === 1 ? batch[0]!.line : Buffer.concat(batch.map((b) => b.line)));
        batch.forEach((b) => b.done());
      } catch (err) {
        batch.forEach((b) => b.done(err));
      }
    }
  }

  /** One flush at a time; started on the next microtask so deliveries of the same tick share the first write. */
  function schedule(): void {
    if (flushing) return;
    flushing = Promise.resolve()
      .then(flush)
      .finally(() => {
        flushing = null;
        // A line queued after the loop's last check but before this ran still needs its write.
        if (pending.length > 0) schedule();
      });
  }

  /** Appends the lines (whole lines, one or many) with the next group write; resolves after its fsync. */
  async function appendLines(lines: Buffer): Promise<void> {
    const written = new Promise<void>((resolve, reject) => pending.push({ line: lines, done: (err) => (err ? reject(err) : resolve()) }));
    schedule();
    try {
      await written;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      // A full disk (ENOSPC), a quota (EDQUOT) or a permission fixed by the operator: all worth retrying.
      const why = code === 'ESHORT' ? 'a short write (is the disk full?)' : code === NOT_SINK_LINES ? `the file there is not this sink's (${(err as Error).message})` : (code ?? (err as Error).message);
      throw new RetryableError(`cannot append to ${options.path}: ${why}`, { cause: code });
    }
  }

  return {
    async deliver(message: SinkMessage): Promise<DeliveryOutcome> {
      await appendLines(Buffer.from(`${serializeMessage(message)}\n`, 'utf8'));
      return {};
    },
    // A batch is one buffer: written whole or cut back whole, then one fsync; so all its messages
    // succeed or fail together (but one that cannot be serialized, which fails alone).
    async deliverBatch(batch) {
      let text = '';
      const unwritable = new Map<number, unknown>();
      batch.forEach(({ message }, i) => {
        try {
          text += `${serializeMessage(message)}\n`;
        } catch (reason) {
          unwritable.set(i, reason);
        }
      });
      const failedAlone = (i: number) => unwritable.has(i) ? { status: 'rejected' as const, reason: unwritable.get(i) } : null;
      try {
        if (text !== '') await appendLines(Buffer.from(text, 'utf8'));
        return batch.map((_, i) => failedAlone(i) ?? { status: 'fulfilled' as const, value: {} });
      } catch (reason) {
        return batch.map((_, i) => failedAlone(i) ?? { status: 'rejected' as const, reason });
      }
    },
    async check() {
      try {
        await ensureOpen();
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === NOT_REGULAR) {
          throw new Error(`cannot use ${options.path}: it is not a regular file (a pipe or a device, whose writes cannot be fsynced); for standard output, configure a sink of type "stdout"`);
        }
        if (code === NOT_SINK_LINES) {
          throw new Error(`cannot use ${options.path}: the file there is not this sink's (${(err as Error).message}), so nothing was cut from it or written to it; give the sink a path of its own, or move that file away`);
        }
        if (code === 'ENOENT') {
          // Its folder was just made: what is missing is behind a symbolic link (or under /proc).
          throw new Error(`cannot open ${options.path} for appending: ENOENT (a symbolic link on the way points to nothing?)`);
        }
        if (code && OPERATOR_PROBLEMS.has(code)) {
          const uid = typeof process.getuid === 'function' ? ` (the receiver runs as uid ${process.getuid()})` : '';
          throw new Error(`cannot open ${options.path} for appending: ${code}${uid}`);
        }
        deps.logger.warn({ path: options.path, code }, 'file sink: cannot open its file now; its deliveries will retry');
      }
    },
    async close() {
      await flushing;
      await drop();
    },
  };
}

/** Errors opening a file sink's file that no retry will fix: permissions, a path through a file (and ENOENT, above). */
const OPERATOR_PROBLEMS = new Set(['EACCES', 'EPERM', 'EROFS', 'EISDIR', 'ENOTDIR', 'ENAMETOOLONG', 'ELOOP']);

export const fileSinkKind: SinkKind<{ path: z.ZodString }, FileSinkOptions> = {
  fields: { path: z.string().min(1) },
  // Deliveries are claimed, built, written (one write + fsync) and recorded in batches of up to
  // batchSize; 512 in flight lets the next batch be read while the previous one is fsynced (bench/).
  defaultConcurrency: 512,
  batchSize: 256,
  resolve(raw, ctx) {
    const tilde = tildeProblem(raw.path);
    if (tilde) {
      ctx.problem(`${ctx.at}.path: ${tilde}`);
      return null;
    }
    return { path: raw.path };
  },
  target: (o) => o.path,
  create: (_name, options, deps: SinkDeps) => createFileSink(options, { logger: deps.logger }),
};
