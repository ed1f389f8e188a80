import { appendFileSync, existsSync, mkdirSync, readFileSync, renameSync, statSync, symlinkSync, truncateSync, unlinkSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { open } from 'node:fs/promises';
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { RetryableError } from '../../src/hiring/errors.js';
import { createLogger } from '../../src/observability/logger.js';
import { createFileSink, openAppend, type SinkFile } from '../../src/sinks/kinds/file.js';
import { createStdoutSink } from '../../src/sinks/kinds/stdout.js';
import type { DeliveryContext, SinkMessage } from '../../src/sinks/types.js';
import { ManualClock } from '../../src/util/clock.js';
import { tempDir } from '../helpers/receiver.js';
import { freePort, runTs } from '../helpers/childServer.js';
import { envelope, newSecret } from '../helpers/signing.js';
import { LineSink, sinkFileOf, startHarness, type Harness } from './helpers.js';

let h: Harness | undefined;
const cleanups: (() => void)[] = [];
afterEach(async () => {
  await h?.close();
  h = undefined;
  for (const c of cleanups.splice(0)) c();
});

const lines = (path: string) => readFileSync(path, 'utf8');
const msg = (id: string): SinkMessage => ({
  id, event_type: 'application.created', created_at: null, received_at: '2026-11-01T00:00:00.000Z', source: 'default',
  webhook_id: null, application_id: null, external_id: null, revision: 1, payload: { n: id }, result: null, needs_review: false,
});
const ctx: DeliveryContext = { messageId: 'msg_x', attempt: 1, clock: new ManualClock(0), logger: createLogger('silent') };
const dir = () => {
  const t = tempDir('file-sink-');
  cleanups.push(t.cleanup);
  return t.dir;
};
/** Opens the sink's real file, its writes going through `write` (to fail as a full disk does). */
const openWithWrite = (write: (fh: SinkFile, buf: Buffer) => Promise<{ bytesWritten: number }>) => async (p: string): Promise<SinkFile> => {
  const fh = await openAppend(p);
  return sinkFileOf(fh, { write: (buf) => write(fh, buf) });
};

describe('file sink', () => {
  it('appends one NDJSON line per message through the app, creating the folder', async () => {
    const path = join(dir(), 'nested', 'events.ndjson');
    h = await startHarness({ sinks: [{ name: 'archive', type: 'file', path }] });
    const events = [envelope(), envelope(), envelope()];
    for (const e of events) await h.post(e);
    await h.settle();
    const text = lines(path);
    expect(text.endsWith('\n')).toBe(true);
    expect(text.trimEnd().split('\n').map((l) => (JSON.parse(l) as SinkMessage).id)).toEqual(events.map((e) => e.id));
    expect(h.deliveries('archive').map((d) => d.state)).toEqual(['delivered', 'delivered', 'delivered']);
    // Its lines hold candidate data: a new file is its owner's only.
    expect(statSync(path).mode & 0o777).toBe(0o600);
  });

  it('follows log rotation: after the file is moved away or removed, the next lines go to a new file at the path', async () => {
    const path = join(dir(), 'events.ndjson');
    h = await startHarness({ sinks: [{ name: 'archive', type: 'file', path }] });
    const [a, b, c] = [envelope(), envelope(), envelope()];
    const idsIn = (p: string) => lines(p).trimEnd().split('\n').map((l) => (JSON.parse(l) as SinkMessage).id);
    await h.post(a);
    await h.settle();
    renameSync(path, `${path}.1`); // what logrotate does by default
    await h.post(b);
    await h.settle();
    expect(idsIn(`${path}.1`)).toEqual([a.id]);
    expect(idsIn(path)).toEqual([b.id]);
    unlinkSync(path);
    await h.post(c);
    await h.settle();
    expect(idsIn(path)).toEqual([c.id]);
    expect(h.deliveries('archive').map((d) => d.state)).toEqual(['delivered', 'delivered', 'delivered']);
    expect(h.r.logs.lines.filter((l) => /the file was moved or removed \(rotation\)/.test(String(l.msg)))).toHaveLength(2);
  });

  it('a rotation that moves the file between the check and the write (logrotate `compress`) loses no line: the lines are written again to the new file', async () => {
    const path = join(dir(), 'events.ndjson');
    let rotateBeforeNextWrite = false;
    // The file is moved away and compressed-then-removed right as the batch is written, as
    // logrotate with `compress` (no `delaycompress`) does: what went into it is gone.
    const openFile = async (p: string): Promise<SinkFile> => {
      const fh = await openAppend(p);
      return sinkFileOf(fh, {
        write: async (buf) => {
          if (rotateBeforeNextWrite) {
            rotateBeforeNextWrite = false;
            renameSync(path, `${path}.1`);
            const written = await fh.write(buf);
            unlinkSync(`${path}.1`); // gzip has read it (before these lines) and removes it
            return written;
          }
          return fh.write(buf);
        },
      });
    };
    const logs: unknown[] = [];
    const logger = createLogger('info', { write: (l: string) => void logs.push(JSON.parse(l)) });
    const sink = createFileSink({ path }, { logger, openFile });
    await sink.deliver(msg('before'), ctx);
    rotateBeforeNextWrite = true;
    await sink.deliver(msg('during'), ctx);
    await sink.deliver(msg('after'), ctx);
    await sink.close!();
    expect(lines(path)).toBe(`${JSON.stringify(msg('during'))}\n${JSON.stringify(msg('after'))}\n`);
    expect(logs).toContainEqual(expect.objectContaining({ msg: 'file sink: the file was moved or removed while lines were written to it; writing them again to the new file' }));
  });

  it('a name holding line or paragraph separators stays on one line for every line splitter, file and stdout alike', async () => {
    const path = join(dir(), 'events.ndjson');
    h = await startHarness({ sinks: [{ name: 'archive', type: 'file', path }, { name: 'console', type: 'stdout' }] });
    // Control characters, NEL, LINE and PARAGRAPH SEPARATOR, a non-Latin name, an emoji, an escape sequence.
    const name = 'Zoë\u0000\u0007\t\u0085\u2028\u2029 名前 😀 \u001b[31m';
    const e = envelope();
    (e.payload as { candidate: { first_name: string } }).candidate.first_name = name;
    await h.post(e);
    await h.settle();
    // What Python's str.splitlines() takes for line ends, not only '\n'.
    const splitLines = (text: string) => text.split(/\r\n|[\n\r\u000b\u000c\u001c-\u001e\u0085\u2028\u2029]/).filter((l) => l !== '');
    for (const text of [lines(path), `${h.stdout.lines.join('\n')}\n`]) {
      const parsed = splitLines(text).map((l) => JSON.parse(l) as { id: string; payload: { candidate: { first_name: string } } });
      expect(parsed.map((m) => [m.id, m.payload.candidate.first_name])).toEqual([[e.id, name]]);
    }
  });

  it('a torn last line left by a crash mid-write is removed at start and never appears as a message', async () => {
    const d = dir();
    const path = join(d, 'events.ndjson');
    const whole = `${JSON.stringify(msg('before-1'))}\n${JSON.stringify(msg('before-2'))}\n`;
    writeFileSync(path, `${whole}${JSON.stringify(msg('torn')).slice(0, 40)}`);
    h = await startHarness({ sinks: [{ name: 'archive', type: 'file', path }] });
    const e = envelope();
    await h.post(e);
    await h.settle();
    const text = lines(path);
    expect(text.startsWith(whole)).toBe(true);
    expect(text).not.toContain('"torn"');
    const ids = text.trimEnd().split('\n').map((l) => (JSON.parse(l) as SinkMessage).id);
    expect(ids).toEqual(['before-1', 'before-2', e.id]);
    expect(h.r.logs.lines.some((l) => l.msg === 'file sink: removed a torn last line left by an interrupted write' && l.bytes === 40)).toBe(true);
  });

  it('a tail of zero bytes left by a power loss (the size grew, the data never reached the disk) is cut at start, not taken for another program\'s file', async () => {
    // XFS, ext4 data=writeback, and others can keep a file's new size after a power loss while the
    // blocks of the unsynced write read back as zeros: the batch's place holds NUL bytes only.
    const d = dir();
    const path = join(d, 'events.ndjson');
    const whole = `${JSON.stringify(msg('before-1'))}\n${JSON.stringify(msg('before-2'))}\n`;
    writeFileSync(path, Buffer.concat([Buffer.from(whole), Buffer.alloc(8192)]));
    // A new file whose first batch was lost so: zeros only.
    const fresh = join(d, 'fresh.ndjson');
    writeFileSync(fresh, Buffer.alloc(4096));
    h = await startHarness({ sinks: [{ name: 'archive', type: 'file', path }, { name: 'fresh', type: 'file', path: fresh }] });
    const e = envelope();
    await h.post(e);
    await h.settle();
    expect(h.deliveries().map((x) => [x.sink, x.state])).toEqual([['archive', 'delivered'], ['fresh', 'delivered']]);
    const line = `${lines(fresh).split('\n')[0]}\n`;
    expect((JSON.parse(line) as SinkMessage).id).toBe(e.id);
    expect(lines(fresh)).toBe(line);
    expect(lines(path)).toBe(`${whole}${line}`);
    expect(h.r.logs.lines.filter((l) => l.msg === 'file sink: removed a torn last line left by an interrupted write').map((l) => l.bytes).sort()).toEqual([4096, 8192]);
  });

  it('a file that is all torn (no newline at all) is emptied', async () => {
    const path = join(dir(), 'e.ndjson');
    writeFileSync(path, '{"id":"half');
    const sink = createFileSink({ path }, { logger: createLogger('silent') });
    await sink.deliver(msg('m1'), ctx);
    await sink.close!();
    expect(lines(path)).toBe(`${JSON.stringify(msg('m1'))}\n`);
  });

  it('a full disk mid-line is retryable and leaves no partial line; the next attempt writes it whole', async () => {
    const path = join(dir(), 'e.ndjson');
    let failNext: 'enospc' | 'short' | null = null;
    // A real file whose next write puts half the bytes on disk, then fails as a full disk does.
    const openFile = openWithWrite(async (fh, buf) => {
      const mode = failNext;
      failNext = null;
      if (mode === null) return fh.write(buf);
      const half = await fh.write(buf.subarray(0, Math.floor(buf.length / 2)));
      if (mode === 'short') return { bytesWritten: half.bytesWritten };
      throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
    });
    const sink = createFileSink({ path }, { logger: createLogger('silent'), openFile });
    await sink.deliver(msg('ok-1'), ctx);
    failNext = 'enospc';
    const err = await sink.deliver(msg('full'), ctx).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RetryableError);
    expect((err as Error).message).toMatch(/ENOSPC/);
    expect(lines(path)).toBe(`${JSON.stringify(msg('ok-1'))}\n`);
    failNext = 'short';
    await expect(sink.deliver(msg('short'), ctx)).rejects.toBeInstanceOf(RetryableError);
    expect(lines(path)).toBe(`${JSON.stringify(msg('ok-1'))}\n`);
    await sink.deliver(msg('full'), ctx);
    await sink.close!();
    expect(lines(path)).toBe(`${JSON.stringify(msg('ok-1'))}\n${JSON.stringify(msg('full'))}\n`);
  });

  it('a full disk after the file was emptied in place (`: > file`, copytruncate) cuts back to the empty file, not to zero bytes where its lines were', async () => {
    const path = join(dir(), 'e.ndjson');
    let full = false;
    // A short write, as on a full disk: the first 7 bytes land.
    const openFile = openWithWrite(async (fh, buf) => (full ? fh.write(buf.subarray(0, 7)) : fh.write(buf)));
    const sink = createFileSink({ path }, { logger: createLogger('silent'), openFile });
    await sink.deliver(msg('before-1'), ctx);
    await sink.deliver(msg('before-2'), ctx);
    truncateSync(path, 0);
    full = true;
    await expect(sink.deliver(msg('full'), ctx)).rejects.toBeInstanceOf(RetryableError);
    expect(lines(path)).toBe('');
    full = false;
    await sink.deliver(msg('full'), ctx);
    await sink.close!();
    expect(lines(path)).toBe(`${JSON.stringify(msg('full'))}\n`);
  });

  it('a full disk right after another writer appended a line cuts back only its own bytes, and a file emptied just before the write is not filled with zero bytes', async () => {
    const path = join(dir(), 'e.ndjson');
    const other = `${JSON.stringify(msg('other-writer'))}\n`;
    // Between the sink's look at the file's size and its write: another process appends a whole
    // line (a second receiver, an operator's `>>`), or the file is emptied in place. Then the
    // write lands short, as on a full disk: the first 7 bytes only.
    let before: (() => void) | null = null;
    const openFile = openWithWrite(async (fh, buf) => {
      const meanwhile = before;
      before = null;
      if (meanwhile === null) return fh.write(buf);
      meanwhile();
      return fh.write(buf.subarray(0, 7));
    });
    const sink = createFileSink({ path }, { logger: createLogger('silent'), openFile });
    await sink.deliver(msg('mine-1'), ctx);
    before = () => appendFileSync(path, other);
    await expect(sink.deliver(msg('full'), ctx)).rejects.toBeInstanceOf(RetryableError);
    // The other writer's line is kept (it was cut off with the torn bytes before the fix).
    expect(lines(path)).toBe(`${JSON.stringify(msg('mine-1'))}\n${other}`);
    before = () => truncateSync(path, 0);
    await expect(sink.deliver(msg('full'), ctx)).rejects.toBeInstanceOf(RetryableError);
    // Empty, not 7 bytes of the line and zero bytes up to the size the file had a moment before.
    expect(readFileSync(path)).toEqual(Buffer.alloc(0));
    await sink.deliver(msg('full'), ctx);
    await sink.close!();
    expect(lines(path)).toBe(`${JSON.stringify(msg('full'))}\n`);
  });

  it('when even the cut-back fails, the file is reopened and repaired before the next line', async () => {
    const path = join(dir(), 'e.ndjson');
    let broken = true;
    const openFile = async (p: string): Promise<SinkFile> => {
      const fh = await open(p, 'a+');
      return sinkFileOf(fh, {
        truncate: async (n) => {
          if (broken) throw Object.assign(new Error('EIO'), { code: 'EIO' });
          return fh.truncate(n);
        },
        write: async (buf) => {
          if (!broken) return fh.write(buf);
          await fh.write(buf.subarray(0, 10));
          throw Object.assign(new Error('EIO'), { code: 'EIO' });
        },
      });
    };
    const sink = createFileSink({ path }, { logger: createLogger('silent'), openFile });
    await expect(sink.deliver(msg('m1'), ctx)).rejects.toBeInstanceOf(RetryableError);
    expect(lines(path)).toHaveLength(10); // torn on disk for now...
    broken = false;
    await sink.deliver(msg('m1'), ctx);
    await sink.close!();
    expect(lines(path)).toBe(`${JSON.stringify(msg('m1'))}\n`); // ...and repaired before writing
  });

  it('a path that cannot be written is a retryable failure recorded on the delivery', async () => {
    const d = dir();
    mkdirSync(join(d, 'is-a-dir.ndjson'));
    h = await startHarness({ sinks: [{ name: 'archive', type: 'file', path: join(d, 'is-a-dir.ndjson') }] });
    await h.post(envelope());
    await h.settle();
    expect(h.deliveries('archive')[0]).toMatchObject({ state: 'retrying', attempts: 1, last_error: expect.stringMatching(/cannot append to .*EISDIR/) });
  });

  it.skipIf(!existsSync('/proc/self'))('a folder that cannot be made (under /proc, where Node\'s recursive mkdir never settles) is a retryable failure too', async () => {
    h = await startHarness({ sinks: [{ name: 'archive', type: 'file', path: '/proc/no-such-dir/events.ndjson' }] });
    await h.post(envelope());
    await h.settle();
    expect(h.deliveries('archive')[0]).toMatchObject({ state: 'retrying', attempts: 1, last_error: expect.stringMatching(/cannot append to .*ENOENT/) });
  });
});

