import { readFileSync } from 'node:fs';
import type { SinkConfig } from '../sinks/sinkConfig.js';
import { splitSecrets } from './parseSecret.js';
import { isLoopbackHost } from '../util/loopback.js';
import { checkApiKey, checkUrl, decodeSecrets, intVar, required, wrapped, type Env } from './valueChecks.js';
import { checkDatabasePath, databasePathIn } from './databasePath.js';
import { loadFileSources } from './configFile.js';
import { envNamesIn, misspeltSettings, withMisspeltHint } from './misspeltSettings.js';
import { readOutboundProxy, type OutboundProxy } from '../http/outboundProxy.js';

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
  /** Bytes of request bodies held at once over all requests (read, or read and not answered yet); past it, 503. */
  readonly maxBodyBytesInFlight: number;
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
  /** HTTPS_PROXY / HTTP_PROXY / NO_PROXY for the result reads and the http sinks; null: direct. */
  readonly outboundProxy: OutboundProxy | null;
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

/** MAX_BODY_BYTES_IN_FLIGHT's default (or MAX_BODY_BYTES when larger): 32 MiB. */
export const DEFAULT_BODY_BYTES_IN_FLIGHT = 32 * 1024 * 1024;

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/**
 * Parses the environment (and the optional CONFIG_FILE) once. Every problem is
 * collected and reported together, each naming its variable or field path.
 */
export function loadConfig(env: Env, readFile: (path: string) => string = (p) => readFileSync(p, 'utf8')): Config {
  const problems: string[] = [];
  const settings = serverSettings(env, problems);

  const sources: SourceConfig[] = [];
  const secretEnv = env.WEBHOOK_SECRET;
  const configFile = env.CONFIG_FILE && env.CONFIG_FILE.length > 0 && !wrapped(env, 'CONFIG_FILE', problems) ? env.CONFIG_FILE : null;

  if (secretEnv !== undefined) sources.push(defaultSource(env, secretEnv, problems));

  const sinks: SinkConfig[] = [];
  const fileJson = configFile ? loadFileSources(configFile, env, readFile, sources, problems, sinks) : undefined;

  if (sources.length === 0 && !problems.some((p) => p.startsWith('CONFIG_FILE'))) {
    problems.push('WEBHOOK_SECRET: is required (or list sources in CONFIG_FILE)');
    // The default source needs all three: say so at once, not one start-up at a time.
    if (!configFile && !env.HIRING_API_URL) required('HIRING_API_URL', problems);
    if (!configFile && !env.HIRING_API_KEY) required('HIRING_API_KEY', problems);
  }
  checkSourcesApart(sources, problems);

  const misspelt = misspeltSettings(env, envNamesIn(fileJson));
  if (problems.length > 0) throw new ConfigError(problems.map((p) => withMisspeltHint(p, misspelt)));
  const warnings = configWarnings(env, misspelt, sources);
  return Object.freeze({
    ...settings,
    configFile,
    sources: Object.freeze(sources.map((s) => Object.freeze(s))),
    sinks: Object.freeze(sinks),
    warnings: Object.freeze(warnings),
  });
}

/** Config without what comes from the sources: the settings that are one variable each. */
type ServerSettings = Omit<Config, 'configFile' | 'sources' | 'sinks' | 'warnings'>;

