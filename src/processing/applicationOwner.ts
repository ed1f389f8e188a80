/**
 * SQL for which source owns an application. The applications and result tables are keyed by the
 * application id alone, and a source is an organization: the application belongs to the source of
 * its linked event stored first (lowest events rowid: the order of arrival, which the sender of a
 * later delivery cannot backdate, unlike its created_at). Taken from the first event rather than
 * "no event of another source": an application linked to events of two sources before processing
 * checked this (a database from before it) would otherwise refuse every new event of both.
 */

/** The owner's source of the application `applicationId` (an SQL expression); NULL before its first link. */
export const ownerOf = (applicationId: string): string => `(SELECT o.source FROM application_events l JOIN events o ON o.id = l.event_id
      WHERE l.application_id = ${applicationId} ORDER BY o.rowid LIMIT 1)`;

/**
 * Whether the event `eventId` (an SQL expression) names an application another source owns: its
 * fold is refused for good (processEvent), so its dead letter is the end of it, not an event
 * processing has still to finish.
 */
export const refusedForItsSource = (eventId: string): string => `EXISTS (SELECT 1 FROM events r WHERE r.id = ${eventId}
      AND r.application_id IS NOT NULL AND ${ownerOf('r.application_id')} <> r.source)`;
