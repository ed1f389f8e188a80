import { z } from 'zod';
import { DATABASE_SIDECARS } from '../db/databaseFiles.js';
import { identityOf } from '../db/fileIdentity.js';
import type { FileIdentity } from '../db/openDatabase.js';
import { SINK_KINDS, sinkKindOf, type SinkType } from './registry.js';
import { resolveSecretRef } from '../config/secretRef.js';
import { CONFIG_NAME, CONFIG_NAME_RULE, CONFIG_PARSE, configIssues } from '../config/parseOptions.js';
import { realPathOf } from '../util/realPath.js';

/** One configured sink, resolved (secrets read from the environment, defaults applied). */
export interface SinkConfig {
  readonly name: string;
  readonly type: SinkType;
  /** Exact event types and `prefix.*` patterns; null: every event. */
  readonly events: readonly string[] | null;
  /** Sources whose events it receives; null: every source. */
  readonly sources: readonly string[] | null;
  readonly concurrency: number;
  readonly maxAttempts: number;
  /** What a 410 disabled (SinkKind.target: no secret in it); a different target at start re-enables the sink. */
  readonly target: string;
  /** The kind's own options, as its `resolve` produced them. */
  readonly options: unknown;
}

// Lowercase only: the service's event types are (spec 6.4), and matching is exact.
const EVENT_PATTERN = /^(\*|[a-z0-9_]+(\.[a-z0-9_]+)*(\.\*)?)$/;
/** Default attempts of a delivery before it is dead-lettered (9.5-19 h, about 14 h on average, with the default backoff). */
export const DEFAULT_SINK_MAX_ATTEMPTS = 25;

const common = {
  name: z
    .string()
    .regex(CONFIG_NAME, CONFIG_NAME_RULE)
    .refine((n) => n !== 'all', '"all" is reserved: `replay --sink all` means every sink'),
  events: z.array(z.string().regex(EVENT_PATTERN, 'must be an event type or "prefix.*", in lowercase as the service sends them')).min(1, 'must not be empty; omit it to receive every event').optional(),
  sources: z.array(z.string().min(1)).min(1, 'must not be empty; omit it to receive every source').optional(),
  concurrency: z.number().int().min(1).max(1024).optional(),
  max_attempts: z.number().int().min(1).max(1000).optional(),
};

const TYPES = Object.keys(SINK_KINDS) as SinkType[];
const variants = TYPES.map((type) => z.object({ ...common, ...sinkKindOf(type).fields, type: z.literal(type) }).strict());

/** One entry of the `sinks` key of CONFIG_FILE. */
const sinkEntrySchema = z.discriminatedUnion('type', variants as unknown as [z.ZodObject, ...z.ZodObject[]], {
  error: (iss) =>
    iss.code === 'invalid_union' ? `unknown sink type ${JSON.stringify((iss.input as { type?: unknown } | undefined)?.type ?? null)}; known types: ${TYPES.join(', ')}` : undefined,
});

type RawSink = { name: string; type: SinkType; events?: string[]; sources?: string[]; concurrency?: number; max_attempts?: number } & Record<string, unknown>;

/**
 * Parses and resolves the `sinks` key of CONFIG_FILE into SinkConfigs, entry by entry, so one
 * run reports the problems of every entry (a misspelt key of one sink no longer hides another's
 * bad URL until the next start; within an entry that fails its schema, the rest of that entry's
 * checks wait for the fix). Each problem is pushed to `problems`, naming its path
 * (`CONFIG_FILE sinks.1.secret: ...`). Entries that failed their schema or their kind's checks
 * are left out; callers must refuse the configuration whenever `problems` is not empty.
 */
/** A well-formed secret that signs nothing anyone verifies: see `unsetSecretsAllowed`. */
const UNSET_SECRET_PLACEHOLDER = `whsec_${Buffer.alloc(24).toString('base64')}`;

