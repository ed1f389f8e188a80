import { appendFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, inject } from 'vitest';
import { tempDir } from '../../helpers/receiver.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Folder shared by every file of one suite run: logs, secrets used, figures. */
    reliabilityRunDir: string;
  }
}

/** The run folder made by globalSetup (or a private one when a file runs outside the suite's config). */
export function runDir(): string {
  let dir: string | undefined;
  try {
    dir = inject('reliabilityRunDir');
  } catch {
    dir = undefined;
  }
  const d = dir ?? join(tmpdir(), `reliability-standalone-${process.pid}`);
  mkdirSync(join(d, 'logs'), { recursive: true });
  mkdirSync(join(d, 'figures'), { recursive: true });
  return d;
}

export const logPath = (name: string) => join(runDir(), 'logs', `${name}.log`);

/** Values that must never appear in any log of the suite (checked by the log-hygiene test). */
export function registerSensitive(kind: 'secret' | 'key' | 'api_key' | 'email' | 'phone' | 'signature', ...values: string[]): void {
  const lines = values.filter((v) => v.length > 0).map((v) => `${JSON.stringify({ kind, value: v })}\n`);
  if (lines.length > 0) appendFileSync(join(runDir(), 'sensitive.ndjson'), lines.join(''));
}

/** A whsec_ secret and its base64 key, both registered as sensitive. */
export function registerSecret(secret: string): void {
  registerSensitive('secret', secret);
  registerSensitive('key', secret.slice('whsec_'.length));
}

/** Saves in-process log lines (LogCapture.raw) for the log-hygiene test. */
export function saveLogLines(name: string, lines: readonly string[]): void {
  appendFileSync(logPath(name), lines.map((l) => `${l}\n`).join(''));
}

/** One-line JSON summary of a test: printed and kept for the run's summary. */
export function reportFigures(test: string, figures: Record<string, unknown>): void {
  const line = JSON.stringify({ test, ...figures });
  console.log(line);
  writeFileSync(join(runDir(), 'figures', `${test}.json`), `${line}\n`);
}

/** Seeded PRNG (mulberry32), so a failing run can be replayed with RELIABILITY_SEED. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function suiteSeed(): number {
  const env = process.env.RELIABILITY_SEED;
  return env && /^\d+$/.test(env) ? Number(env) : Math.floor(Math.random() * 2 ** 31);
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

export function shuffle<T>(items: T[], random: () => number): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [items[i], items[j]] = [items[j]!, items[i]!];
  }
  return items;
}

/**
 * A test file's scratch folder and its clean-ups: each pushed clean-up runs
 * after the file's tests, last pushed first, then the folder is removed.
 */
export function workspace(prefix: string): { dir: string; cleanups: (() => Promise<unknown> | void)[] } {
  const { dir, cleanup } = tempDir(prefix);
  const cleanups: (() => Promise<unknown> | void)[] = [];
  afterAll(async () => {
    for (const c of cleanups.reverse()) await c();
    cleanup();
  });
  return { dir, cleanups };
}