describe('stdout sink', () => {
  it('writes one NDJSON line per message to its stream', async () => {
    const out = new LineSink();
    const sink = createStdoutSink(out);
    await sink.deliver(msg('s1'), ctx);
    await sink.deliver(msg('s2'), ctx);
    expect(out.lines.map((l) => (JSON.parse(l) as SinkMessage).id)).toEqual(['s1', 's2']);
  });
});

describe('file sink group append', () => {
  it('writes lines of deliveries running at once with one write and one fsync, each line whole', async () => {
    const { createFileSink } = await import('../../src/sinks/kinds/file.js');
    const writes: Buffer[] = [];
    let syncs = 0;
    let content = Buffer.alloc(0);
    const fake = {
      stat: async () => ({ size: content.length }),
      read: async () => ({ bytesRead: 0 }),
      write: async (b: Buffer) => {
        writes.push(b);
        content = Buffer.concat([content, b]);
        return { bytesWritten: b.length };
      },
      truncate: async (n: number) => {
        content = content.subarray(0, n);
      },
      sync: async () => {
        syncs++;
      },
      close: async () => {},
    };
    const { createLogger } = await import('../../src/observability/logger.js');
    const sink = createFileSink({ path: '/unused' }, { logger: createLogger('silent'), openFile: async () => fake });
    const msg = (i: number) => ({ id: `evt_${i}` }) as never;
    await sink.deliver(msg(0), ctx);
    await Promise.all([1, 2, 3, 4, 5].map((i) => sink.deliver(msg(i), ctx)));
    expect(writes).toHaveLength(2);
    expect(syncs).toBe(2);
    const lines = content.toString('utf8').trimEnd().split('\n').map((l) => JSON.parse(l).id);
    expect(lines).toEqual(['evt_0', 'evt_1', 'evt_2', 'evt_3', 'evt_4', 'evt_5']);
  });
});

