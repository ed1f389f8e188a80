import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, type Config } from '../../src/config/loadConfig.js';
import { SETTINGS } from '../../src/config/misspeltSettings.js';
import { PRUNE_PER_SWEEP } from '../../src/processing/WorkerSweeps.js';
import { PRUNE_BATCH } from '../../src/queue/pruneJobs.js';
import { ROOT } from '../helpers/childServer.js';
import { newSecret } from '../helpers/signing.js';

/**
 * README's "Configuration" table is what operators set the receiver by: each of its variables
 * must be one the code reads, each one the code reads must be in it, and its defaults and ranges
 * must be the code's.
 */

interface Row {
  readonly names: readonly string[];
  readonly meaning: string;
  readonly fallback: string;
}

/** The rows of the table under "## Configuration" (`| variable | meaning | default |`). */
function configTable(): Row[] {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('\n## Configuration\n'), readme.indexOf('\n## Receiving webhooks'));
  const lines = section.split('\n');
  const head = lines.findIndex((l) => l.startsWith('| variable | meaning | default |'));
  const rows: Row[] = [];
  for (const line of lines.slice(head + 2)) {
    if (!line.startsWith('|')) break;
    // Cells split on the pipes that are not escaped (`\|` inside a cell).
    const cells = line.slice(1, -1).split(/(?<!\\)\|/).map((c) => c.trim());
    expect(cells, line.slice(0, 80)).toHaveLength(3);
    const names = [...cells[0]!.matchAll(/`([A-Z][A-Z0-9_]*)`/g)].map((m) => m[1]!);
    rows.push({ names, meaning: cells[1]!, fallback: cells[2]! });
  }
  return rows;
}

/** The proxy variables, read by src/http/outboundProxy.ts (not settings of SETTINGS: Node.js and curl read them too). */
const PROXY_VARIABLES = ['HTTPS_PROXY', 'HTTP_PROXY', 'NO_PROXY'];

const walk = (dir: string): string[] =>
  readdirSync(dir).flatMap((f) => {
    const p = join(dir, f);
    return statSync(p).isDirectory() ? walk(p) : p.endsWith('.ts') ? [p] : [];
  });

