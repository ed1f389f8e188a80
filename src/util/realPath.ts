import { realpathSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';

/**
 * The real path of `p` (symbolic links resolved), or of its folder plus its name when `p` does not
 * exist yet, or `p` resolved when its folder does not exist either. Two names for one file compare
 * equal this way, including a file about to be created in a folder reached through a link.
 */
export function realPathOf(p: string): string {
  try {
    return realpathSync(p);
  } catch {
    try {
      return join(realpathSync(dirname(p)), basename(p));
    } catch {
      return resolve(p);
    }
  }
}
