import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { fileSourceSchema, readConfigJson, reportIssues } from './configFile.js';
import { ConfigError } from './loadConfig.js';
import { CONFIG_PARSE } from './parseOptions.js';
import { envNameShown, resolveSecretRef, type SecretRef } from './secretRef.js';
import { checkApiKey, checkUrl, type Env } from './valueChecks.js';

/** One source's hiring API settings, for a tool that only calls the API; problems name their field. */
export interface ApiSource {
  readonly name: string;
  readonly apiUrl: string | null;
  readonly apiKey: string | null;
  /**
   * The one environment variable that holds the source's signing secrets, for telling where a
   * new secret goes: WEBHOOK_SECRET for `default`, NAME for a file source whose `secrets` is
   * `{ "env": "NAME" }`; null when they are written in CONFIG_FILE itself (or listed there).
   */
  readonly secretsEnv: string | null;
  /** True when `secrets` is `{ "env": NAME }` alone, also when NAME is not one to print (secretsEnv null then). */
  readonly secretsInEnv: boolean;
  readonly problems: readonly string[];
}

/**
 * Where a `secrets` given as `{ "env": "NAME" }` alone (not a list, not inline) is read from:
 * NAME, when it is one to print (a secret pasted in place of the name, whsec_ or not, is
 * refused by the server; never print it as a name: the same rule as the server's messages).
 */
function secretsVariable(secrets: unknown): { secretsEnv: string | null; secretsInEnv: boolean } {
  if (typeof secrets !== 'object' || secrets === null || Array.isArray(secrets)) return { secretsEnv: null, secretsInEnv: false };
  const name = (secrets as { env?: unknown }).env;
  if (typeof name !== 'string') return { secretsEnv: null, secretsInEnv: false };
  return { secretsEnv: envNameShown(name) ? name : null, secretsInEnv: true };
}

/**
 * The server's file shape, as strict (a typo is still reported with its path), with the
 * contents of `secrets` and `sinks` left unread.
 */
const apiOnlyFileSchema = z
  .object({
    sources: z.array(fileSourceSchema.extend({ secrets: z.unknown().optional() })).optional(),
    sinks: z.unknown().optional(),
  })
  .strict();

/**
 * The sources' API settings, as the server configures its sources (HIRING_API_URL/HIRING_API_KEY
 * are source `default` when WEBHOOK_SECRET is set, or when there is no CONFIG_FILE; CONFIG_FILE
 * `sources` besides), reading nothing else: not the signing secrets (a new organization gets its
 * secret from `webhooks register`, which needs these settings first), not the sinks, not the
 * server's other variables. A source's own problems (an unset variable, a bad URL or key, its
 * name used twice) are in its `problems`; a CONFIG_FILE that cannot be read or parsed, or has a
 * key the server would not accept, throws a ConfigError.
 */
export function loadApiSources(env: Env, readFile: (path: string) => string = (p) => readFileSync(p, 'utf8')): ApiSource[] {
  const out: ApiSource[] = [];
  const path = env.CONFIG_FILE && env.CONFIG_FILE.length > 0 ? env.CONFIG_FILE : null;
  if (env.WEBHOOK_SECRET !== undefined || (!path && (env.HIRING_API_URL || env.HIRING_API_KEY))) {
    const problems: string[] = [];
    if (!env.HIRING_API_URL) problems.push('HIRING_API_URL: is required (the hiring service host, e.g. https://hiring.example.com)');
    if (!env.HIRING_API_KEY) problems.push('HIRING_API_KEY: is required (an API key of your organization, sk-<segment>.<segment>)');
    const apiUrl = env.HIRING_API_URL ? checkUrl('HIRING_API_URL', env.HIRING_API_URL, problems) : null;
    const apiKey = env.HIRING_API_KEY ? checkApiKey('HIRING_API_KEY', env.HIRING_API_KEY, problems) : null;
    out.push({ name: 'default', apiUrl, apiKey, secretsEnv: 'WEBHOOK_SECRET', secretsInEnv: true, problems });
  }
  if (path) {
    const fileProblems: string[] = [];
    const json = readConfigJson(path, readFile, fileProblems);
    const parsed = json === undefined ? null : apiOnlyFileSchema.safeParse(json, CONFIG_PARSE);
    if (parsed && !parsed.success) reportIssues(parsed.error.issues, { schema: apiOnlyFileSchema, input: json }, fileProblems);
    if (fileProblems.length > 0 || !parsed?.success) throw new ConfigError(fileProblems);
    (parsed.data.sources ?? []).forEach((src, i) => {
      const at = `CONFIG_FILE sources.${i}`;
      const problems: string[] = [];
      const resolve = (where: string, ref: SecretRef) => resolveSecretRef(where, ref, env, (m) => problems.push(m));
      const urlRaw = resolve(`${at}.api_url`, src.api_url);
      const keyRaw = resolve(`${at}.api_key`, src.api_key);
      out.push({
        name: src.name,
        apiUrl: urlRaw === null ? null : checkUrl(`${at}.api_url`, urlRaw, problems),
        apiKey: keyRaw === null ? null : checkApiKey(`${at}.api_key`, keyRaw, problems),
        ...secretsVariable(src.secrets),
        problems,
      });
    });
  }
  // As the server: a name used twice is an error, here for the source that would be chosen.
  const uses = new Map<string, number>();
  for (const s of out) uses.set(s.name, (uses.get(s.name) ?? 0) + 1);
  return out.map((s) => (uses.get(s.name)! > 1 ? { ...s, problems: [...s.problems, `CONFIG_FILE: source name ${JSON.stringify(s.name)} is used twice`] } : s));
}
