import { API_KEY, ConfigError, loadConfig, type Config } from '../config/loadConfig.js';
import { CliError } from './errors.js';

/**
 * Configuration for the CLI. `serve` reads everything, exactly like the server
 * (loadConfig). The other commands read only what they use, from the same
 * environment and CONFIG_FILE, so an operator can run `status` with nothing
 * but DATABASE_PATH set, and `send` or `sandbox` with nothing at all:
 *
 * | command | reads |
 * |---|---|
 * | status, replay, dead-letters, quarantine, migrate, sinks | DATABASE_PATH (or --database); sinks from CONFIG_FILE when present |
 * | webhooks | HIRING_API_URL + HIRING_API_KEY, or a CONFIG_FILE source (--source) |
 * | send | nothing required; WEBHOOK_SECRET and PORT as defaults |
 * | sandbox | SANDBOX_PORT, SANDBOX_HOST |
 * | serve | everything (as `npm start`) |
 */
type Env = Readonly<Record<string, string | undefined>>;

/** Same default as the server (src/config/loadConfig.ts). */
export const DEFAULT_DATABASE_PATH = './data/receiver.db';

export function configProblems(problems: readonly string[]): CliError {
  return new CliError(problems.map((p) => `config error: ${p}`).join('\n'));
}

export function databasePathOf(env: Env, override?: string): string {
  if (override !== undefined && override !== '') return override;
  const v = env['DATABASE_PATH'];
  return v !== undefined && v !== '' ? v : DEFAULT_DATABASE_PATH;
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
}

/**
 * Credentials of the hiring API. `--source NAME` (or no HIRING_API_URL but a
 * CONFIG_FILE) reads the configuration like the server and takes that
 * source's api_url/api_key; otherwise HIRING_API_URL and HIRING_API_KEY alone.
 */
export function apiSettings(env: Env, source?: string): ApiSettings {
  const hasEnv = (env['HIRING_API_URL'] ?? '') !== '' || (env['HIRING_API_KEY'] ?? '') !== '';
  if (source !== undefined || (!hasEnv && (env['CONFIG_FILE'] ?? '') !== '')) {
    const config = fullConfig(env);
    const name = source ?? (config.sources.length === 1 ? config.sources[0]!.name : undefined);
    if (name === undefined) {
      throw new CliError(`several sources are configured (${config.sources.map((s) => s.name).join(', ')}); choose one with --source`, 2);
    }
    const src = config.sources.find((s) => s.name === name);
    if (!src) throw new CliError(`no source named ${JSON.stringify(name)} is configured (known: ${config.sources.map((s) => s.name).join(', ')})`, 2);
    if (!src.apiUrl || !src.apiKey) throw new CliError(`source ${JSON.stringify(name)} has no api_url/api_key`);
    return { apiUrl: src.apiUrl, apiKey: src.apiKey, origin: `source ${name}` };
  }
  const problems: string[] = [];
  const url = env['HIRING_API_URL'] ?? '';
  const key = env['HIRING_API_KEY'] ?? '';
  let apiUrl = '';
  if (url === '') problems.push('HIRING_API_URL: is required (the hiring service host, e.g. https://hiring.example.com)');
  else {
    try {
      const u = new URL(url);
      if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error('scheme');
      apiUrl = url.replace(/\/+$/, '');
    } catch {
      problems.push(`HIRING_API_URL: must be an http(s) URL of the service host, got ${JSON.stringify(url)}`);
    }
  }
  // Never echo the key: it may be a real key with a typo.
  if (key === '') problems.push('HIRING_API_KEY: is required (an API key of your organization, sk-<segment>.<segment>)');
  else if (!API_KEY.test(key)) problems.push('HIRING_API_KEY: must have the form sk-<segment>.<segment>');
  if (problems.length > 0) throw configProblems(problems);
  return { apiUrl, apiKey: key, origin: 'HIRING_API_URL/HIRING_API_KEY' };
}
