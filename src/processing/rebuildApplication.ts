import type { DirectStatements } from '../db/directStatements.js';
import type { ApplicationsTable } from '../db/schema.js';
import { eligibilityVerdict, legacyKnockoutReasons } from '../events/eligibility.js';
import { asObject as obj, asString as str, type JsonRecord as Obj } from '../util/json.js';
import { byEventType } from './resources.js';
const has = (o: Obj | null, k: string): o is Obj => o !== null && Object.prototype.hasOwnProperty.call(o, k);

const STATUS_EVENTS = new Set(['application.created', 'application.status_changed', 'job_application.deleted']);
// Among events with the same created_at: creation first, deletion last.
const RANK = byEventType<number>({ 'application.created': 0, 'job_application.deleted': 2 });

interface SortableEvent {
  id: string;
  event_type: string;
  created_at: string | null;
  received_at: string;
  payload: Obj | null;
}

/**
 * When the event happened, as an ISO 8601 UTC string: its created_at, normalized (an offset such
 * as +02:00 becomes Z, so stored times compare as text), or when it arrived if created_at is
 * missing or not a date (such an event must not sort as 1970).
 */
const timeOf = (e: SortableEvent): string => isoUtc(e.created_at) ?? e.received_at;

/**
 * The order key of an event's time: timeOf with the digits of its created_at's fraction past the
 * milliseconds (…00.123456Z: "456"), padded to nanoseconds. timeOf (what is stored) keeps
 * milliseconds, as every stored time does; cut there, changes microseconds apart were a tie that
 * the ids broke, so the earlier could win. An offset moves whole minutes, not these digits.
 */
const instantOf = (e: SortableEvent): string => {
  const iso = isoUtc(e.created_at);
  const beyondMs = iso === null ? '' : (/\.\d{3}(\d{1,6})/.exec(e.created_at!)?.[1] ?? '');
  return `${(iso ?? e.received_at).slice(0, -1)}${beyondMs.padEnd(6, '0')}Z`;
};

/** RFC 3339 / ISO 8601 shapes only: `Date.parse` alone takes "1" or "Nov 1, 2026", some in local time. */
const DATE_TIME = /^(\d{4}-\d\d-\d\d)(?:[Tt ](\d\d:\d\d(?::\d\d(?:\.\d+)?)?)([Zz]|[+-]\d\d:?\d\d)?)?$/;

/**
 * A date-time the service sent, as ISO 8601 UTC (`+02:00` becomes `Z`); null if it is not one.
 * Without an offset it is UTC here, whatever the machine's time zone (JavaScript would read a
 * date-time without one as local time).
 */
function isoUtc(value: string | null): string | null {
  const m = value === null ? null : DATE_TIME.exec(value.trim());
  if (!m) return null;
  const [, date, time, offset] = m;
  // Date.parse rolls a day the month does not have over (30 February is 2 March): not a date.
  const y = Number(date!.slice(0, 4));
  const mo = Number(date!.slice(5, 7));
  const d = Number(date!.slice(8, 10));
  if (mo < 1 || mo > 12 || d < 1 || d > daysIn(y, mo)) return null;
  const zone = offset === undefined ? 'Z' : offset.length === 5 ? `${offset.slice(0, 3)}:${offset.slice(3)}` : offset.toUpperCase();
  const t = Date.parse(time === undefined ? `${date}T00:00:00Z` : `${date}T${time}${zone}`);
  return Number.isFinite(t) ? new Date(t).toISOString() : null;
}
const daysIn = (year: number, month: number): number =>
  month === 2 ? (year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28) : [4, 6, 9, 11].includes(month) ? 30 : 31;
const toStatus = (e: SortableEvent) => str(obj(e.payload?.application)?.status);
const fromStatus = (e: SortableEvent) => str(e.payload?.previous_status);

/**
 * Sorts an application's events into one total order: created_at, then type
 * rank (creation first, deletion last), then, for status changes at the same
 * instant, their position in the previous_status chain (the change from X
 * comes after the change to X), then id. Every key is computed up front, so
 * the order is the same whatever order the events arrived in.
 */
