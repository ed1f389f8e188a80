/**
 * What a failure that would pause a whole source (a redirect: its API URL is wrong) says of the
 * failing read, judged against the source's other reads:
 * - `wait`: the read's first such failure: it alone waits one probe period (the rest of the
 *   source runs on), and its next run says which it is.
 * - `alone`: its second, and a read of the source was answered by a run that started after its
 *   first: this read alone fails so, and ends (a dead letter).
 * - `source`: its second (or later), with nothing of the source answered by a run started since
 *   its first: the source fails as a whole, it is paused.
 * A read's verdict depends on its own first failure only: another read's, `alone` or not, never
 * makes a source-wide one.
 */
export type SourceWideVerdict = 'source' | 'wait' | 'alone';

/**
 * The worker's memory (per process, as the outage streaks) of which runs of a source's jobs went
 * through, numbered in the order they started, and of when each pending read first failed so.
 * A run counts against a read's failure only when it started after that failure was recorded: a
 * read in flight when a whole host starts redirecting was answered by the old host and says
 * nothing of the new one. Bounded: one number per source, and one per read between its first
 * such failure and its next other outcome (forget) or its dead letter.
 */
export class SourceAnswers {
  private runs = 0;
  /** The latest run of each source that went through. */
  private readonly answered = new Map<string, number>();
  /** Per job, the run count when it first failed so (since its last other outcome). */
  private readonly jobFailedAt = new Map<number, number>();

  /** A run starts; its number orders it against the failures recorded. */
  startRun(): number {
    return ++this.runs;
  }

  /** A job of `source` in run `run` went through: the source answers. */
  answer(source: string, run: number): void {
    this.answered.set(source, Math.max(this.answered.get(source) ?? 0, run));
  }

  /** Something of the source went through since the worker started. */
  hasAnswered(source: string): boolean {
    return this.answered.has(source);
  }

  /** The job ended its run in any other way than a source-wide-only failure: its streak ends. */
  forget(jobId: number): void {
    this.jobFailedAt.delete(jobId);
  }

  /** Records a source-wide-only failure of `jobId` and judges it (see SourceWideVerdict). */
  judge(source: string, jobId: number): SourceWideVerdict {
    const first = this.jobFailedAt.get(jobId);
    if (first === undefined) {
      this.jobFailedAt.set(jobId, this.runs);
      return 'wait';
    }
    if ((this.answered.get(source) ?? 0) <= first) return 'source';
    this.jobFailedAt.delete(jobId);
    return 'alone';
  }
}
