import { lchownSync, lstatSync, mkdirSync, readFileSync, realpathSync } from 'node:fs';
import { basename, dirname, isAbsolute, join, resolve } from 'node:path';
import { DATABASE_SIDECARS } from '../db/databaseFiles.js';

/**
 * The Docker image starts as root with RUN_AS=node and comes here first: the database's folder
 * (the volume) is made the user's, then the process drops to that user for good. Why not
 * `USER node` in the image: a volume mounted from outside is owned by root (Fly.io volumes,
 * bind mounts), so an unprivileged process could not create the database there; a Docker named
 * volume is the only kind that takes the image's ownership.
 *
 * What root touches, and nothing else (anything else would hand the user files it must not own,
 * such as the code root runs at the next start):
 * - the folder of an absolute database path, only for a command that creates the database there
 *   (`serve`, `work`, `migrate`: `giveFolder`), only if it is owned by root, is a real folder (no
 *   symbolic link anywhere in its path), is neither `/` nor the working directory, and is not a
 *   shared folder with the sticky bit (`/tmp`): `status --database /tmp/copy.db` gives nothing;
 *   for those commands a folder that does not exist yet is made when the nearest folder that exists
 *   is a volume (a mount point other than `/`), a real folder of root's no one else may write to,
 *   and the folders made are given (makeMissingFolder);
 * - in it, only the database's own files (the database, its -wal, -shm, -journal, and the
 *   receiver's -ingest-wait, -workers-lock), only if owned by root and regular files. `lchown`
 *   never follows a link, so swapping a file for a link in between gains nothing.
 * Then initgroups/setgid/setuid. Nothing happens without RUN_AS; when the process is not root
 * (`docker run --user 1234`, a pod's runAsUser), only the warning of a database folder on no volume.
 */
export function runAsFromEnv(env: Readonly<Record<string, string | undefined>>, databasePath = env.DATABASE_PATH, giveFolder = true): void {
  const name = env.RUN_AS;
  if (!name || typeof process.getuid !== 'function') return;
  if (process.getuid() !== 0) {
    // The image (it sets RUN_AS) started as another user (`docker run --user`, a pod's runAsUser):
    // nothing to give or drop, but the database folder may still be the container's own.
    if (giveFolder && databasePath && isAbsolute(databasePath)) warnIfNotOnVolume(dirname(resolve(databasePath)));
    return;
  }
  const user = lookupUser(name);
  if (!user) throw new Error(`RUN_AS: no user named ${JSON.stringify(name)} in /etc/passwd`);
  // A relative path (the default ./data/receiver.db) is under the working directory: left alone.
  if (databasePath && isAbsolute(databasePath)) giveDatabaseTo(resolve(databasePath), user, giveFolder);
  // POSIX only, like getuid above; supplementary groups first, while still root.
  const posix = process as NodeJS.Process & { initgroups(user: number, group: number): void; setgid(id: number): void; setuid(id: number): void };
  posix.initgroups(user.uid, user.gid);
  posix.setgid(user.gid);
  posix.setuid(user.uid);
  if (user.home) process.env.HOME = user.home;
}

function giveDatabaseTo(db: string, user: { uid: number; gid: number }, giveFolder: boolean): void {
  const folder = dirname(db);
  if (folder === '/' || folder === process.cwd()) return;
  if (giveFolder) makeMissingFolder(folder, user);
  let real: string;
  try {
    real = realpathSync(folder);
  } catch {
    return; // no such folder: nothing of root's to give
  }
  if (real !== folder) return; // a link somewhere in the path: not ours to follow
  if (giveFolder && !onVolume(folder)) process.stderr.write(`${notOnVolume(folder)}\n`);
  const st = lstatSync(folder);
  if (!st.isDirectory() || (st.mode & 0o1000) !== 0) return;
  if (giveFolder && st.uid === 0) lchownSync(folder, user.uid, user.gid);
  for (const suffix of ['', ...DATABASE_SIDECARS]) {
    const file = join(folder, `${basename(db)}${suffix}`);
    let f;
    try {
      f = lstatSync(file);
    } catch {
      continue;
    }
    if (f.isFile() && f.uid === 0) lchownSync(file, user.uid, user.gid);
  }
}