describe('file sink: a new file survives a power loss', () => {
  it('fsyncs the folder that holds the file (and the parent of each folder it made) before the first line is written', async () => {
    const d = dir();
    const path = join(d, 'a', 'b', 'events.ndjson');
    const synced: string[] = [];
    const fh = await openAppend(path, async (folder) => {
      synced.push(folder);
    });
    await fh.close();
    // The file's name in b, b's in a, a's in the temp folder: each entry made is on disk.
    expect(synced).toEqual([join(d, 'a', 'b'), join(d, 'a'), d]);
    // Opened again after a rotation (mv, then a new file at the path): the new name too.
    renameSync(path, `${path}.1`);
    synced.length = 0;
    await (await openAppend(path, async (folder) => {
      synced.push(folder);
    })).close();
    expect(synced).toEqual([join(d, 'a', 'b')]);
    expect(existsSync(path)).toBe(true);
  });
});

describe('file sink at start', () => {
  /** Starts the receiver (a child process) with one file sink at `path`; how it ended, or null if it was still running after 15 s (then stopped). */
  async function startWithFileSink(d: string, path: string) {
    const configFile = join(d, 'config.json');
    writeFileSync(configFile, JSON.stringify({ sinks: [{ name: 'archive', type: 'file', path }] }));
    const child = runTs('src/main.ts', [], {
      WEBHOOK_SECRET: newSecret(),
      HIRING_API_URL: 'http://127.0.0.1:9',
      HIRING_API_KEY: 'sk-test.unused',
      DATABASE_PATH: join(d, 'r.db'),
      CONFIG_FILE: configFile,
      PORT: String(await freePort()),
      HOST: '127.0.0.1',
    });
    const exited = await Promise.race([child.exited, new Promise<null>((r) => setTimeout(() => r(null), 15_000))]);
    if (exited === null) child.proc.kill();
    return { code: exited?.code, stderr: child.stderr.join('') };
  }

  it('a pipe or a device as the path stops the start (its writes cannot be fsynced, so every retry would write the line again)', async () => {
    const d = dir();
    const path = join(d, 'events.fifo');
    execFileSync('mkfifo', [path]);
    const { code, stderr } = await startWithFileSink(d, path);
    expect(code).toBe(1);
    expect(stderr).toContain(`fatal: sink "archive": cannot use ${path}: it is not a regular file`);
  });

  it('a path through a symbolic link to nothing stops the start (every delivery would fail until dead-lettered)', async () => {
    const d = dir();
    const path = join(d, 'events.ndjson');
    symlinkSync(join(d, 'unmounted', 'volume', 'events.ndjson'), path);
    const { code, stderr } = await startWithFileSink(d, path);
    expect(code).toBe(1);
    expect(stderr).toContain(`fatal: sink "archive": cannot open ${path} for appending: ENOENT (a symbolic link on the way points to nothing?)`);
  });

  it("a path naming another program's file (a notes file, a database backup) stops the start and leaves the file byte for byte", async () => {
    const d = dir();
    // Before the fix, opening the path cut each at its last newline as if the rest were a torn
    // line: the notes lost their last line, the backup everything after its last 0x0a byte.
    const notes = join(d, 'notes.txt');
    writeFileSync(notes, 'keep this\nand this last line, which has no newline');
    const backup = join(d, 'backup.db');
    const db = new Database(backup);
    db.exec("CREATE TABLE t(x TEXT); INSERT INTO t VALUES ('a line' || char(10) || 'and the rest')");
    db.close();
    for (const path of [notes, backup]) {
      const before = readFileSync(path);
      const { code, stderr } = await startWithFileSink(d, path);
      expect(readFileSync(path).equals(before)).toBe(true);
      expect(code).toBe(1);
      expect(stderr).toContain(`fatal: sink "archive": cannot use ${path}: the file there is not this sink's (not lines of JSON objects: `);
    }
  });

  it('a path that cannot be opened for appending stops the start with one line naming the sink, the path and why', async () => {
    const d = dir();
    writeFileSync(join(d, 'not-a-dir'), 'x');
    const path = join(d, 'not-a-dir', 'events.ndjson');
    const { code, stderr } = await startWithFileSink(d, path);
    expect(code).toBe(1);
    expect(stderr).toMatch(new RegExp(`^fatal: sink "archive": cannot open ${path.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')} for appending: ENOTDIR`));
  });
});
