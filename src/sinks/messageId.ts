import { createHash } from 'node:crypto';

/**
 * The webhook-id of an (event, sink) pair: the same on every retry and
 * replay, so a consumer dedupes on it; different per sink, so two sinks
 * pointing at one consumer are told apart. A later revision of the event's
 * message (its result changed after it was sent) gets its own id, so that a
 * consumer that dedupes takes the correction; revision 1 keeps the id of
 * earlier versions of the receiver.
 */
export function messageIdFor(eventId: string, sink: string, revision = 1): string {
  const h = createHash('sha256').update(eventId).update('\0').update(sink);
  if (revision > 1) h.update('\0').update(String(revision));
  return `msg_${h.digest('hex').slice(0, 32)}`;
}
