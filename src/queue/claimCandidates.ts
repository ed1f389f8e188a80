import { sql } from 'kysely';

/**
 * One job of each probed source, of the kinds the claim takes that its gate holds: the source's
 * oldest expired lease, else its oldest due job. Each source's two lookups are LIMIT 1 apiece
 * (on jobs_lease and jobs_kind_ready), so a probe costs about one index walk, and only in the one
 * claim a period that has it. `due`: each with the time it is due by (an expired lease's, '',
 * before any), to be taken in turn with the due jobs (`oneEach` in claimCandidates).
 */
function probeArms(probes: readonly string[], now: string, kinds?: readonly string[], gatedKinds?: readonly string[], due = false) {
  if (probes.length === 0) return [];
  const probed = kinds && gatedKinds ? kinds.filter((k) => gatedKinds.includes(k)) : (kinds ?? gatedKinds);
  if (probed?.length === 0) return [];
  const ofKinds = probed ? sql`AND kind IN (${sql.join(probed)})` : sql``;
  const cols = due ? sql`id, due` : sql`id`;
  return probes.map(
    (source) => sql`SELECT ${cols} FROM (SELECT ${due ? sql`id, '' AS due` : sql`id`} FROM (SELECT id FROM jobs WHERE state = 'running' AND lease_expires_at <= ${now} AND source = ${source} ${ofKinds} ORDER BY lease_expires_at LIMIT 1)
      UNION ALL SELECT ${due ? sql`id, run_at AS due` : sql`id`} FROM (SELECT id, run_at FROM jobs WHERE state = 'pending' AND run_at <= ${now} AND source = ${source} ${ofKinds} ORDER BY run_at, id LIMIT 1) LIMIT 1)`,
  );
}

/**
 * What a claim (JobQueue.claim) may take, in the order it takes it: the probes' jobs, the
 * expired leases, then each kind's due jobs, none of a held source (`blockedSources`, `probes`
 * and `oneEach`, for the kinds in `gatedKinds`, or all when absent) but the probes' own and one
 * of each `oneEach` source, which takes its turn among the due jobs by run_at (not first, as a
 * probe: a failing source's read, hanging up to its timeout, then went before every other
 * source's reads queued earlier whenever one slot was free).
 */
export function claimCandidates(
  now: string,
  limit: number,
  blockedSources: readonly string[],
  probes: readonly string[],
  kinds?: readonly string[],
  gatedKinds?: readonly string[],
  oneEach: readonly string[] = [],
) {
  const held = probes.length > 0 || oneEach.length > 0 ? [...blockedSources, ...probes, ...oneEach] : blockedSources;
  const notBlocked = held.length > 0 ? sql`AND (source IS NULL OR source NOT IN (${sql.join(held)}))` : sql``;
  const gate = (kind: string | null) => (kind === null || !gatedKinds || gatedKinds.includes(kind) ? notBlocked : sql``);
  const due = (kind: string | null) =>
    sql`SELECT id FROM (SELECT id FROM jobs WHERE state = 'pending' ${kind === null ? sql`` : sql`AND kind = ${kind}`}
        AND run_at <= ${now} ${gate(kind)} ORDER BY run_at, id LIMIT ${limit})`;
  // With `oneEach`: each kind's due jobs, kind after kind as above, with the one job of each such
  // source put in its place by run_at (a sort of at most limit + oneEach.length rows a kind).
  // (Each kind's arm its own: a worker with two gated kinds, none so far, would run one job of each.)
  const dueWith = (kind: string | null) => {
    const arms = probeArms(oneEach, now, kind === null ? kinds : [kind], gatedKinds, true);
    if (arms.length === 0) return due(kind);
    const ofKind = kind === null ? sql`` : sql`AND kind = ${kind}`;
    return sql`SELECT id FROM (SELECT id, due FROM (SELECT id, run_at AS due FROM jobs WHERE state = 'pending' ${ofKind} AND run_at <= ${now} ${gate(kind)} ORDER BY run_at, id LIMIT ${limit})
        UNION ALL ${sql.join(arms, sql` UNION ALL `)} ORDER BY due, id LIMIT ${limit})`;
  };
  // A job whose lease expired: its worker died or hangs, or its outcome could not be recorded.
  // Not one of a paused or throttled source. (One that was on its last attempt is dead-lettered
  // by the worker that claims it, without running: JobRunner.runGroup.)
  const expiredGate =
    held.length === 0 ? sql`` : gatedKinds ? sql`AND (kind NOT IN (${sql.join(gatedKinds.length > 0 ? gatedKinds : [''])}) OR source IS NULL OR source NOT IN (${sql.join(held)}))` : notBlocked;
  const expired = sql`SELECT id FROM (SELECT id FROM jobs WHERE state = 'running' AND lease_expires_at <= ${now}
      ${kinds ? sql`AND kind IN (${sql.join(kinds)})` : sql``} ${expiredGate} ORDER BY lease_expires_at LIMIT ${limit})`;
  // The expired first: few, and behind a kind's due backlog (the outer LIMIT takes rows in this
  // order) they would wait until it drains. Probes before them: their period is spent already.
  return sql.join([...probeArms(probes, now, kinds, gatedKinds), expired, ...(kinds ?? [null]).map(dueWith)], sql` UNION ALL `);
}
