/**
 * The checks of one configuration value, shared by loadConfig and loadApiSources: each reports what
 * is wrong in `problems`, led by where the value came from (a variable, a CONFIG_FILE field).
 */
import { parseSecret, quotedProblem } from './parseSecret.js';

/** The environment as loadConfig reads it (process.env, or a test's object). */
export type Env = Record<string, string | undefined>;

/** The form of a service API key (spec 5): sk-<segment>.<segment>, in characters an HTTP header can carry (a key pasted with "…" or "é" could never be sent). */
export const API_KEY = /^sk-[\x21-\x2d\x2f-\x7e]+\.[\x21-\x2d\x2f-\x7e]+$/;

export function intVar(env: Env, name: string, fallback: number, min: number, max: number, problems: string[]): number {
  const raw = env[name];
  if (raw === undefined || raw === '' || wrapped(env, name, problems)) return fallback;
  // A minus sign is read (to name the range), but not "-0".
  if (!/^(?:-?[1-9]\d*|\d+)$/.test(raw)) {
    problems.push(`${name}: must be an integer, got ${JSON.stringify(raw)}`);
    return fallback;
  }
  const n = Number(raw);
  if (n < min || n > max) problems.push(`${name}: must be between ${min} and ${max}, got ${n}`);
  return n;
}

/** Whether the variable's value carries quotes or spaces from an env file (said in `problems`). */
export function wrapped(env: Env, name: string, problems: string[]): boolean {
  const problem = wrappingProblem(env[name] ?? '');
  if (problem) problems.push(`${name}: ${problem}`);
  return problem !== null;
}

export function required(name: string, problems: string[]): null {
  problems.push(`${name}: is required (results are fetched from the hiring service with it)`);
  return null;
}

/**
 * What `docker --env-file` and `fly secrets set` keep that the value was not meant to have:
 * quotes around it, spaces or a line break at either end. Said as such (the value is not shown),
 * rather than as a value of the wrong form that looks right to its reader.
 */
export function wrappingProblem(value: string): string | null {
  const quoted = quotedProblem(value);
  if (quoted) return quoted;
  if (value !== value.trim()) return 'has spaces or a line break at its start or end: set the value without them';
  return null;
}

/**
 * An /api/v<n> segment ending the path or followed by one of the service's top-level resources
 * (spec 4: /applications, /jobs, /organization, /webhooks): the start of one of its own URLs.
 */
const API_VERSION_SEGMENT = /\/api\/v\d+(?=$|\/(?:applications|jobs|organization|webhooks)(?:\/|$))/i;

/**
 * The service's base URL (spec 1: `{base_url}/api/v1`, `{base_url}/api/v2`), without a trailing
 * slash. Refused, each with its fix: a URL of the service's API itself, /api/v1 or /api/v2 ending
 * its path or followed by one of the API's resources (the client adds those itself, so every read
 * would go to .../api/v2/api/v1/... and answer 404; a gateway's own path prefix is fine, even one
 * holding /api/v1 such as /api/v1/hiring), one with a query or fragment, and one carrying
 * user:password@ (a credential: never echoed, and the API key is the bearer token anyway).
 */
export function checkUrl(where: string, value: string, problems: string[]): string | null {
  const wrapped = wrappingProblem(value);
  if (wrapped) {
    problems.push(`${where}: ${wrapped}`);
    return null;
  }
  let u: URL;
  try {
    u = new URL(value);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error('scheme');
  } catch {
    // Never echoed: "user:password@host" and "host/?api_key=..." without a scheme do not parse
    // as http(s) URLs, and the credential check below would never see them.
    const hint = /^https?:\/\//i.test(value) ? 'it is not a valid URL' : /^[a-z][a-z0-9+.-]*:\/\//i.test(value) ? 'its scheme is not http or https' : 'it does not start with http:// or https://';
    problems.push(`${where}: must be an http(s) URL of the service host, such as https://hiring.example.com (${hint}; the value is not shown, it may hold a credential)`);
    return null;
  }
  if (u.username !== '' || u.password !== '') {
    problems.push(`${where}: must not carry a user name or password (user:password@); the API key is sent as the bearer token`);
    return null;
  }
  // Built from the parsed URL (credentials are refused above), not by cutting the raw text.
  const path = u.pathname.replace(/\/+$/, '');
  // At the path's end, or followed by one of the API's own resources: an endpoint's URL pasted
  // whole (.../api/v2/applications) would send every read to .../api/v2/applications/api/v2/... (404).
  // Followed by anything else, it is a gateway's own prefix (https://gw.example/api/v1/hiring): kept.
  const versioned = API_VERSION_SEGMENT.exec(path);
  if (versioned) {
    const base = u.origin + path.slice(0, versioned.index);
    const rest = path.slice(versioned.index);
    problems.push(`${where}: give the service's base URL without ${rest} (the receiver adds /api/v1 and /api/v2 itself): ${JSON.stringify(base)}`);
    return null;
  }
  if (u.search !== '' || u.hash !== '') {
    problems.push(`${where}: must not have a query or fragment: give the service's base URL, ${JSON.stringify(u.origin + path)}`);
    return null;
  }
  return u.origin + path;
}

export function checkApiKey(where: string, value: string, problems: string[]): string | null {
  const wrapped = wrappingProblem(value);
  if (wrapped) {
    problems.push(`${where}: ${wrapped}`);
    return null;
  }
  if (!API_KEY.test(value)) {
    // Never echo the value: it may be a real key with a typo.
    problems.push(`${where}: must have the form sk-<segment>.<segment>, in printable ASCII characters (no spaces, no "…")`);
    return null;
  }
  return value;
}

export function decodeSecrets(where: string, values: string[], problems: string[]): Buffer[] {
  if (values.length === 0) problems.push(`${where}: is empty; give one or more whsec_ secrets`);
  const keys: Buffer[] = [];
  values.forEach((v, i) => {
    const parsed = parseSecret(v);
    const label = values.length > 1 ? `${where} (secret ${i + 1} of ${values.length})` : where;
    if (parsed.ok) keys.push(parsed.key);
    else problems.push(`${label}: ${parsed.problem}`);
  });
  return keys;
}
