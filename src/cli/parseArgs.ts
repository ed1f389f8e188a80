import { InvalidArgumentError } from 'commander';

/** commander argument parsers: a bad value is a usage error (exit 2) naming what was expected. */
export const intArg =
  (min: number, max: number = Number.MAX_SAFE_INTEGER) =>
  (raw: string): number => {
    if (!/^-?\d+$/.test(raw)) throw new InvalidArgumentError(`expected an integer, got ${JSON.stringify(raw)}`);
    const n = Number(raw);
    if (n < min || n > max) throw new InvalidArgumentError(`expected ${min} to ${max}, got ${n}`);
    return n;
  };

/** Repeatable / variadic option: `--id a --id b` and `--id a b` both collect. */
export const collect = (value: string, previous: string[] | undefined): string[] => [...(previous ?? []), ...value.split(',').filter((v) => v !== '')];

/**
 * Repeatable option whose values are taken whole (`send --set`): a value may hold commas (a JSON
 * array, a sentence), which `collect` would cut into pieces.
 */
export const collectWhole = (value: string, previous: string[] | undefined): string[] => [...(previous ?? []), value];

const RELATIVE = /^(\d+)\s*(s|m|min|h|d|w)$/;
const UNIT_MS: Record<string, number> = { s: 1000, m: 60_000, min: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/**
 * A point in time: ISO 8601 (`2026-11-21`, `2026-11-21T10:00:00Z`; without a zone,
 * UTC) or an age (`30m`, `2h`, `7d`: that long before now). Returns an ISO string,
 * comparable with the database's times as text.
 */
export function parseTime(raw: string, now: number = Date.now()): string {
  const rel = RELATIVE.exec(raw.trim());
  if (rel) {
    const at = now - Number(rel[1]) * UNIT_MS[rel[2]!]!;
    // Past the dates JavaScript holds (about 273,000 years back): named, not "Invalid time value".
    if (!Number.isFinite(new Date(at).getTime())) throw new InvalidArgumentError(`${JSON.stringify(raw)}: an age that long ago is not a date`);
    return new Date(at).toISOString();
  }
  const date = /^(\d{4})-(\d{2})-(\d{2})/.exec(raw);
  if (date) {
    // "YYYY-MM-DD HH:MM" as "YYYY-MM-DDTHH:MM": Date.parse reads the spaced form's years 0-99 as 19xx.
    const text = raw.replace(/^(\d{4}-\d{2}-\d{2}) (?=\d)/, '$1T');
    // A time without a zone is UTC, as every time the receiver stores and prints is (and as a
    // date alone already is): Date.parse would read it in the host's zone (TZ).
    const zoned = /T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?$/i.test(text) ? `${text}Z` : text;
    const ms = Date.parse(zoned);
    // Date.parse rolls an impossible day over (2026-11-31 is 1 December): refused instead.
    const [y, m, d] = [Number(date[1]), Number(date[2]), Number(date[3])];
    const day = new Date(0);
    day.setUTCFullYear(y, m - 1, d); // Date.UTC would take years 0-99 as 1900-1999
    const real = day.getUTCFullYear() === y && day.getUTCMonth() === m - 1 && day.getUTCDate() === d;
    if (Number.isFinite(ms) && real) return new Date(ms).toISOString();
    if (!real) throw new InvalidArgumentError(`${JSON.stringify(raw)}: ${date[0]} is not a date`);
  }
  throw new InvalidArgumentError(`expected an ISO 8601 time (2026-11-21T10:00:00Z) or an age (30m, 2h, 7d), got ${JSON.stringify(raw)}`);
}

export const timeArg = (raw: string): string => parseTime(raw);

/** An age (`30m`, `12h`, `30d`, `2w`) in milliseconds, at least `minMs`. */
export const ageArg =
  (minMs: number, minText: string, maxDays = 3650) =>
  (raw: string): number => {
    const rel = RELATIVE.exec(raw.trim());
    if (!rel) throw new InvalidArgumentError(`expected an age such as 12h, 30d or 2w, got ${JSON.stringify(raw)}`);
    const ms = Number(rel[1]) * UNIT_MS[rel[2]!]!;
    if (ms < minMs) throw new InvalidArgumentError(`expected at least ${minText}, got ${JSON.stringify(raw)}`);
    if (ms > maxDays * 86_400_000) throw new InvalidArgumentError(`expected at most ${maxDays}d, got ${JSON.stringify(raw)}`);
    return ms;
  };

/** Where a stopped `replay` left off: an event's received_at and id (`replay --after`). */
export interface ReplayPosition {
  received_at: string;
  id: string;
}

/**
 * `<received_at>/<event id>`, as a stopped replay prints it: split at the first "/" (an ISO time
 * has none; the id may). The time is read as --since reads an ISO time, into the stored form,
 * so it compares with the stored received_at as text; an age is refused (it names no event).
 */
export function afterArg(raw: string): ReplayPosition {
  const slash = raw.indexOf('/');
  const time = slash < 0 ? raw : raw.slice(0, slash);
  if (slash <= 0 || slash === raw.length - 1 || !/^\d{4}-\d{2}-\d{2}/.test(time)) {
    throw new InvalidArgumentError(`expected <received_at>/<event id>, as a stopped replay prints it (2026-11-20T10:00:00.000Z/evt-1), got ${JSON.stringify(raw)}`);
  }
  return { received_at: parseTime(time), id: raw.slice(slash + 1) };
}
