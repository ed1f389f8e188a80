import type BetterSqlite3 from 'better-sqlite3';
import type { CliIo } from './io.js';

/**
 * A `--source` that no stored event has is most likely a typo (`Acme` for `acme`): said on stderr
 * with the stored sources, rather than left as a silent "nothing matched". A sink's own job source
 * (`sink:<name>`) is not an event's. Two walks of events (no index on source): only when nothing
 * matched.
 */
export function warnUnknownSource(io: CliIo, sqlite: BetterSqlite3.Database, source: string | undefined): void {
  if (!source || source.startsWith('sink:')) return;
  if (sqlite.prepare('SELECT 1 FROM events WHERE source = ? LIMIT 1').get(source) !== undefined) return;
  const known = sqlite.prepare('SELECT DISTINCT source FROM events ORDER BY source').pluck().all() as string[];
  io.err(`warning: no stored event has source ${JSON.stringify(source)} (stored sources: ${known.join(', ') || 'none'})`);
}
