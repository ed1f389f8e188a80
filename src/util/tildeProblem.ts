import { homedir } from 'node:os';

/**
 * What is wrong with a path starting with "~" (`~`, `~/data`, `~alice/data`), or null: only a
 * shell expands it, not an env file, Docker, systemd, fly secrets or a JSON file, so it would name
 * a folder "~" (or "~alice") in the working directory: a database made there, out of sight; a file
 * sink's lines written where no one looks; a CONFIG_FILE not found. One rule for DATABASE_PATH,
 * CONFIG_FILE and a file sink's path.
 */
export function tildeProblem(path: string): string | null {
  const user = /^~([\w.-]*)(\/|$)/.exec(path);
  if (!user) return null;
  const shell = 'starts with "~", which only a shell expands (not an env file, Docker or systemd)';
  // Another user's home folder (`~alice/...`) is not known here: no example to offer.
  if (user[1] !== '') return `${shell}: give the whole path, starting with the home folder of ${JSON.stringify(user[1])}`;
  return `${shell}: give the whole path, such as ${JSON.stringify(homedir() + path.slice(1))}`;
}
