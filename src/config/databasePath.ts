import { statSync } from 'node:fs';
import { join } from 'node:path';
import { tildeProblem } from '../util/tildeProblem.js';
import { wrappingProblem, type Env } from './valueChecks.js';

/**
 * A database file path the receiver can keep: not wrapped in quotes or spaces (SQLite trims the
 * name, the receiver's side files would not: a second process could then run workers on the same
 * database), not ':memory:' (nothing would survive a restart), not a folder (nor a name ending in
 * "/", a folder still to be made).
 */
export function checkDatabasePath(path: string): string | null {
  const wrapped = wrappingProblem(path);
  if (wrapped) return wrapped;
  const tilde = tildeProblem(path);
  if (tilde) return tilde;
  if (path === ':memory:' || path.startsWith('file:')) return `must be the path of a database file (${JSON.stringify(path)} is not supported: deliveries must survive a restart)`;
  return folderProblem(path);
}

/**
 * A path that is a folder, or names one (ends in "/"), where a database file's path is wanted:
 * opening it would fail with SQLite's bare "disk I/O error" or "unable to open database file".
 */
export function folderProblem(path: string): string | null {
  let folder = false;
  try {
    folder = statSync(path, { throwIfNoEntry: false })?.isDirectory() === true;
  } catch {
    // A path through a file, a folder it may not read: opening the database says so, naming the path.
  }
  if (folder) return `${JSON.stringify(path)} is a folder: give the path of the database file in it, such as ${JSON.stringify(join(path, 'receiver.db'))}`;
  // A folder still to be made (its name ends in "/"): not a raw EISDIR when the database opens.
  if (path.endsWith('/')) return `${JSON.stringify(path)} names a folder: give the path of the database file in it, such as ${JSON.stringify(join(path, 'receiver.db'))}`;
  return null;
}

export const DEFAULT_DATABASE_PATH = './data/receiver.db';

/** DATABASE_PATH, or the default when it is unset or empty: for the server and every CLI command alike. */
export const databasePathIn = (env: Env): string => (env.DATABASE_PATH && env.DATABASE_PATH.length > 0 ? env.DATABASE_PATH : DEFAULT_DATABASE_PATH);
