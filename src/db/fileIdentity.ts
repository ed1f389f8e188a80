import { statSync, type BigIntStats } from 'node:fs';
import type { FileIdentity } from './openDatabase.js';

/**
 * The file at `path` as a stat names it (device and inode, bigint: exact on every filesystem);
 * null when the path names nothing (a folder on the path that is now a file included). Other
 * errors (EACCES on a folder, EIO) are thrown: the caller decides what they are evidence of.
 */
export function identityOf(path: string): FileIdentity | null {
  let st: BigIntStats | undefined;
  try {
    st = statSync(path, { bigint: true, throwIfNoEntry: false });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOTDIR') return null;
    throw err;
  }
  return st ? { dev: st.dev, ino: st.ino } : null;
}

/** Whether two identities name the same file. */
export const sameFile = (a: FileIdentity, b: FileIdentity): boolean => a.dev === b.dev && a.ino === b.ino;
