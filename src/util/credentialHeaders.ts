/**
 * Request headers that may carry a credential: the standard ones, and any
 * whose name says so (`X-Auth-Token`, `X-Api-Key`, `X-Session-Id`,
 * `X-Client-Secret`, `Cf-Access-Jwt-Assertion`, `X-Functions-Key`,
 * `Ocp-Apim-Subscription-Key`, ...). A proxy in front of the receiver may add
 * its own. Leaning to drop: a header dropped by mistake only costs a clue.
 */
const STANDARD = new Set(['authorization', 'proxy-authorization', 'cookie', 'set-cookie']);
const NAMED = /auth|token|secret|passw|api[-_]?key|(?:^|[-_])key$|access[-_]?key|session|credential|cookie|jwt|assertion/i;

export function isCredentialHeader(name: string): boolean {
  return STANDARD.has(name.toLowerCase()) || NAMED.test(name);
}
