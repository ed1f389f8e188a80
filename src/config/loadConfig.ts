import { readFileSync } from 'node:fs';
import { z } from 'zod';
import type { SinkConfig } from '../sinks/sinkConfig.js';
import { splitSecrets } from './parseSecret.js';
import { envNameShown, resolveSecretRef, type SecretRef } from './secretRef.js';
import { CONFIG_PARSE } from './parseOptions.js';
import { isLoopbackHost } from '../util/loopback.js';
import { checkApiKey, checkUrl, decodeSecrets, intVar, required, wrapped, type Env } from './valueChecks.js';
import { checkDatabasePath, databasePathIn } from './databasePath.js';
import { fileSourceSchema, loadFileSources, readConfigJson, reportIssues } from './configFile.js';
import { envNamesIn, misspeltSettings, withMisspeltHint } from './misspeltSettings.js';

/** One organization whose deliveries we accept: its signing keys and API credentials. */
export interface SourceConfig {
  readonly name: string;
  /** Decoded HMAC keys; several during a secret rotation. */
  readonly signingKeys: readonly Buffer[];
  readonly apiUrl: string | null;
  readonly apiKey: string | null;
}

export interface Config {
  readonly port: number;
  readonly host: string;
  /**
   * METRICS_PORT: /metrics on its own listener (same HOST) and not on PORT, so a scraper on a
   * private network reaches it while the public webhook port does not serve it. null: on PORT.
   */
  readonly metricsPort: number | null;
  readonly databasePath: string;
  readonly logLevel: string;
  readonly maxBodyBytes: number;
  /** How long a delivery may wait for SQLite's write lock before we answer 503. */
  readonly writeTimeoutMs: number;
  /** Whole-request deadline: a client trickling bytes is cut off after this. */
  readonly requestTimeoutMs: number;
  /** At shutdown, how long requests already in progress may take before their connections are closed. */
  readonly shutdownGraceMs: number;
  /** Jobs run at once in this process; 0 runs no workers here (ingest only). */
  readonly workerConcurrency: number;
  /** Percent of the event loop processing may use while deliveries are arriving (100: no pacing). */
  readonly processingShare: number;
  /** A scoring result still `processing` after this long is given up (state given_up). */
  readonly resultGiveUpMs: number;
  /** Finished jobs (state done) are deleted this long after they finished; 0 keeps them. */
  readonly jobRetentionMs: number;
  readonly configFile: string | null;
  readonly sources: readonly SourceConfig[];
  /** Where settled events are fanned out (CONFIG_FILE `sinks`); empty when none. */
  readonly sinks: readonly SinkConfig[];
  /** Valid, but most likely a mistake (a misspelt variable's name): logged at warn at start. */
  readonly warnings: readonly string[];
}

