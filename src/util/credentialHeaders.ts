/**
 * Request headers that may carry a credential: the standard ones, and any
 * whose name says so (`X-Auth-Token`, `X-Api-Key`, `X-Session-Id`,
 * `X-Client-Secret`, `Cf-Access-Jwt-Assertion`, `X-Functions-Key`,
 * `Ocp-Apim-Subscription-Key`, ...). A proxy in front of the receiver may add
 * its own. Leaning to drop: a header dropped by mistake only costs a clue.
 */
const NAMED = /auth|token|secret|passw|api[-_]?key|(?:^|[-_])key$|access[-_]?key|session|credential|cookie|jwt|assertion/i;

/** Authorization, Proxy-Authorization, Cookie and Set-Cookie are among the names NAMED matches. */
export function isCredentialHeader(name: string): boolean {
  return NAMED.test(name);
}
