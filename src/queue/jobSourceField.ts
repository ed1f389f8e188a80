import type { ClaimedJob } from './JobQueue.js';

/**
 * The `source` a job's failure line names: a result read's (or fold's) organization. Its
 * failures are throttled per source, so with several sources a line's count says nothing
 * without it. A sink delivery's source is its kind (`sink:<name>`), and its logger names the
 * sink already: nothing added.
 */
export function jobSourceField(job: ClaimedJob): { source?: string } {
  return job.source !== null && job.source !== job.kind ? { source: job.source } : {};
}
