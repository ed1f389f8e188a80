import { createHash } from 'node:crypto';

/**
 * What a message says about its result (state, reason, data), as a short digest to compare: kept
 * in event_processing.result_digest for the revision an event was last settled with, and compared
 * with the stored result when a message is built.
 */
export function resultDigest(r: { state: string; reason: string | null; data: string | null }): string {
  return createHash('sha256').update(JSON.stringify([r.state, r.reason, r.data])).digest('hex').slice(0, 32);
}