/** The one-variable settings, checked in this order (the order of their problems in a ConfigError). */
function serverSettings(env: Env, problems: string[]): ServerSettings {
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
  // At least one whole body of MAX_BODY_BYTES must fit, or such a delivery could never be read.
  const maxBodyBytesInFlight = intVar(env, 'MAX_BODY_BYTES_IN_FLIGHT', Math.max(DEFAULT_BODY_BYTES_IN_FLIGHT, maxBodyBytes), 1024, 16 * 1024 ** 3, problems);
  if (maxBodyBytesInFlight < maxBodyBytes) {
    problems.push(`MAX_BODY_BYTES_IN_FLIGHT: must be at least MAX_BODY_BYTES (${maxBodyBytes}), or a delivery of that size could never be read; got ${maxBodyBytesInFlight}`);
  }
  const writeTimeoutMs = intVar(env, 'WRITE_TIMEOUT_MS', 5000, 10, 60_000, problems);
  const requestTimeoutMs = intVar(env, 'REQUEST_TIMEOUT_MS', 30_000, 1000, 600_000, problems);
  const shutdownGraceMs = intVar(env, 'SHUTDOWN_GRACE_MS', 5000, 0, 600_000, problems);
  const workerConcurrency = intVar(env, 'WORKER_CONCURRENCY', 4, 0, 64, problems);
  const processingShare = intVar(env, 'PROCESSING_SHARE', 25, 5, 100, problems);
  const resultGiveUpMs = intVar(env, 'RESULT_GIVE_UP_HOURS', 168, 1, 24 * 365, problems) * 3_600_000;
  const jobRetentionMs = intVar(env, 'JOB_RETENTION_DAYS', 30, 0, 3650, problems) * 86_400_000;
  const outboundProxy = readOutboundProxy(env, problems);
  return {
    port,
    host,
    metricsPort,
    databasePath,
    logLevel,
    maxBodyBytes,
    maxBodyBytesInFlight,
    writeTimeoutMs,
    requestTimeoutMs,
    shutdownGraceMs,
    workerConcurrency,
    processingShare,
    resultGiveUpMs,
    jobRetentionMs,
    outboundProxy,
  };
}

/** Source `default`: WEBHOOK_SECRET (set) with HIRING_API_URL and HIRING_API_KEY. */
function defaultSource(env: Env, secretEnv: string, problems: string[]): SourceConfig {
  const signingKeys = decodeSecrets('WEBHOOK_SECRET', splitSecrets(secretEnv), problems);
  const apiUrl = env.HIRING_API_URL ? checkUrl('HIRING_API_URL', env.HIRING_API_URL, problems) : required('HIRING_API_URL', problems);
  const apiKey = env.HIRING_API_KEY ? checkApiKey('HIRING_API_KEY', env.HIRING_API_KEY, problems) : required('HIRING_API_KEY', problems);
  return { name: 'default', signingKeys, apiUrl, apiKey };
}

/** Sources must be told apart: each name once, each signing key and each API key in one source only. */
function checkSourcesApart(sources: readonly SourceConfig[], problems: string[]): void {
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
  // An API key reads its own organization's applications only: one pasted under a second source
  // sent that source's every read with the other organization's key (404s, then dead letters).
  const apiKeyOwner = new Map<string, string>();
  for (const s of sources) {
    if (s.apiKey === null) continue;
    const owner = apiKeyOwner.get(s.apiKey);
    if (owner !== undefined) {
      problems.push(
        `CONFIG_FILE: sources ${JSON.stringify(owner)} and ${JSON.stringify(s.name)} have the same API key; a key reads only its own organization's applications, and one organization is one source (its endpoints' secrets together in its \`secrets\`)`,
      );
    } else apiKeyOwner.set(s.apiKey, s.name);
  }
}

/** A valid configuration's likely mistakes: misspelt variables, plain-http APIs, API settings no source uses. */
function configWarnings(env: Env, misspelt: readonly { name: string; near: string }[], sources: readonly SourceConfig[]): string[] {
  const warnings = misspelt.map(({ name, near }) => `${name} is not a setting; did you mean ${near}?${env[near] === undefined ? ` (${near} is unset)` : ''}`);
  for (const src of sources) {
    if (src.apiUrl === null) continue;
    const u = new URL(src.apiUrl);
    if (u.protocol === 'http:' && !isLoopbackHost(u.hostname)) warnings.push(`source ${src.name}: the hiring API at ${u.origin} is plain http: its API key and the candidates' results travel unencrypted; use https`);
  }
  const unusedApi = env.WEBHOOK_SECRET === undefined ? (['HIRING_API_URL', 'HIRING_API_KEY'] as const).filter((name) => env[name]) : [];
  if (unusedApi.length > 0) {
    const named = unusedApi.length === 1 ? `${unusedApi[0]} is set but unused: it belongs` : `${unusedApi.join(' and ')} are set but unused: they belong`;
    warnings.push(`${named} to the \`default\` source, which exists only with WEBHOOK_SECRET (the sources of CONFIG_FILE have their own api_url and api_key)`);
  }
  return warnings;
}
