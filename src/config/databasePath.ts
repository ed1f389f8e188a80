import { statSync } from 'node:fs';
import { join } from 'node:path';
import { tildeProblem } from '../util/tildeProblem.js';
import { wrappingProblem, type Env } from './valueChecks.js';

/**
 * A database file path the receiver can keep: not wrapped in quotes or spaces (SQLite trims the
 * name, the receiver's side files would not: a second process could then run workers on the same
 * database), not ':memory:' (nothing would survive a restart), not an SQLite URI (`file:…`), not a
 * folder (nor a name ending in "/", a folder still to be made).
 */
export function checkDatabasePath(path: string): string | null {
  const wrapped = wrappingProblem(path);
  if (wrapped) return wrapped;
  const tilde = tildeProblem(path);
  if (tilde) return tilde;
  if (path === ':memory:') return `must be the path of a database file (${JSON.stringify(path)} is not supported: deliveries must survive a restart)`;
  if (path.startsWith('file:')) return uriProblem(path);
  return folderProblem(path);
}

/**
 * An SQLite URI (`file:/data/receiver.db?mode=rwc`): the SQLite of better-sqlite3 opens it as a
 * plain file name, not as a URI, so the database would be a file under a folder named `file:` in
 * the working directory, not the file the URI names (a `sqlite3` reader given the same text would
 * open the other one). Refused, with the path to give when the URI names one plainly.
 */
function uriProblem(uri: string): string {
  let rest = uri.slice('file:'.length);
  // file:///data/x.db and file://localhost/data/x.db: the path starts after the authority.
  if (rest.startsWith('//')) rest = rest.indexOf('/', 2) === -1 ? '' : rest.slice(rest.indexOf('/', 2));
  const path = rest.replace(/[?#].*$/s, '');
  const suggestion = path !== '' && !path.includes('%') && path !== ':memory:' ? `, such as ${JSON.stringify(path)}` : '';
  return `must be the path of a database file, not an SQLite URI (${JSON.stringify(uri)}): give the file's path${suggestion}`;
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