export function resolveSinks(
  raw: unknown,
  opts: {
    env: Record<string, string | undefined>;
    knownSources: readonly string[];
    problems: string[];
    databasePath?: string;
    /**
     * For operator commands, which never send: a secret named by an environment variable the
     * command's shell lacks stands in as a placeholder instead of a problem (the sink is still
     * configured). Such sinks must not be used to send.
     */
    unsetSecretsAllowed?: boolean;
  },
): SinkConfig[] {
  const problem = (m: string) => opts.problems.push(m);
  // A file sink's lines must not land in the database or its files (they would corrupt it), nor
  // in another file sink's file (both would write every line, interleaved). Compared by real path
  // (a folder reached through a link names the same file) and, for a file that exists, by device
  // and inode too: a hard link, or `Events.ndjson` for `events.ndjson` on macOS's
  // case-insensitive APFS, is the same file under another name.
  const reserved = new Set(
    opts.databasePath && opts.databasePath !== ':memory:'
      ? ['', ...DATABASE_SIDECARS].flatMap((suffix) => namesOfFile(`${opts.databasePath}${suffix}`))
      : [],
  );
  const files = new Map<string, string>();
  if (raw === undefined) return [];
  if (!Array.isArray(raw)) {
    problem('CONFIG_FILE sinks: must be an array of sinks');
    return [];
  }
  const out: SinkConfig[] = [];
  const names = new Set<string>();
  const claimName = (name: string, at: string) => {
    if (names.has(name)) problem(`${at}.name: sink name ${JSON.stringify(name)} is used twice`);
    names.add(name);
  };
  raw.forEach((entry, i) => {
    const at = `CONFIG_FILE sinks.${i}`;
    const parsed = sinkEntrySchema.safeParse(entry, CONFIG_PARSE);
    if (!parsed.success) {
      for (const issue of configIssues(parsed.error.issues, [], { schema: sinkEntrySchema, input: entry })) problem(`${[at, ...issue.path].join('.')}: ${issue.message}`);
      // Its name still counts, so a second sink of that name is reported in this run too.
      const name = (entry as { name?: unknown } | null)?.name;
      if (typeof name === 'string') claimName(name, at);
      return;
    }
    const s = parsed.data as RawSink;
    claimName(s.name, at);
    (s.sources ?? []).forEach((src, j) => {
      if (!opts.knownSources.includes(src)) problem(`${at}.sources.${j}: no source named ${JSON.stringify(src)} is configured`);
    });
    const kind = sinkKindOf(s.type);
    const options = kind.resolve(s, {
      at,
      problem,
      secret: (where, ref) =>
        opts.unsetSecretsAllowed && typeof ref !== 'string' && !opts.env[ref.env] ? UNSET_SECRET_PLACEHOLDER : resolveSecretRef(where, ref, opts.env, problem),
    });
    if (options === null) return;
    if (s.type === 'file') {
      const keys = namesOfFile((options as { path: string }).path);
      const other = keys.map((k) => files.get(k)).find((n) => n !== undefined);
      if (keys.some((k) => reserved.has(k))) problem(`${at}.path: is the receiver's database or one of its files (DATABASE_PATH)`);
      else if (other !== undefined) problem(`${at}.path: sink ${JSON.stringify(other)} already writes to this file`);
      else for (const k of keys) files.set(k, s.name);
    }
    out.push(
      Object.freeze({
        name: s.name,
        type: s.type,
        events: s.events ? Object.freeze([...s.events]) : null,
        sources: s.sources ? Object.freeze([...s.sources]) : null,
        concurrency: s.concurrency ?? kind.defaultConcurrency,
        maxAttempts: s.max_attempts ?? DEFAULT_SINK_MAX_ATTEMPTS,
        target: kind.target(options),
        options: Object.freeze(options),
      }),
    );
  });
  return out;
}

/**
 * What names one file, for resolveSinks' comparisons: its real path, and its device and inode
 * when it exists (a stat that fails for another reason leaves the real path alone: the sink's
 * own open says what is wrong).
 */
function namesOfFile(path: string): string[] {
  let id: FileIdentity | null = null;
  try {
    id = identityOf(path);
  } catch {
    // EACCES and the like: compared by real path only.
  }
  return id ? [realPathOf(path), `file ${id.dev}:${id.ino}`] : [realPathOf(path)];
}