/**
 * A database folder that does not exist yet below a volume root owns (DATABASE_PATH=/data/receiver/receiver.db):
 * the user could not make it there, so root does, as `mkdir -p`, and gives the folders it made,
 * deepest first, while the folder above each is still root's (no one else can swap a folder for a
 * link meanwhile). Only when the nearest folder that exists is a volume, a mount point other than `/` (a typo,
 * DATABASE_PATH=/dta/receiver.db, or a volume mounted at /mnt/data while the path says /data, must
 * stop the start, not store every event on the container's own layer, lost at the next deploy),
 * and only a real folder owned by root that no one else may write to (not sticky, not group- or
 * world-writable: there the user can make the folder itself). Anything else, and any failure,
 * leaves the rest to the receiver, which names the folder that does not exist when it opens the database.
 */
function makeMissingFolder(folder: string, user: { uid: number; gid: number }): void {
  const missing: string[] = [];
  let at = folder;
  for (;;) {
    try {
      lstatSync(at);
      break;
    } catch {
      missing.unshift(at);
      const up = dirname(at);
      if (up === at) return;
      at = up;
    }
  }
  if (missing.length === 0) return;
  const made: string[] = [];
  try {
    if (realpathSync(at) !== at) return;
    const st = lstatSync(at);
    if (!st.isDirectory() || st.uid !== 0 || (st.mode & 0o1022) !== 0 || !isVolume(at)) return;
    for (const dir of missing) {
      mkdirSync(dir, 0o755);
      made.push(dir);
    }
  } catch {
    // made: given all the same, so the user gets as far as root did
  }
  for (const dir of made.reverse()) lchownSync(dir, user.uid, user.gid);
}

/**
 * A mount point other than `/`: on another device than the folder above it (a Fly.io volume, a
 * Docker volume on its own file system), or listed in /proc/self/mountinfo (a bind mount from the
 * same file system). Its fifth field is the mount point, with space, tab, newline and backslash
 * written as octal escapes.
 */
function isVolume(folder: string): boolean {
  if (folder === '/') return false;
  if (lstatSync(folder).dev !== lstatSync(dirname(folder)).dev) return true;
  let mounts: string;
  try {
    mounts = readFileSync('/proc/self/mountinfo', 'utf8');
  } catch {
    return false;
  }
  const unescape = (s: string) => s.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
  return mounts.split('\n').some((line) => unescape(line.split(' ')[4] ?? '') === folder);
}

/**
 * A folder on a volume: it, or a folder above it other than `/`, is a mount point. The image makes
 * /data, so a platform that does not mount a volume there (Fly.io without [[mounts]], a Kubernetes
 * pod without a volume: neither reads the image's VOLUME) left the database on the container's own
 * file system, every event acknowledged and then lost when the next container started.
 */
function onVolume(folder: string): boolean {
  for (let at = folder; at !== dirname(at); at = dirname(at)) if (isVolume(at)) return true;
  return false;
}

function notOnVolume(folder: string): string {
  return (
    `warning: the database folder ${folder} is on the container's own file system, not on a volume (no mount point from it up to /): ` +
    'every event stored there is lost when a new container starts (Fly.io: at each deploy and restart; Kubernetes: with each new pod). ' +
    `Mount a volume there (Fly.io: [[mounts]] in fly.toml; Kubernetes: a volumeMount; Docker: -v <volume>:${folder}) or set DATABASE_PATH to a path on one`
  );
}

/** The no-volume warning for a process that is not root: the folder as it resolves, if it exists. */
function warnIfNotOnVolume(folder: string): void {
  if (folder === '/' || folder === process.cwd()) return;
  let real: string;
  try {
    real = realpathSync(folder);
  } catch {
    return; // no such folder yet: the start says what it cannot create
  }
  if (!onVolume(real)) process.stderr.write(`${notOnVolume(folder)}\n`);
}

/** runAsFromEnv for an entry file: a problem ends the process with one line, before anything runs. */
export function runAsOrExit(env: Readonly<Record<string, string | undefined>>, databasePath = env.DATABASE_PATH, giveFolder = true): void {
  try {
    runAsFromEnv(env, databasePath, giveFolder);
  } catch (err) {
    process.stderr.write(`fatal: ${(err as Error).message}\n`);
    process.exit(1);
  }
}

function lookupUser(name: string): { uid: number; gid: number; home: string | undefined } | null {
  for (const line of readFileSync('/etc/passwd', 'utf8').split('\n')) {
    const [user, , uid, gid, , home] = line.split(':');
    if (user === name && uid !== undefined && gid !== undefined) return { uid: Number(uid), gid: Number(gid), home };
  }
  return null;
}
