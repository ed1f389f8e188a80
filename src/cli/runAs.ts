import { chownSync, lstatSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { ensureDirSync } from '../util/ensureDir.js';

/**
 * The Docker image starts as root with RUN_AS=node and comes here first: the database's folder
 * (the volume) is made the user's, then the process drops to that user for good, before anything
 * else runs. Why not `USER node` in the image: a volume mounted from outside is owned by root
 * (Fly.io volumes, bind mounts), so an unprivileged process could not create the database there;
 * a Docker named volume is the only kind that takes the image's ownership.
 *
 * Nothing happens without RUN_AS, or when the process is not root (`docker run --user 1234`, a
 * developer's shell).
 */
export function runAsFromEnv(env: Readonly<Record<string, string | undefined>>): void {
  const name = env.RUN_AS;
  if (!name || typeof process.getuid !== 'function' || process.getuid() !== 0) return;
  const user = lookupUser(name);
  if (!user) throw new Error(`RUN_AS: no user named ${JSON.stringify(name)} in /etc/passwd`);
  const folder = dirname(resolve(env.DATABASE_PATH && env.DATABASE_PATH.length > 0 ? env.DATABASE_PATH : './data/receiver.db'));
  ensureDirSync(folder);
  // The folder and what root left in it (a database a root process created, its -wal and
  // -shm): not recursive, so a mount of other data is never walked.
  chownIfRoot(folder, user);
  for (const entry of readdirSync(folder)) chownIfRoot(join(folder, entry), user);
  // POSIX only, like getuid above; supplementary groups first, while still root.
  const posix = process as NodeJS.Process & { initgroups(user: number, group: number): void; setgid(id: number): void; setuid(id: number): void };
  posix.initgroups(user.uid, user.gid);
  posix.setgid(user.gid);
  posix.setuid(user.uid);
}

function chownIfRoot(path: string, user: { uid: number; gid: number }): void {
  const st = lstatSync(path);
  if (st.uid === 0 && !st.isSymbolicLink()) chownSync(path, user.uid, user.gid);
}

function lookupUser(name: string): { uid: number; gid: number } | null {
  for (const line of readFileSync('/etc/passwd', 'utf8').split('\n')) {
    const [user, , uid, gid] = line.split(':');
    if (user === name && uid !== undefined && gid !== undefined) return { uid: Number(uid), gid: Number(gid) };
  }
  return null;
}