function sortEvents<T extends SortableEvent>(events: T[]): T[] {
  const depth = new Map<string, number>();
  const sameInstant = new Map<string, T[]>();
  // Each event's instant once: a fold sorts all of the application's events, at every fold.
  const instants = new Map(events.map((e) => [e, instantOf(e)]));
  for (const e of events) {
    if (e.event_type !== 'application.status_changed') continue;
    const instant = instants.get(e)!;
    const group = sameInstant.get(instant) ?? [];
    group.push(e);
    sameInstant.set(instant, group);
  }
  for (const group of sameInstant.values()) {
    // Depth = the longest chain of predecessors (changes to this one's previous_status) in the
    // group, computed over all of them, so arrival order cannot pick a different chain.
    const visiting = new Set<string>();
    const depthOf = (e: T): number => {
      const known = depth.get(e.id);
      if (known !== undefined) return known;
      if (visiting.has(e.id)) return 0; // a cycle (A→B, B→A at one instant): no order to recover
      visiting.add(e.id);
      const prev = fromStatus(e);
      const preds = prev === null ? [] : group.filter((g) => g !== e && toStatus(g) === prev);
      const d = preds.length === 0 ? 0 : 1 + Math.max(...preds.map(depthOf));
      visiting.delete(e.id);
      depth.set(e.id, d);
      return d;
    };
    group.forEach(depthOf);
  }
  // instantOf is normalized ISO UTC of one length, so comparing it as text compares instants.
  const keys = new Map(events.map((e) => [e, [instants.get(e)!, RANK[e.event_type] ?? 1, depth.get(e.id) ?? 0, e.id] as const]));
  return events.sort((a, b) => {
    const ka = keys.get(a)!;
    const kb = keys.get(b)!;
    for (let i = 0; i < ka.length; i++) {
      if (ka[i]! < kb[i]!) return -1;
      if (ka[i]! > kb[i]!) return 1;
    }
    return 0;
  });
}

/** The columns the fold derives from events, plus the review verdict gathered on the way. */
type Folded = Omit<ApplicationsTable, 'id' | 'needs_review' | 'review_reasons' | 'first_seen_at' | 'updated_at'> & {
  reasons: string[];
  ineligible: boolean;
  /** Where an `is_eligible: false` was read, in fold order: the reason given when none names a criterion. */
  saidBy: string[];
};

/** The application's events, linked by processing in application_events (each before its fold). */
const APPLICATION_EVENTS = `SELECT id, event_type, created_at, received_at, source, envelope FROM events
  WHERE id IN (SELECT event_id FROM application_events WHERE application_id = ?)`;

/**
 * The fetched results' verdicts: interview and insights say is_eligible (with reasons); a ready
 * legacy interview's data holds its knockouts. In this order, so the reasons keep it.
 */
const RESULT_VERDICTS = `SELECT * FROM (
    SELECT 1 AS n, is_eligible, ineligibility_reasons, fetched_at, NULL AS state, NULL AS data FROM interview_results WHERE application_id = @id
    UNION ALL SELECT 2, is_eligible, ineligibility_reasons, fetched_at, NULL, NULL FROM insights_results WHERE application_id = @id
    UNION ALL SELECT 3, NULL, NULL, NULL, state, data FROM legacy_interview_results WHERE application_id = @id
  ) ORDER BY n`;

/** The result (RESULT_VERDICTS' n) whose verdict an event's is_eligible is an earlier word of. */
const VERDICT_OF_EVENT = byEventType<{ n: number; label: string }>({
  'interview.completed': { n: 1, label: 'the interview.completed event' },
  'insights.completed': { n: 2, label: 'the insights.completed event' },
});

const FOLDED_COLUMNS = [
  'source', 'external_id', 'status', 'status_changed_at', 'job_id', 'job_title',
  'candidate_first_name', 'candidate_last_name', 'candidate_email', 'candidate_phone',
  'created_at', 'deleted_at', 'needs_review', 'review_reasons', 'updated_at',
] as const satisfies readonly (keyof ApplicationsTable)[];

const UPSERT_APPLICATION = `INSERT INTO applications (id, first_seen_at, ${FOLDED_COLUMNS.join(', ')})
  VALUES (@id, @first_seen_at, ${FOLDED_COLUMNS.map((c) => `@${c}`).join(', ')})
  ON CONFLICT (id) DO UPDATE SET ${FOLDED_COLUMNS.map((c) => `${c} = excluded.${c}`).join(', ')}`;

const INSERT_STATUS_CHANGE = `INSERT INTO application_status_history (event_id, application_id, from_status, to_status, changed_at, recorded_at)
  VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (event_id) DO NOTHING`;