export class ConfigError extends Error {
  constructor(readonly problems: readonly string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/**
 * Parses the environment (and the optional CONFIG_FILE) once. Every problem is
 * collected and reported together, each naming its variable or field path.
 */

export function loadConfig(env: Env, readFile: (path: string) => string = (p) => readFileSync(p, 'utf8')): Config {
  const problems: string[] = [];
  const port = intVar(env, 'PORT', 8080, 0, 65535, problems);
  const host = env.HOST && env.HOST.length > 0 && !wrapped(env, 'HOST', problems) ? env.HOST : '0.0.0.0';
  const metricsPort = env.METRICS_PORT === undefined || env.METRICS_PORT === '' ? null : intVar(env, 'METRICS_PORT', 0, 0, 65535, problems);
  if (metricsPort !== null && metricsPort !== 0 && metricsPort === port) {
    problems.push(`METRICS_PORT: must differ from PORT (${port}); leave it unset to serve /metrics on PORT`);
  }
  const databasePath = databasePathIn(env);
  const databaseProblem = checkDatabasePath(databasePath);
  if (databaseProblem) problems.push(`DATABASE_PATH: ${databaseProblem}`);
  const logLevel = env.LOG_LEVEL && env.LOG_LEVEL.length > 0 && !wrapped(env, 'LOG_LEVEL', problems) ? env.LOG_LEVEL : 'info';
  if (!(LOG_LEVELS as readonly string[]).includes(logLevel)) {
    problems.push(`LOG_LEVEL: must be one of ${LOG_LEVELS.join(', ')}, got ${JSON.stringify(logLevel)}`);
  }
  const maxBodyBytes = intVar(env, 'MAX_BODY_BYTES', 1024 * 1024, 1024, 64 * 1024 * 1024, problems);
  const writeTimeoutMs = intVar(env, 'WRITE_TIMEOUT_MS', 5000, 10, 60_000, problems);
  const requestTimeoutMs = intVar(env, 'REQUEST_TIMEOUT_MS', 30_000, 1000, 600_000, problems);
  const shutdownGraceMs = intVar(env, 'SHUTDOWN_GRACE_MS', 5000, 0, 600_000, problems);
  const workerConcurrency = intVar(env, 'WORKER_CONCURRENCY', 4, 0, 64, problems);
  const processingShare = intVar(env, 'PROCESSING_SHARE', 25, 5, 100, problems);
  const resultGiveUpMs = intVar(env, 'RESULT_GIVE_UP_HOURS', 168, 1, 24 * 365, problems) * 3_600_000;
  const jobRetentionMs = intVar(env, 'JOB_RETENTION_DAYS', 30, 0, 3650, problems) * 86_400_000;

  const sources: SourceConfig[] = [];
  const secretEnv = env.WEBHOOK_SECRET;
  const configFile = env.CONFIG_FILE && env.CONFIG_FILE.length > 0 && !wrapped(env, 'CONFIG_FILE', problems) ? env.CONFIG_FILE : null;

  if (secretEnv !== undefined) {
    const signingKeys = decodeSecrets('WEBHOOK_SECRET', splitSecrets(secretEnv), problems);
    const apiUrl = env.HIRING_API_URL ? checkUrl('HIRING_API_URL', env.HIRING_API_URL, problems) : required('HIRING_API_URL', problems);
    const apiKey = env.HIRING_API_KEY ? checkApiKey('HIRING_API_KEY', env.HIRING_API_KEY, problems) : required('HIRING_API_KEY', problems);
    sources.push({ name: 'default', signingKeys, apiUrl, apiKey });
  }

  const sinks: SinkConfig[] = [];
  const fileJson = configFile ? loadFileSources(configFile, env, readFile, sources, problems, sinks) : undefined;

  if (sources.length === 0 && !problems.some((p) => p.startsWith('CONFIG_FILE'))) {
    problems.push('WEBHOOK_SECRET: is required (or list sources in CONFIG_FILE)');
    // The default source needs all three: say so at once, not one start-up at a time.
    if (!configFile && !env.HIRING_API_URL) required('HIRING_API_URL', problems);
    if (!configFile && !env.HIRING_API_KEY) required('HIRING_API_KEY', problems);
  }
  const seen = new Set<string>();
  for (const s of sources) {
    if (seen.has(s.name)) problems.push(`CONFIG_FILE: source name ${JSON.stringify(s.name)} is used twice`);
    seen.add(s.name);
  }
  // A delivery is attributed to the source whose key verifies it: one key in two sources would
  // store one organization's events under the other's name and fetch them with the wrong API key.
  const keyOwner = new Map<string, string>();
  for (const s of sources) {
    for (const key of s.signingKeys) {
      const owner = keyOwner.get(key.toString('base64'));
      if (owner !== undefined && owner !== s.name) {
        problems.push(
          `CONFIG_FILE: sources ${JSON.stringify(owner)} and ${JSON.stringify(s.name)} have the same signing secret; each webhook endpoint has its own, and deliveries could not be told apart`,
        );
      } else keyOwner.set(key.toString('base64'), s.name);
    }
  }

  const misspelt = misspeltSettings(env, envNamesIn(fileJson));
  if (problems.length > 0) throw new ConfigError(problems.map((p) => withMisspeltHint(p, misspelt)));
  const warnings = misspelt.map(({ name, near }) => `${name} is not a setting; did you mean ${near}?${env[near] === undefined ? ` (${near} is unset)` : ''}`);
  for (const src of sources) {
    if (src.apiUrl === null) continue;
    const u = new URL(src.apiUrl);
    if (u.protocol === 'http:' && !isLoopbackHost(u.hostname)) warnings.push(`source ${src.name}: the hiring API at ${u.origin} is plain http: its API key and the candidates' results travel unencrypted; use https`);
  }
  const unusedApi = secretEnv === undefined ? (['HIRING_API_URL', 'HIRING_API_KEY'] as const).filter((name) => env[name]) : [];
  if (unusedApi.length > 0) {
    const named = unusedApi.length === 1 ? `${unusedApi[0]} is set but unused: it belongs` : `${unusedApi.join(' and ')} are set but unused: they belong`;
    warnings.push(`${named} to the \`default\` source, which exists only with WEBHOOK_SECRET (the sources of CONFIG_FILE have their own api_url and api_key)`);
  }
  return Object.freeze({
    port,
    host,
    metricsPort,
    databasePath,
    logLevel,
    maxBodyBytes,
    writeTimeoutMs,
    requestTimeoutMs,
    shutdownGraceMs,
    workerConcurrency,
    processingShare,
    resultGiveUpMs,
    jobRetentionMs,
    configFile,
    sources: Object.freeze(sources.map((s) => Object.freeze(s))),
    sinks: Object.freeze(sinks),
    warnings: Object.freeze(warnings),
  });
}

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
