/** Every job kind the queue runs. The ingest transaction enqueues PROCESS_EVENT for each new event. */
export const JobKind = {
  processEvent: 'process_event',
  fetchResult: 'fetch_result',
} as const;
export type JobKind = (typeof JobKind)[keyof typeof JobKind];

/** Default attempts before a job is dead-lettered (with backoff capped, this spans days). */
export const DEFAULT_MAX_ATTEMPTS = 25;
