/**
 * Every job kind the queue runs. PROCESS_EVENT folds an event whose fold from the processing
 * cursor failed, or one `replay` queued again; new events need no job (migration 006).
 */
export const JobKind = {
  processEvent: 'process_event',
  fetchResult: 'fetch_result',
} as const;
export type JobKind = (typeof JobKind)[keyof typeof JobKind];

/** Default attempts before a job is dead-lettered (with backoff capped, this spans days). */
export const DEFAULT_MAX_ATTEMPTS = 25;
