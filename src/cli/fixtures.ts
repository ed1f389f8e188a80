import { randomUUID } from 'node:crypto';
import { KNOWN_EVENT_TYPES, type KnownEventType } from '../events/eventTypes.js';


/** The event types of spec 6.4, in the order of an application's life: one fixture each. */
export const FIXTURE_TYPES = KNOWN_EVENT_TYPES;
export type FixtureType = KnownEventType;

export interface FixtureIds {
  eventId?: string;
  applicationId?: string;
  /** null sends `external_id: null` (unset, spec 6.4). */
  externalId?: string | null;
  webhookId?: string;
}

/**
 * A realistic envelope (spec 6.1) for each event type of spec 6.4, shaped
 * like the service's (and the sandbox's) deliveries: every `application`
 * block has `external_id`; names are fictional, emails on example.com and the
 * phone number from the range reserved for fiction.
 */
export function buildFixture(type: FixtureType, ids: FixtureIds = {}, now: number = Date.now()): Record<string, unknown> {
  const at = (offsetMs: number) => new Date(now + offsetMs).toISOString();
  const applicationId = ids.applicationId ?? randomUUID();
  const externalId = ids.externalId === undefined ? 'ats-cand-20931' : ids.externalId;
  const application = (status: string) => ({ id: applicationId, external_id: externalId, status, created_at: at(-3 * 86_400_000) });
  // The fields spec 6.4 lists for the candidate block: no id.
  const candidate = {
    first_name: 'Maya',
    last_name: 'Okafor',
    email: 'maya.okafor@example.com',
    phone_number: '+14155550142',
  };
  const job = { id: '8b1d2f0a-6c3e-4e8f-9b7a-5d4c3b2a1f09', title: 'Warehouse Associate (Night Shift)' };
  const payloads: Record<FixtureType, Record<string, unknown>> = {
    'application.created': { application: application('applied'), candidate, job },
    'application.status_changed': { application: application('screened'), candidate, job, previous_status: 'applied' },
    'interview.completed': {
      application: application('screened'),
      candidate,
      job,
      interview: {
        id: 'c2a7e4d1-5b3f-4f6a-8e9d-0a1b2c3d4e5f',
        completed_at: at(-60_000),
        result: {
          overall_score: 4.33,
          is_eligible: true,
          summary: 'Clear communicator with two years of warehouse experience; available for night shifts.',
          strengths: ['Forklift certified', 'Structured answers'],
          weaknesses: ['Little experience with scanners'],
          red_flags: [],
        },
      },
    },
    'cv_evaluation.completed': { application: application('interviewed'), cv_evaluation: { id: 'e1d2c3b4-a5f6-4e7d-8c9b-0a1f2e3d4c5b', overall_score: 3.8 } },
    'insights.completed': { application: application('interviewed'), insights: { overall_score: 4.1, hiring_recommendation: 'yes', is_eligible: true } },
    // Spec 6.4's snapshot: no external_id (the receiver takes it from the application as stored).
    'job_application.deleted': { id: applicationId, status: 'rejected', created_at: at(-3 * 86_400_000), candidate, job },
    'interview_v2.completed': {
      application: application('screened'),
      candidate,
      job,
      interview: { id: '7d6c5b4a-3f2e-4d1c-9b8a-7f6e5d4c3b2a', completed_at: at(-60_000), status: 'completed', overall_score: 3 },
    },
  };
  return {
    id: ids.eventId ?? randomUUID(),
    created_at: at(0),
    webhook_id: ids.webhookId ?? 'a0b1c2d3-e4f5-4a6b-8c7d-9e0f1a2b3c4d',
    event_type: type,
    payload: payloads[type],
  };
}

export function isFixtureType(v: string): v is FixtureType {
  return (FIXTURE_TYPES as readonly string[]).includes(v);
}

/**
 * `--set a.b.c=VALUE`: VALUE is JSON when it parses (numbers, true, null,
 * objects), else a string. Intermediate objects are created.
 */
export function applySet(target: Record<string, unknown>, assignment: string): void {
  const eq = assignment.indexOf('=');
  if (eq <= 0) throw new Error(`--set wants path=value, got ${JSON.stringify(assignment)}`);
  const path = assignment.slice(0, eq).split('.');
  const raw = assignment.slice(eq + 1);
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    value = raw;
  }
  let node: Record<string, unknown> = target;
  for (const key of path.slice(0, -1)) {
    const next = node[key];
    if (typeof next !== 'object' || next === null || Array.isArray(next)) node[key] = {};
    node = node[key] as Record<string, unknown>;
  }
  node[path[path.length - 1]!] = value;
}