/** What a fold leaves that the deletion messages need: the stored external_id, and the deletions that lack their own. */
export interface Rebuilt {
  externalId: string | null;
  /**
   * The external_id stored before this fold, read only when the application has such deletions
   * (a deletion settled by an earlier version, without a digest, was sent with it): null otherwise.
   */
  externalIdBefore: string | null;
  /** job_application.deleted events of the application whose snapshot has no external_id (spec 6.4). */
  deletionsWithoutExternalId: string[];
}

/**
 * The application row is a pure fold over ALL its events (those processing
 * has linked in application_events; each is linked before its fold), sorted by
 * (created_at, id), plus its fetched results. Arrival order therefore cannot
 * matter: duplicates, retries and out-of-order deliveries all give the same
 * row. The newest event by created_at sets the status; a
 * job_application.deleted marks it deleted for good, whatever arrives later.
 */
export function rebuildApplication(q: DirectStatements, applicationId: string, now: number): Rebuilt | null {
  const events = q.all<Omit<SortableEvent, 'payload'> & { source: string; envelope: string }>(APPLICATION_EVENTS, applicationId);
  if (events.length === 0) return null;
  const parsed = events.map((e) => ({ ...e, payload: obj((JSON.parse(e.envelope) as Obj).payload) }));
  sortEvents(parsed);

  const f: Folded = {
    source: parsed[0]!.source,
    external_id: null, status: null, status_changed_at: null, job_id: null, job_title: null,
    candidate_first_name: null, candidate_last_name: null, candidate_email: null, candidate_phone: null,
    created_at: null, deleted_at: null, reasons: [], ineligible: false, saidBy: [],
  };
  const ineligibleBy = (where: string) => {
    f.ineligible = true;
    if (!f.saidBy.includes(where)) f.saidBy.push(where);
  };
  const history: { event_id: string; from: string | null; to: string | null; at: string | null }[] = [];
  // The newest status another event's application block gives, newer in fold order than every
  // status event seen: the status until an event about a change (status_changed, deleted) states
  // one, as then those decide. So an endpoint subscribed to some types only (spec 6), or a
  // receiver set up after the application's status events were sent, shows one, never null.
  let snapshot: { status: string; at: string } | null = null;
  let changeStated = false;
  // Per result: the is_eligible of the newest event (fold order) that states one (a boolean: spec
  // 2.10; one missing or null is passed over), and when its latest such event arrived.
  // A re-scored interview says is_eligible again: the newest word is the verdict, not every word said.
  const eventVerdicts = new Map<number, { ineligible: boolean; label: string; lastReceivedAt: string }>();

  for (const e of parsed) {
    const payload = e.payload;
    const deleted = e.event_type === 'job_application.deleted';
    // The deleted event's payload IS the application snapshot (spec 6.4).
    const app = deleted ? payload : obj(payload?.application);
    if (has(app, 'external_id')) f.external_id = str(app.external_id);
    // Normalized like every time the receiver writes (the envelope keeps the value as sent).
    if (has(app, 'created_at')) f.created_at = isoUtc(str(app.created_at)) ?? f.created_at;
    // Status comes from the events about status; other events' application block is a snapshot that may lag.
    if (STATUS_EVENTS.has(e.event_type) && has(app, 'status') && str(app.status)) {
      f.status = str(app.status);
      f.status_changed_at = timeOf(e);
      snapshot = null;
      if (e.event_type !== 'application.created') changeStated = true;
    } else if (has(app, 'status') && str(app.status)) {
      snapshot = { status: str(app.status)!, at: timeOf(e) };
    }
    const job = obj(payload?.job);
    if (job) {
      if (has(job, 'id')) f.job_id = str(job.id);
      if (has(job, 'title')) f.job_title = str(job.title);
    }
    const cand = obj(payload?.candidate);
    if (cand) {
      if (has(cand, 'first_name')) f.candidate_first_name = str(cand.first_name);
      if (has(cand, 'last_name')) f.candidate_last_name = str(cand.last_name);
      if (has(cand, 'email')) f.candidate_email = str(cand.email);
      if (has(cand, 'phone_number')) f.candidate_phone = str(cand.phone_number);
    }
    if (deleted && f.deleted_at === null) f.deleted_at = timeOf(e);
    const verdictOf = VERDICT_OF_EVENT[e.event_type];
    const eligible = verdictOf ? eligibilityVerdict(e.event_type, payload)?.is_eligible : undefined;
    if (verdictOf && typeof eligible === 'boolean') {
      const prev = eventVerdicts.get(verdictOf.n);
      const lastReceivedAt = prev && prev.lastReceivedAt > e.received_at ? prev.lastReceivedAt : e.received_at;
      eventVerdicts.set(verdictOf.n, { ineligible: !eligible, label: verdictOf.label, lastReceivedAt });
    }
    if (e.event_type === 'application.status_changed') {
      history.push({ event_id: e.id, from: str(payload?.previous_status) ?? str(app?.previous_status), to: str(app?.status), at: timeOf(e) });
    }
  }

  // No status event stated one, or only an application.created older than the snapshot (an
  // endpoint taking application.created and interview.completed, not status_changed: its status
  // moved on since, and a late-arriving created must not take it back).
  if (snapshot !== null && !changeStated) {
    f.status = snapshot.status;
    f.status_changed_at = snapshot.at;
  }

  // Fetched results may also say is_eligible: false, with the reasons (spec 2.10); a legacy (v1)
  // interview has no is_eligible, and its knockouts are the same verdict. One read of the three.
  // A result read at or after its events arrived is the service's newest word and supersedes
  // theirs; one read before (a newer event's read not done, given up, or unavailable) yields to
  // the newest event's.
  const results = q.all<{ n: number; is_eligible: number | null; ineligibility_reasons: string | null; fetched_at: string | null; state: string | null; data: string | null }>(
    RESULT_VERDICTS,
    { id: applicationId },
  );
  const resultRules = (n: number) => {
    const r = results.find((x) => x.n === n);
    const ev = eventVerdicts.get(n);
    return r !== undefined && r.is_eligible !== null && (ev === undefined || (r.fetched_at !== null && r.fetched_at >= ev.lastReceivedAt));
  };
  for (const [n, v] of [...eventVerdicts].sort(([a], [b]) => a - b)) if (v.ineligible && !resultRules(n)) ineligibleBy(v.label);
  for (const r of results) {
    if (r.is_eligible === 0 && resultRules(r.n)) {
      ineligibleBy(r.n === 1 ? 'the interview result' : 'the insights result');
      for (const reason of r.ineligibility_reasons ? (JSON.parse(r.ineligibility_reasons) as unknown[]) : []) {
        const label = typeof reason === 'string' ? reason : JSON.stringify(reason);
        if (!f.reasons.includes(label)) f.reasons.push(label);
      }
    }
    if (r.state === 'ready' && r.data) {
      for (const reason of legacyKnockoutReasons(JSON.parse(r.data))) {
        f.ineligible = true;
        if (!f.reasons.includes(reason)) f.reasons.push(reason);
      }
    }
  }

  // A verdict that names no criterion (an event's, the insights result's: spec 6.4 gives it no
  // reasons; a result not read) still says why the row needs review: which verdict it was.
  if (f.ineligible && f.reasons.length === 0) for (const where of f.saidBy) f.reasons.push(`is_eligible false in ${where} (no criteria named)`);

  const deletionsWithoutExternalId = parsed.filter((e) => e.event_type === 'job_application.deleted' && !has(e.payload, 'external_id')).map((e) => e.id);
  // Read before the upsert, and only when a deletion may need it: one read per fold cost 2-6% of
  // processing's rate (bench/README.md, twenty-first round).
  const externalIdBefore =
    deletionsWithoutExternalId.length > 0
      ? (q.get<{ external_id: string | null }>('SELECT external_id FROM applications WHERE id = ?', applicationId)?.external_id ?? null)
      : null;
  const nowIso = new Date(now).toISOString();
  const { reasons, ineligible, saidBy: _saidBy, ...columns } = f;
  q.run(UPSERT_APPLICATION, {
    ...columns,
    id: applicationId,
    needs_review: ineligible ? 1 : 0,
    review_reasons: ineligible ? JSON.stringify(reasons) : null,
    first_seen_at: nowIso,
    updated_at: nowIso,
  });
  for (const h of history) q.run(INSERT_STATUS_CHANGE, h.event_id, applicationId, h.from, h.to, h.at, nowIso);
  return { externalId: f.external_id, externalIdBefore, deletionsWithoutExternalId };
}
