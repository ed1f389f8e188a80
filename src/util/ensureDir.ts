import { mkdirSync, statSync } from 'node:fs';
import { mkdir, stat } from 'node:fs/promises';
import { dirname } from 'node:path';

/**
 * `mkdir -p` that always ends. Node's `mkdir(dir, { recursive: true })` never returns for a
 * directory under /proc (procfs answers ENOENT for a child of a directory that exists, and
 * Node's walk then goes back and forth between parent and child forever at 100% CPU: the
 * sync call freezes the process, the async one spins a libuv pool thread and never settles).
 * A DATABASE_PATH or a file sink's path with a typo under /proc did exactly that. Here a child
 * whose parent was just made or found is created once more at most; a second ENOENT is final.
 * Returns the folders it made, outermost first (their parents need an fsync for them to last).
 */
export function ensureDirSync(dir: string): string[] {
  const made: string[] = [];
  const first = tryMkdirSync(dir, made);
  if (first === 'done') return made;
  const parent = dirname(dir);
  if (parent === dir) throw first;
  made.push(...ensureDirSync(parent));
  const second = tryMkdirSync(dir, made);
  if (second !== 'done') throw second;
  return made;
}

/** As ensureDirSync; `mode` (before the umask) is given to every folder it makes, as `mkdir -p -m`. */
export async function ensureDir(dir: string, mode?: number): Promise<string[]> {
  const made: string[] = [];
  const first = await tryMkdir(dir, made, mode);
  if (first === 'done') return made;
  const parent = dirname(dir);
  if (parent === dir) throw first;
  made.push(...(await ensureDir(parent, mode)));
  const second = await tryMkdir(dir, made, mode);
  if (second !== 'done') throw second;
  return made;
}

/** 'done' when `dir` is a directory now; the ENOENT to act on; any other error is thrown. */
function tryMkdirSync(dir: string, made: string[]): 'done' | Error {
  try {
    mkdirSync(dir);
    made.push(dir);
    return 'done';
  } catch (err) {
    return settle(err, () => {
      try {
        return statSync(dir).isDirectory();
      } catch {
        return false; // a dangling symlink: EEXIST, and nothing behind it
      }
    });
  }
}

async function tryMkdir(dir: string, made: string[], mode?: number): Promise<'done' | Error> {
  try {
    await mkdir(dir, mode);
    made.push(dir);
    return 'done';
  } catch (err) {
    let isDirectory = false;
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') isDirectory = await stat(dir).then((s) => s.isDirectory(), () => false);
    return settle(err, () => isDirectory);
  }
}

function settle(err: unknown, isDirectory: () => boolean): 'done' | Error {
  const code = (err as NodeJS.ErrnoException).code;
  // EEXIST: fine if it is a directory (made meanwhile, or there all along); a file in the way is an error.
  if (code === 'EEXIST') {
    if (isDirectory()) return 'done';
    const path = (err as NodeJS.ErrnoException).path;
    throw Object.assign(new Error(`ENOTDIR: ${path} exists and is not a directory`), { code: 'ENOTDIR', path });
  }
  if (code === 'ENOENT') return err as Error;
  throw err;
}
