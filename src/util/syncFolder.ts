import { closeSync, constants, fsyncSync, openSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { dirname } from 'node:path';
import { ensureDir } from './ensureDir.js';

/** Where a folder cannot be opened or fsynced (some file systems, a folder without read permission): skipped. */
const FOLDER_SYNC_SKIPPED = new Set(['EINVAL', 'EISDIR', 'ENOTSUP', 'EBADF', 'EACCES', 'EPERM']);

/**
 * fsync of a folder, so a file or folder just created (or renamed) in it survives a power loss.
 * A failure of the fsync itself (EIO) is thrown: what was made in it may not be on disk.
 */
export async function syncFolder(folder: string): Promise<void> {
  let fh: Awaited<ReturnType<typeof open>> | undefined;
  try {
    fh = await open(folder, constants.O_RDONLY);
    await fh.sync();
  } catch (err) {
    if (!FOLDER_SYNC_SKIPPED.has((err as NodeJS.ErrnoException).code ?? '')) throw err;
  } finally {
    await fh?.close();
  }
}

/** syncFolder for a synchronous caller (the database's folder, made before the database opens). */
export function syncFolderSync(folder: string): void {
  let fd: number | undefined;
  try {
    fd = openSync(folder, constants.O_RDONLY);
    fsyncSync(fd);
  } catch (err) {
    if (!FOLDER_SYNC_SKIPPED.has((err as NodeJS.ErrnoException).code ?? '')) throw err;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/**
 * `mkdir -p` (ensureDir: it ends, even under /proc) for a file about to be made in `folder`.
 * Returns what to call once the file is there: the fsync of `folder` (the file's name in it), then
 * of the parent of each folder made, nearest first. Without those a power loss could take the file
 * with it though the file itself was fsynced (a file sink's first lines, a backup).
 */
export async function makeFolderFor(
  folder: string,
  opts: { mode?: number; sync?: (folder: string) => Promise<void> } = {},
): Promise<() => Promise<void>> {
  const made = (await ensureDir(folder, opts.mode)).reverse();
  const sync = opts.sync ?? syncFolder;
  return async () => {
    for (const f of [folder, ...made.map((m) => dirname(m))]) await sync(f);
  };
}
