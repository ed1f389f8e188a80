/**
 * The outbound proxy: HTTPS_PROXY, HTTP_PROXY and NO_PROXY (or their lowercase forms, which win,
 * as with curl and Node.js), read once at start for the hiring service's reads, the http sinks and
 * the CLI's `webhooks` commands.
 *
 * Sent through Node.js's own proxy support (an agent's `proxyEnv`, Node.js 22.21 / 24.5 and
 * later): CONNECT tunnels for https URLs, absolute-form requests for http ones, Basic
 * Proxy-Authorization from the proxy URL's user and password.
 */
import type { Env } from '../config/valueChecks.js';
import { wrappingProblem } from '../config/valueChecks.js';

export interface OutboundProxy {
  /** The proxy for https:// URLs, or null: direct. */
  readonly https: URL | null;
  /** The proxy for http:// URLs, or null: direct. */
  readonly http: URL | null;
  /** The hosts reached directly (NO_PROXY), with the loopback names and addresses added. */
  readonly noProxy: string;
}

/**
 * Loopback is never sent to a proxy, as Go's http.ProxyFromEnvironment does: a proxy elsewhere
 * cannot reach this machine's (or this container's) 127.0.0.1, so a sandbox or a sink beside the
 * receiver would fail for anyone whose shell exports HTTPS_PROXY. All of 127.0.0.0/8, as Go and
 * isLoopbackHost take it, in the IPv4 range form Node.js's NO_PROXY reads (it has no CIDR).
 */
const LOOPBACK = ['localhost', '127.0.0.0-127.255.255.255', '::1'];

/** Node.js gained `proxyEnv` in 22.21.0 and 24.5.0; an older one ignores it without a word. */
export function runtimeSupportsProxy(version: string = process.versions.node): boolean {
  const [major = 0, minor = 0] = version.split('.').map(Number);
  if (major === 22) return minor >= 21;
  if (major === 24) return minor >= 5;
  return major >= 25;
}

/** The variable in force for a name: its lowercase form when set and not empty, as Node.js and curl read them. */
function pick(env: Env, upper: string): { name: string; value: string } | null {
  const lower = upper.toLowerCase();
  if (env[lower] !== undefined && env[lower] !== '') return { name: lower, value: env[lower] };
  if (env[upper] !== undefined && env[upper] !== '') return { name: upper, value: env[upper] };
  return null;
}

/** A proxy URL from its variable, or null after saying in `problems` what is wrong (never the value: it may hold a password). */
function proxyUrl(name: string, value: string, problems: string[]): URL | null {
  const wrapping = wrappingProblem(value);
  if (wrapping) {
    problems.push(`${name}: ${wrapping}`);
    return null;
  }
  // `proxy.corp:3128` without a scheme is an http proxy, as for curl.
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(value) ? value : `http://${value}`;
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch {
    problems.push(`${name}: is not a proxy URL (the form is http://[user:password@]host:port; the value is not shown, as it may hold a password)`);
    return null;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    problems.push(`${name}: only http:// and https:// proxies are supported, got ${url.protocol}// (a SOCKS proxy is not)`);
    return null;
  }
  if (url.hostname === '') {
    problems.push(`${name}: names no proxy host (the form is http://[user:password@]host:port)`);
    return null;
  }
  // Node.js percent-decodes the user and password for Proxy-Authorization when the first agent is
  // made: a `%` that starts no escape (`50%off`) would throw there, a bare "URI malformed".
  try {
    decodeURIComponent(url.username);
    decodeURIComponent(url.password);
  } catch {
    problems.push(`${name}: the user or password has a % that is not a %XX escape (write % as %25; the value is not shown)`);
    return null;
  }
  return url;
}

/**
 * The proxy settings of `env`, or null when no proxy variable is set; each problem (an unreadable
 * URL, a SOCKS proxy, a Node.js without proxy support) said in `problems`, naming its variable.
 */
export function readOutboundProxy(env: Env, problems: string[], nodeVersion: string = process.versions.node): OutboundProxy | null {
  const httpsVar = pick(env, 'HTTPS_PROXY');
  const httpVar = pick(env, 'HTTP_PROXY');
  if (!httpsVar && !httpVar) return null;
  const before = problems.length;
  const https = httpsVar ? proxyUrl(httpsVar.name, httpsVar.value, problems) : null;
  const http = httpVar ? proxyUrl(httpVar.name, httpVar.value, problems) : null;
  if (!runtimeSupportsProxy(nodeVersion)) {
    const names = [httpsVar?.name, httpVar?.name].filter(Boolean).join(' and ');
    problems.push(`${names}: Node.js ${nodeVersion} cannot send through a proxy (it needs 22.21 or later 22.x, 24.5 or later, or 26.x); update Node.js, or unset ${names} to connect directly`);
  }
  if (problems.length > before) return null;
  const noProxy = pick(env, 'NO_PROXY')?.value ?? '';
  return { https, http, noProxy: [...noProxy.split(/[\s,]+/).filter((h) => h !== ''), ...LOOPBACK].join(',') };
}

/** What an agent is given (its `proxyEnv`): only the variables this module read, never the whole environment. */
export function proxyEnvOf(proxy: OutboundProxy): Record<string, string> {
  return {
    ...(proxy.https ? { HTTPS_PROXY: proxy.https.href } : {}),
    ...(proxy.http ? { HTTP_PROXY: proxy.http.href } : {}),
    NO_PROXY: proxy.noProxy,
  };
}

/** A proxy as it may be logged: scheme, host and port, never its user or password. */
export function describeProxy(url: URL): string {
  return `${url.protocol}//${url.host}`;
}
