import { z } from 'zod';
import { resolveSinks, type SinkConfig } from '../sinks/sinkConfig.js';
import { jsonErrorAt } from '../util/jsonErrorAt.js';
import { tildeProblem } from '../util/tildeProblem.js';
import { databasePathIn } from './databasePath.js';
import type { SourceConfig } from './loadConfig.js';
import { CONFIG_NAME, CONFIG_NAME_RULE, CONFIG_PARSE, configIssues, type ParsedFrom } from './parseOptions.js';
import { splitSecrets } from './parseSecret.js';
import { resolveSecretRef, secretRef, type SecretRef } from './secretRef.js';
import { checkApiKey, checkUrl, decodeSecrets, type Env } from './valueChecks.js';

/** One entry of CONFIG_FILE `sources`, parsed on its own (loadApiSources reads it without its `secrets`). */
export const fileSourceSchema = z
  .object({
    name: z.string().regex(CONFIG_NAME, CONFIG_NAME_RULE),
    secrets: z.union([secretRef, z.array(secretRef).min(1)], {
      error: (iss) => (iss.input === undefined ? undefined : 'must be a whsec_ secret, a list of them, or { "env": "NAME" } to read them from an environment variable'),
    }),
    api_url: secretRef,
    api_key: secretRef,
  })
  .strict();

/** The top level only: each source and each sink is parsed on its own, so one run names every problem. */
const fileSchema = z
  .object({
    sources: z.array(z.unknown()).optional(),
    sinks: z.unknown().optional(),
  })
  .strict();

/** What the server would say of CONFIG_FILE's top level (an unknown key such as "sink", not an object): for the CLI's lenient read. */
export function configFileTopProblems(json: unknown): string[] {
  const problems: string[] = [];
  const parsed = fileSchema.safeParse(json, CONFIG_PARSE);
  if (!parsed.success) reportIssues(parsed.error.issues, { schema: fileSchema, input: json }, problems);
  return problems;
}

/** zod's issues as `CONFIG_FILE <path>: <message>` problems, the path under `prefix`; `from`: what was parsed, for unknown keys' hints. */
export function reportIssues(issues: readonly z.core.$ZodIssue[], from: ParsedFrom, problems: string[], prefix: PropertyKey[] = []): void {
  for (const issue of configIssues(issues, prefix, from)) {
    const path = issue.path.map(String);
    problems.push(`CONFIG_FILE ${path.length > 0 ? path.join('.') : '(top level)'}: ${issue.message}`);
  }
}

/** CONFIG_FILE's JSON, or undefined after reporting why it cannot be had (never quoting its text). */
export function readConfigJson(path: string, readFile: (p: string) => string, problems: string[]): unknown {
  let text: string;
  try {
    // Without the byte order mark Windows editors (Notepad, PowerShell 5's Out-File) put first:
    // JSON.parse refuses it, and "not valid JSON (at line 1, column 1)" hides why.
    text = readFile(path).replace(/^\uFEFF/, '');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'error';
    const tilde = code === 'ENOENT' ? tildeProblem(path) : null;
    problems.push(`CONFIG_FILE: cannot read ${JSON.stringify(path)} (${code})${tilde ? `: it ${tilde}` : ''}`);
    return undefined;
  }
  try {
    return JSON.parse(text);
  } catch {
    // Only the position: V8's message quotes the text around the error, which may be a secret.
    problems.push(`CONFIG_FILE: ${path} is not valid JSON (at ${jsonErrorAt(text) ?? 'its start'})`);
    return undefined;
  }
}

/** Reads CONFIG_FILE's sources and sinks into `out` and `sinksOut`; returns the parsed file (undefined when unreadable). */
export function loadFileSources(
  path: string,
  env: Env,
  readFile: (p: string) => string,
  out: SourceConfig[],
  problems: string[],
  sinksOut: SinkConfig[],
): unknown {
  const json = readConfigJson(path, readFile, problems);
  if (json === undefined) return json;
  const parsed = fileSchema.safeParse(json, CONFIG_PARSE);
  // A bad top level (an unknown key, `sources` not a list) is reported, and the entries are still checked.
  if (!parsed.success) reportIssues(parsed.error.issues, { schema: fileSchema, input: json }, problems);
  if (json === null || typeof json !== 'object' || Array.isArray(json)) return json;
  const top = json as { sources?: unknown; sinks?: unknown };
  const resolve = (where: string, ref: SecretRef) => resolveSecretRef(where, ref, env, (m) => problems.push(m));
  (Array.isArray(top.sources) ? top.sources : []).forEach((entry: unknown, i) => {
    const one = fileSourceSchema.safeParse(entry, CONFIG_PARSE);
    if (!one.success) {
      // Still a source by that name, for the sinks' `sources` checks; its problems are reported.
      reportIssues(one.error.issues, { schema: fileSourceSchema, input: entry }, problems, ['sources', i]);
      const name = (entry as { name?: unknown } | null)?.name;
      if (typeof name === 'string') out.push({ name, signingKeys: [], apiUrl: null, apiKey: null });
      return;
    }
    const src = one.data;
    const at = `CONFIG_FILE sources.${i}`;
    const refs = Array.isArray(src.secrets) ? src.secrets : [src.secrets];
    const resolved = refs.map((r, j) => resolve(`${at}.secrets${Array.isArray(src.secrets) ? `.${j}` : ''}`, r));
    // A variable not set is said once, above, not again as "is empty".
    const values = resolved.flatMap((v) => (v === null ? [] : splitSecrets(v)));
    const signingKeys = resolved.includes(null) && values.length === 0 ? [] : decodeSecrets(`${at}.secrets`, values, problems);
    const urlRaw = resolve(`${at}.api_url`, src.api_url);
    const keyRaw = resolve(`${at}.api_key`, src.api_key);
    out.push({
      name: src.name,
      signingKeys,
      apiUrl: urlRaw === null ? null : checkUrl(`${at}.api_url`, urlRaw, problems),
      apiKey: keyRaw === null ? null : checkApiKey(`${at}.api_key`, keyRaw, problems),
    });
  });
  const databasePath = databasePathIn(env);
  sinksOut.push(...resolveSinks(top.sinks, { env, knownSources: out.map((s) => s.name), problems, databasePath }));
  return json;
}
