import type { HiringResource } from './types.js';

/**
 * Path (below the service host) of one resource of one application.
 *
 * The id is percent-encoded so it stays one path segment. `.` and `..` are
 * rejected: URL parsing would resolve them as dot-segments (even encoded as
 * `%2e`) and send the request, with the key, to a different endpoint.
 */
export function resourcePath(resource: HiringResource, applicationId: string): string {
  const problem = applicationIdProblem(applicationId);
  if (problem !== null) throw new TypeError(`applicationId ${problem}`);
  const id = encodeURIComponent(applicationId);
  switch (resource) {
    case 'interview':
      return `/api/v2/applications/${id}/interview`;
    case 'cv_evaluation':
      return `/api/v2/applications/${id}/cv-evaluation`;
    case 'insights':
      return `/api/v2/applications/${id}/insights`;
    case 'legacy_interview':
      return `/api/v1/applications/${id}/interview`;
    default: {
      const unknown: never = resource;
      throw new TypeError(`unknown hiring resource: ${String(unknown)}`);
    }
  }
}

/** Why an application id can never be read from the service, or null when it can be. */
export function applicationIdProblem(applicationId: unknown): string | null {
  if (typeof applicationId !== 'string' || applicationId.length === 0) return 'must be a non-empty string';
  if (applicationId === '.' || applicationId === '..') return 'must not be a dot-segment';
  return null;
}
