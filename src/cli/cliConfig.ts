import { ConfigError, loadConfig, type Config } from '../config/loadConfig.js';
import { loadApiSources, type ApiSource } from '../config/loadApiSources.js';
import { checkDatabasePath, databasePathIn, folderProblem } from '../config/databasePath.js';
import { readOutboundProxy, type OutboundProxy } from '../http/outboundProxy.js';
import { CliError, UsageError } from './errors.js';

/**
 * Configuration for the CLI. `serve` reads everything, exactly like the server
 * (loadConfig). The other commands read only what they use, from the same
 * environment and CONFIG_FILE, so an operator can run `status` with nothing
 * but DATABASE_PATH set, and `send` or `sandbox` with nothing at all:
 *
 * | command | reads |
 * |---|---|
 * | status, replay, dead-letters, quarantine, conflicts, migrate, prune, backup, sinks, erase | DATABASE_PATH (or --database); sinks from CONFIG_FILE when present |
 * | webhooks | HIRING_API_URL + HIRING_API_KEY, or a CONFIG_FILE source (--source) |
 * | send | nothing required; WEBHOOK_SECRET and PORT as defaults |
 * | sandbox | SANDBOX_PORT, SANDBOX_HOST, SANDBOX_TIME_FACTOR, SANDBOX_MANUAL_CLOCK |
 * | serve | everything (as `npm start`) |
 */
type Env = Readonly<Record<string, string | undefined>>;

export function configProblems(problems: readonly string[]): CliError {
  return new CliError(problems.map((p) => `config error: ${p}`).join('\n'));
}

export function databasePathOf(env: Env, override?: string): string {
  // An empty --database (an unset shell variable, --database "$DB") is a mistake, not "the default".
  if (override === '') throw new UsageError('--database: the path is empty (leave the option out for DATABASE_PATH or the default)');
  if (override !== undefined) {
    // Taken as given (quotes, a `~`, spaces and all), but a folder is no database file.
    const folder = folderProblem(override);
    if (folder) throw new UsageError(`--database: ${folder}`);
    return override;
  }
  // DATABASE_PATH as `serve` takes it: one that serve refuses (`~/receiver.db` from an env file,
  // a folder) must not make a database elsewhere for `migrate`, nor send `status` to look there.
  const path = databasePathIn(env);
  const problem = checkDatabasePath(path);
  if (problem) throw configProblems([`DATABASE_PATH: ${problem}`]);
  return path;
}

/** The server's whole configuration; problems become `config error:` lines and exit 1. */
export function fullConfig(env: Env): Config {
  try {
    return loadConfig({ ...env });
  } catch (err) {
    if (err instanceof ConfigError) throw configProblems(err.problems);
    throw err;
  }
}

export interface ApiSettings {
  apiUrl: string;
  apiKey: string;
  /** Where the settings came from, for messages (never the key itself). */
  origin: string;
  /** The source these settings are of, and the variable that holds its signing secrets (see ApiSource). */
  source: string;
  secretsEnv: string | null;
  secretsInEnv: boolean;
  /** HTTPS_PROXY / HTTP_PROXY / NO_PROXY, as the receiver reads them; null: direct. */
  proxy: OutboundProxy | null;
}

/**
 * Credentials of the hiring API. `--source NAME` (or no HIRING_API_URL but a CONFIG_FILE) takes
 * that source's api_url/api_key, the sources being the server's (`default` is
 * HIRING_API_URL/HIRING_API_KEY when WEBHOOK_SECRET is set); otherwise
 * HIRING_API_URL and HIRING_API_KEY alone. Only those settings are read: a source whose signing
 * secret is not set yet can be named (`webhooks register` is how it gets one), and neither the
 * sinks nor the server's other variables can stop an API command.
 */
export function apiSettings(env: Env, source?: string): ApiSettings {
  const hasEnv = (env['HIRING_API_URL'] ?? '') !== '' || (env['HIRING_API_KEY'] ?? '') !== '';
  const fromFile = source !== undefined || (!hasEnv && (env['CONFIG_FILE'] ?? '') !== '');
  let sources: ApiSource[];
  try {
    sources = loadApiSources(
      fromFile
        ? { ...env }
        : // HIRING_API_URL/HIRING_API_KEY alone, as source `default` (WEBHOOK_SECRET is not needed here).
          { HIRING_API_URL: env['HIRING_API_URL'], HIRING_API_KEY: env['HIRING_API_KEY'], WEBHOOK_SECRET: '' },
    );
  } catch (err) {
    if (err instanceof ConfigError) throw configProblems(err.problems);
    throw err;
  }
  const configured = sources.map((s) => s.name);
  const name = source ?? (sources.length === 1 ? sources[0]!.name : undefined);
  if (name === undefined) {
    // Missing configuration, not bad usage: exit 1, as for the other config errors.
    if (sources.length === 0) throw configProblems(['no source is configured: set HIRING_API_URL and HIRING_API_KEY, or list sources in CONFIG_FILE']);
    throw new CliError(`several sources are configured (${configured.join(', ')}); choose one with --source`, 2);
  }
  const src = sources.find((s) => s.name === name);
  if (!src) {
    const known = configured.length > 0 ? configured.join(', ') : 'none';
    throw new CliError(`no source named ${JSON.stringify(name)} is configured (known: ${known})`, 2);
  }
  if (src.problems.length > 0) throw configProblems(src.problems);
  if (!src.apiUrl || !src.apiKey) throw new CliError(`source ${JSON.stringify(name)} has no api_url/api_key`);
  const proxyProblems: string[] = [];
  const proxy = readOutboundProxy(env, proxyProblems);
  if (proxyProblems.length > 0) throw configProblems(proxyProblems);
  return {
    apiUrl: src.apiUrl,
    apiKey: src.apiKey,
    origin: name === 'default' && !fromFile ? 'HIRING_API_URL/HIRING_API_KEY' : `source ${name}`,
    source: name,
    secretsEnv: src.secretsEnv,
    secretsInEnv: src.secretsInEnv,
    proxy,
  };
}
