/** Event types of spec 6.4. Others are stored and acknowledged too: the set can grow. */
export const KNOWN_EVENT_TYPES = [
  'application.created',
  'application.status_changed',
  'interview.completed',
  'cv_evaluation.completed',
  'insights.completed',
  'job_application.deleted',
  'interview_v2.completed',
] as const;
export type KnownEventType = (typeof KNOWN_EVENT_TYPES)[number];

const known: ReadonlySet<string> = new Set(KNOWN_EVENT_TYPES);
export const isKnownEventType = (t: string): t is KnownEventType => known.has(t);
