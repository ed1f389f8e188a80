import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * Files run one at a time in name order (01-... to 07-...): the latency
 * tests must not share the two cores with a kill loop, and the log-hygiene
 * test reads the logs every earlier file left.
 */
export class NameOrderSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    return [...files].sort((a, b) => a.moduleId.localeCompare(b.moduleId));
  }
}