/** The environment variables the sources read by name: `env.X`, `env['X']`, and the names handed to a reader (`intVar(env, 'X'`, `pick(env, 'X'`, `value('X'`). */
function variablesReadBySrc(): Set<string> {
  const names = new Set<string>();
  for (const file of walk(join(ROOT, 'src'))) {
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(/\benv\.([A-Za-z_][A-Za-z0-9_]*)|\benv\[['"]([A-Za-z_][A-Za-z0-9_]*)['"]\]|\b(?:intVar|pick)\(env, '([A-Z_][A-Z0-9_]*)'|\bvalue\('([A-Z_][A-Z0-9_]*)'\)/g)) {
      const name = (m[1] ?? m[2] ?? m[3] ?? m[4])!;
      // Upper-case names only: `env.outgoing` and the like are other objects' fields.
      if (/^[A-Z][A-Z0-9_]+$/.test(name)) names.add(name);
    }
  }
  return names;
}

/**
 * Variables the sources read that are not the receiver's settings, each with the document that
 * describes it: the sandbox's own, the CLI's progress spacing, and the system's.
 */
const NOT_SETTINGS: Record<string, string | null> = {
  SANDBOX_PORT: 'docs/sandbox.md',
  SANDBOX_HOST: 'docs/sandbox.md',
  SANDBOX_TIME_FACTOR: 'docs/sandbox.md',
  SANDBOX_MANUAL_CLOCK: 'docs/sandbox.md',
  CLI_PROGRESS_INTERVAL_MS: 'README.md',
  SQLITE_TMPDIR: 'README.md',
  TMPDIR: 'README.md',
  HOME: null, // where `~` would lead, to say so in the refusal of a DATABASE_PATH starting with it
};

const BASE_ENV = { WEBHOOK_SECRET: newSecret(), HIRING_API_URL: 'https://hiring.example.com', HIRING_API_KEY: 'sk-abc.def' };

const problemsOf = (env: Record<string, string>): string[] => {
  try {
    loadConfig({ ...BASE_ENV, ...env });
    return [];
  } catch (err) {
    if (err instanceof ConfigError) return [...err.problems];
    throw err;
  }
};

/** Each integer setting's value in the unit README states it in. */
const INTEGER_SETTINGS: Record<string, (c: Config) => number> = {
  PORT: (c) => c.port,
  MAX_BODY_BYTES: (c) => c.maxBodyBytes,
  MAX_BODY_BYTES_IN_FLIGHT: (c) => c.maxBodyBytesInFlight,
  WRITE_TIMEOUT_MS: (c) => c.writeTimeoutMs,
  REQUEST_TIMEOUT_MS: (c) => c.requestTimeoutMs,
  SHUTDOWN_GRACE_MS: (c) => c.shutdownGraceMs,
  WORKER_CONCURRENCY: (c) => c.workerConcurrency,
  PROCESSING_SHARE: (c) => c.processingShare,
  JOB_RETENTION_DAYS: (c) => c.jobRetentionMs / 86_400_000,
  RESULT_GIVE_UP_HOURS: (c) => c.resultGiveUpMs / 3_600_000,
};

describe("README's configuration table", () => {
  const rows = configTable();
  const documented = rows.flatMap((r) => r.names);
  const rowOf = (name: string): Row => rows.find((r) => r.names.includes(name))!;

  it('lists each variable the receiver reads, once, and no other', () => {
    expect(rows.length).toBeGreaterThan(15);
    expect(new Set(documented).size, 'a variable in two rows').toBe(documented.length);
    expect([...documented].sort()).toEqual([...SETTINGS, ...PROXY_VARIABLES].sort());
  });

  it('every variable the sources read is in it, or is not a setting and is described where its reader is', () => {
    const read = variablesReadBySrc();
    for (const name of [...SETTINGS, ...PROXY_VARIABLES]) expect(read, `${name}: documented, but no source reads it`).toContain(name);
    for (const name of read) {
      if (documented.includes(name)) continue;
      expect(Object.keys(NOT_SETTINGS), `${name}: read by src/, but not in README's configuration table`).toContain(name);
      const doc = NOT_SETTINGS[name];
      if (doc) expect(readFileSync(join(ROOT, doc), 'utf8'), `${name} in ${doc}`).toContain(`\`${name}\``);
    }
  });

  it("states the code's defaults", () => {
    const config = loadConfig(BASE_ENV);
    for (const [name, value] of Object.entries(INTEGER_SETTINGS)) {
      const row = rowOf(name);
      // The default of a row's n-th variable is its n-th backticked value (`PORT`, `HOST`: `8080`, `0.0.0.0`).
      const stated = [...row.fallback.matchAll(/`([^`]+)`/g)].map((m) => m[1]!)[row.names.indexOf(name)];
      expect(stated, `${name}'s default`).toBe(String(value(config)));
    }
    const strings: Record<string, string> = { HOST: config.host, DATABASE_PATH: config.databasePath, LOG_LEVEL: config.logLevel };
    for (const [name, value] of Object.entries(strings)) {
      const row = rowOf(name);
      expect([...row.fallback.matchAll(/`([^`]+)`/g)].map((m) => m[1]!)[row.names.indexOf(name)], `${name}'s default`).toBe(value);
    }
    // The proxies: unset, no proxy at all.
    expect(config.outboundProxy).toBeNull();
    expect(rowOf('HTTPS_PROXY').fallback).toMatch(/^unset: direct connections/);
  });

  it("states the code's ranges: its bounds are taken, one past them refused naming the variable", () => {
    let checked = 0;
    for (const name of Object.keys(INTEGER_SETTINGS)) {
      const { meaning } = rowOf(name);
      const range = [...meaning.matchAll(/(?<![\w.])(\d+)(?: to |-)(\d+)(?!\w|\.\d)/g)].filter((m) => name !== 'PORT' || m[0] === '0-65535');
      const atMost = /\bat most (\d+)\b/.exec(meaning);
      expect(range.length <= 1, `${name}: one range in "${meaning.slice(0, 60)}…"`).toBe(true);
      const [min, max] = range.length === 1 ? [Number(range[0]![1]), Number(range[0]![2])] : [undefined, atMost ? Number(atMost[1]) : undefined];
      expect(max, `${name}: README states its bound`).toBeDefined();
      // MAX_BODY_BYTES_IN_FLIGHT must also hold one MAX_BODY_BYTES; at its top, so must the body limit.
      const with_ = (v: number): Record<string, string> => (name === 'MAX_BODY_BYTES' ? { [name]: String(v), MAX_BODY_BYTES_IN_FLIGHT: String(2 ** 34) } : { [name]: String(v) });
      expect(problemsOf(with_(max!)), `${name}=${max}`).toEqual([]);
      expect(problemsOf(with_(max! + 1)).some((p) => p.startsWith(`${name}: `)), `${name}=${max! + 1} refused`).toBe(true);
      if (min !== undefined) {
        expect(problemsOf(with_(min)), `${name}=${min}`).toEqual([]);
        if (min > 0) expect(problemsOf(with_(min - 1)).some((p) => p.startsWith(`${name}: `)), `${name}=${min - 1} refused`).toBe(true);
      }
      checked++;
    }
    expect(checked).toBe(Object.keys(INTEGER_SETTINGS).length);
  });

  it('JOB_RETENTION_DAYS: says how many finished jobs the workers delete each time, here and under "What grows"', () => {
    // It said "a few thousand" while the workers delete up to PRUNE_PER_SWEEP (10,000) each time.
    const figure = PRUNE_PER_SWEEP.toLocaleString('en-US');
    expect(rowOf('JOB_RETENTION_DAYS').meaning).toContain(`up to ${figure} at its start and every 5 minutes`);
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8').replace(/\s+/g, ' ');
    const grows = readme.slice(readme.indexOf('**What grows, and what the receiver deletes.**'), readme.indexOf('**Personal data and erasure.**'));
    expect(grows).toContain(`up to ${figure} at their start and every 5 minutes, ${PRUNE_BATCH} per transaction`);
  });
});
