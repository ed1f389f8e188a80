import { createHash } from 'node:crypto';

/**
 * What a message says about its result (state, reason, data), as a short digest to compare: kept
 * in event_processing.result_digest for the revision an event was last settled with, and compared
 * with the stored result when a message is built.
 */
export function resultDigest(r: { state: string; reason: string | null; data: string | null }): string {
  return createHash('sha256').update(JSON.stringify([r.state, r.reason, r.data])).digest('hex').slice(0, 32);
}

/**
 * What a job_application.deleted message says that can change after it was sent: its external_id,
 * which its snapshot lacks (spec 6.4) and is taken from the application as stored. A deletion
 * folded before the application's other events has none yet; this digest, kept as the event's
 * result_digest, tells when the stored one changed, so the message is sent again as its next
 * revision, with the correlation id its consumer keys on.
 */
export const deletionDigest = (externalId: string | null): string => resultDigest({ state: 'deleted', reason: null, data: JSON.stringify(externalId) });
