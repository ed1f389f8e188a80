import { KNOWN_EVENT_TYPES } from '../events/eventTypes.js';

/** True when a pattern list accepts the event type: exact names, `prefix.*`, or `*`; null accepts all. */
export function matchesEventType(patterns: readonly string[] | null, eventType: string): boolean {
  if (patterns === null) return true;
  return patterns.some((p) => p === '*' || p === eventType || (p.endsWith('.*') && eventType.startsWith(p.slice(0, -1))));
}

/** Whether a sink wants an event, by its `events` and `sources` filters. */
export function matchesSink(sink: { events: readonly string[] | null; sources: readonly string[] | null }, event: { event_type: string; source: string }): boolean {
  return matchesEventType(sink.events, event.event_type) && (sink.sources === null || sink.sources.includes(event.source));
}

/** A sink's `events` patterns that match no event type the service documents (spec 6.4): most likely typos. */
export function undocumentedPatterns(patterns: readonly string[] | null): string[] {
  return (patterns ?? []).filter((p) => !KNOWN_EVENT_TYPES.some((t) => matchesEventType([p], t)));
}
