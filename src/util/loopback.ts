import { isIPv4 } from 'node:net';

/** A host name that names this machine: localhost, ::1 (with or without brackets) or an IPv4 127.x address. */
export function isLoopbackHost(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, '');
  return host === 'localhost' || host === '::1' || (isIPv4(host) && host.startsWith('127.'));
}
