import type BetterSqlite3 from 'better-sqlite3';
import { SINK_NAMES } from '../sinks/deliveryRecords.js';
import type { CliIo } from './io.js';

/**
 * A `--source` that no stored event has is most likely a typo (`Acme` for `acme`): said on stderr
 * with the stored sources, rather than left as a silent "nothing matched". Two walks of events (no
 * index on source): only when nothing matched. A sink's own job source (`sink:<name>`) is not an
 * event's: one no job and no delivery record names (`sink:crn` for `sink:crm`) is said with the
 * sinks the database knows; to `replay` (`of` 'events'), which selects events, any is said as such.
 */
export function warnUnknownSource(io: CliIo, sqlite: BetterSqlite3.Database, source: string | undefined, of: 'jobs' | 'events' = 'jobs'): void {
  if (!source) return;
  if (source.startsWith('sink:')) {
    const name = source.slice('sink:'.length);
    // `replay` selects events, and no event's source is a sink's.
    if (of === 'events') {
      io.err(`warning: no event has a sink's source such as ${JSON.stringify(source)}: to send events to that sink, choose them otherwise and add --sink ${name}`);
      return;
    }
    // A sink's jobs have its job kind as their source; through jobs_kind_ready (state, kind).
    if (sqlite.prepare("SELECT 1 FROM jobs WHERE state IN ('pending', 'running', 'done', 'dead') AND kind = ? LIMIT 1").get(source) !== undefined) return;
    if (sqlite.prepare('SELECT 1 FROM deliveries WHERE sink = ? LIMIT 1').get(name) !== undefined) return;
    const known = sqlite.prepare(SINK_NAMES).pluck().all() as string[];
    io.err(`warning: no job or delivery record names sink ${JSON.stringify(name)} (sinks known: ${known.join(', ') || 'none'})`);
    return;
  }
  if (sqlite.prepare('SELECT 1 FROM events WHERE source = ? LIMIT 1').get(source) !== undefined) return;
  const known = sqlite.prepare('SELECT DISTINCT source FROM events ORDER BY source').pluck().all() as string[];
  io.err(`warning: no stored event has source ${JSON.stringify(source)} (stored sources: ${known.join(', ') || 'none'})`);
}
