import { readFileSync } from 'node:fs';
import { editDistance } from '../util/editDistance.js';
import { readConfigJson } from './configFile.js';
import type { Env } from './valueChecks.js';

/** Every environment variable the receiver reads (README "Configuration"). */
export const SETTINGS = [
  'PORT', 'HOST', 'METRICS_PORT', 'WORK_METRICS_PORT', 'DATABASE_PATH', 'WEBHOOK_SECRET', 'HIRING_API_URL', 'HIRING_API_KEY',
  'CONFIG_FILE', 'LOG_LEVEL', 'MAX_BODY_BYTES', 'MAX_BODY_BYTES_IN_FLIGHT', 'WRITE_TIMEOUT_MS', 'REQUEST_TIMEOUT_MS', 'SHUTDOWN_GRACE_MS',
  'WORKER_CONCURRENCY', 'PROCESSING_SHARE', 'RESULT_GIVE_UP_HOURS', 'JOB_RETENTION_DAYS', 'RUN_AS',
] as const;

/**
 * Variables whose name is one or two letters from a setting's (WORKER_CONCURENCY, WEBHOOK_SECRETS),
 * or is a setting's in other letter case (webhook_secret): a typo leaves that setting at its default
 * without a word. Only names of 8 letters and more are compared by distance (HOME is two letters
 * from HOST), and only with settings within two letters of their length (no closer distance is
 * possible otherwise): every variable of the environment is compared, at every start and command.
 */
export function misspeltSettings(env: Env, named: ReadonlySet<string>): { name: string; near: string }[] {
  const known = new Set<string>([...SETTINGS, ...named]);
  const out: { name: string; near: string }[] = [];
  for (const name of Object.keys(env)) {
    if (known.has(name)) continue;
    const upper = name.toUpperCase();
    const near = SETTINGS.find((s) => s === upper) ?? (name.length < 8 ? undefined : SETTINGS.find((s) => s.length >= 8 && Math.abs(s.length - upper.length) <= 2 && editDistance(upper, s) <= 2));
    if (near) out.push({ name, near });
  }
  return out;
}

/**
 * Variables set in `env` that look like a misspelling of `setting` (DATABSE_PATH or
 * database_path for DATABASE_PATH): the ones the server warns of at start. As there, a variable
 * CONFIG_FILE names in a `{ "env": NAME }` (a sink header's DATABASE_AUTH) is not one; a
 * CONFIG_FILE that cannot be read or parsed names none (its problems are said elsewhere).
 */
export function misspellingsOf(env: Env, setting: string, readFile: (path: string) => string = (p) => readFileSync(p, 'utf8')): string[] {
  const file = env.CONFIG_FILE;
  const named = file ? envNamesIn(readConfigJson(file, readFile, [])) : new Set<string>();
  return misspeltSettings(env, named).filter(({ near }) => near === setting).map(({ name }) => name);
}

/**
 * A required setting reported missing while a misspelt one is set (WEBHOOK_SECRETS for
 * WEBHOOK_SECRET): said in the same line, since the warning that would name it is only logged
 * by a receiver that starts.
 */
export function withMisspeltHint(problem: string, misspelt: readonly { name: string; near: string }[]): string {
  const typos = misspelt.filter(({ near }) => problem.startsWith(`${near}: is required`)).map(({ name }) => name);
  return typos.length === 0 ? problem : `${problem}; ${typos.join(', ')} ${typos.length === 1 ? 'is' : 'are'} set: a misspelling of ${problem.slice(0, problem.indexOf(':'))}?`;
}

/** The variables CONFIG_FILE (parsed) names in its `{ "env": NAME }` values (a second organization's WEBHOOK_SECRET_2). */
export function envNamesIn(json: unknown): Set<string> {
  const names = new Set<string>();
  // A list of what is left to look at, not recursion: a value nested some thousands deep (valid
  // JSON) ended the start with "Maximum call stack size exceeded" instead of its config error.
  const left: unknown[] = [json];
  while (left.length > 0) {
    const v = left.pop();
    if (v === null || typeof v !== 'object') continue;
    const o = v as Record<string, unknown>;
    if (!Array.isArray(v) && typeof o['env'] === 'string') names.add(o['env']);
    // One at a time: a spread of a list of a million items would overflow the stack in its own way.
    for (const item of Object.values(o)) left.push(item);
  }
  return names;
}
