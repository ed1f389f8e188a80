/**
 * What a failure that would pause a whole source (a redirect: its API URL is wrong) says when the
 * failing read is judged against the source's other reads:
 * - `source`: nothing of the source was answered since the worker started, or since its previous
 *   such failure: the source fails as a whole, it is paused.
 * - `wait`: the first such failure right after reads of the source were answered: the read alone
 *   waits one probe period (the rest of the source runs on), and its next run says which it is.
 * - `alone`: another read of the source, sent after this read first failed so, was answered: this
 *   read alone fails so, and ends (a dead letter).
 */
export type SourceWideVerdict = 'source' | 'wait' | 'alone';

/**
 * The worker's memory (per process, as the outage streaks) of which runs of a source's jobs went
 * through, numbered in the order they started. A run counts against a read's failure only when it
 * started after that failure was recorded: a read in flight when a whole host starts redirecting
 * was answered by the old host and says nothing of the new one.
 */
export class SourceAnswers {
  private runs = 0;
  /** The latest run of each source that went through. */
  private readonly answered = new Map<string, number>();
  /** Per source, the run count when its latest source-wide-only failure was recorded. */
  private readonly sourceFailedAt = new Map<string, number>();
  /** Per job, the run count when it first failed so in its current streak of such failures. */
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
    const answered = this.answered.get(source);
    const jobFirst = this.jobFailedAt.get(jobId);
    const sourceLast = this.sourceFailedAt.get(source);
    this.sourceFailedAt.set(source, this.runs);
    if (jobFirst === undefined) this.jobFailedAt.set(jobId, this.runs);
    if (jobFirst !== undefined && answered !== undefined && answered > jobFirst) {
      this.jobFailedAt.delete(jobId);
      return 'alone';
    }
    if (answered === undefined || (sourceLast !== undefined && answered <= sourceLast)) return 'source';
    return 'wait';
  }
}
