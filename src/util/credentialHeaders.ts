/**
 * Request headers that may carry a credential: the standard ones, and any
 * whose name says so (`X-Auth-Token`, `X-Api-Key`, `X-Session-Id`,
 * `X-Client-Secret`, ...). A proxy in front of the receiver may add its own.
 */
const STANDARD = new Set(['authorization', 'proxy-authorization', 'cookie', 'set-cookie']);
const NAMED = /auth|token|secret|passw|api-?key|session|credential|cookie/i;

export function isCredentialHeader(name: string): boolean {
  return STANDARD.has(name.toLowerCase()) || NAMED.test(name);
}
