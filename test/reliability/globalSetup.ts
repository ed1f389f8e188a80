import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';

/** One folder per suite run, where every file leaves its logs and figures for the log-hygiene test. */
export default function setup(project: TestProject) {
  const dir = mkdtempSync(join(tmpdir(), 'reliability-run-'));
  mkdirSync(join(dir, 'logs'));
  mkdirSync(join(dir, 'figures'));
  project.provide('reliabilityRunDir', dir);
  process.stdout.write(`reliability suite: logs and figures in ${dir}\n`);
}
