/**
 * Work that is not in the jobs table (new events past the processing cursor): the worker runs
 * it beside its jobs, paced and stopped with them. `run` does up to `limit` units in one go and
 * says how many it did (0: nothing to do); it should look with a read before it writes.
 */
export interface WorkSource {
  run(limit: number): Promise<number>;
}
