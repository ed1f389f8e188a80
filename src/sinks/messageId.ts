import { createHash } from 'node:crypto';

/**
 * The webhook-id of an (event, sink) pair: the same on every retry and
 * replay, so a consumer dedupes on it; different per sink, so two sinks
 * pointing at one consumer are told apart.
 */
export function messageIdFor(eventId: string, sink: string): string {
  return `msg_${createHash('sha256').update(eventId).update('\0').update(sink).digest('hex').slice(0, 32)}`;
}
