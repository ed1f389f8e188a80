import type { z } from 'zod';
import { unknownKeysHint } from './unknownKeys.js';

/**
 * zod parse options for CONFIG_FILE: a missing field says so. zod's own words for it depend on
 * the schema ("Invalid input" for a union such as a secret reference), which does not tell the
 * operator that the field is simply absent.
 */
export const CONFIG_PARSE: z.core.ParseContext<z.core.$ZodIssue> = {
  error: (issue) => (issue.input === undefined ? 'is required' : undefined),
};

type Issue = {
  readonly code?: string;
  readonly path: readonly PropertyKey[];
  readonly message: string;
  readonly errors?: readonly (readonly Issue[])[];
  /** An unrecognized_keys issue's keys. */
  readonly keys?: readonly string[];
};

/** Issues that only say the value is of another type than this branch of a union takes. */
function wrongType(issues: readonly Issue[]): boolean {
  return issues.every((i) => i.path.length === 0 && (i.code === 'invalid_type' || (i.code === 'invalid_union' && (i.errors ?? []).every(wrongType))));
}

/** What was parsed: for naming the keys allowed where one was not recognized. */
export interface ParsedFrom {
  readonly schema: z.core.$ZodType;
  readonly input: unknown;
}

/**
 * The issues to report, each with its whole path (under `prefix`). A union that failed (a secret
 * given as a string, a list or { "env": NAME }) is zod's bare "Invalid input": when one branch took
 * the value's type (a list for a list), that branch's own issues are reported instead, so
 * `"secrets": ["whsec_…", 5]` names `secrets.1`, and `{ "envv": … }` the key that is wrong. With
 * `from`, the schema and input the issues are of, an unrecognized key is followed by the keys
 * allowed there and a near one (`did you mean "events"?`).
 */
export function configIssues(issues: readonly Issue[], prefix: readonly PropertyKey[] = [], from?: ParsedFrom): { path: PropertyKey[]; message: string }[] {
  const walk = (list: readonly Issue[], at: readonly PropertyKey[]): { path: PropertyKey[]; message: string }[] =>
    list.flatMap((issue) => {
      const path = [...at, ...issue.path];
      const branches = issue.code === 'invalid_union' ? (issue.errors ?? []).filter((b) => b.length > 0 && !wrongType(b)) : [];
      if (branches.length === 1) return walk(branches[0]!, path);
      const shownPath = [...prefix, ...path].map(shownKey);
      if (issue.code !== 'unrecognized_keys' || !issue.keys) return [{ path: shownPath, message: issue.message }];
      // zod's own words, but each key as a JSON string (zod quotes it raw, and a key holding an
      // escape sequence or a line break reached the terminal as such), and only a key that is a
      // plain name: a pasted "Authorization: Bearer …" as a key would carry its token.
      // The first few, with their hints: a file of thousands of unknown keys is one line still, and
      // its hints (an edit distance per key and allowed key) cost no more than those few.
      const plain = issue.keys.filter(isPlainKey);
      const hidden = issue.keys.length - plain.length;
      const shown = plain.slice(0, MAX_KEYS_NAMED);
      const named = shown.map((k) => JSON.stringify(k));
      if (plain.length > shown.length) named.push(`and ${plain.length - shown.length} more`);
      if (hidden > 0) named.push(`${hidden === 1 ? 'one' : hidden} not shown (${NOT_PLAIN})`);
      const said = `Unrecognized key${issue.keys.length > 1 ? 's' : ''}: ${named.join(', ')}`;
      return [{ path: shownPath, message: `${said}${from ? unknownKeysHint(from.schema, from.input, path, shown) : ''}` }];
    });
  return walk(issues, []);
}

/** A source's or a sink's name in CONFIG_FILE: 1-64 letters, digits, "_", "." or "-", the first a letter or a digit. */
export const CONFIG_NAME = /^[a-z0-9][a-z0-9_.-]{0,63}$/i;
/** What CONFIG_NAME takes, as a refused name's message says it. */
export const CONFIG_NAME_RULE = 'must be 1-64 letters, digits, "_", "." or "-", starting with a letter or a digit';

/** An HTTP token (RFC 9110 tchar) of 1 to 100 characters: a header name, as the http sink takes them. */
export const HTTP_TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$/;
/**
 * A key made of plain characters that still reads as a credential: an API key (sk-…), a signing
 * secret (whsec_…), or a run of 16 letters and digits or more holding a digit (a hex, base64 or
 * base32 token). No key the schemas name, nor an ordinary header name, is one.
 */
const isCredentialShaped = (key: string): boolean => /^(whsec_|sk[-_])/i.test(key) || (key.match(/[0-9A-Za-z]{16,}/g) ?? []).some((run) => /[0-9]/.test(run));
/**
 * A key CONFIG_FILE's messages may repeat: an HTTP token (letters, digits and
 * !#$%&'*+.^_`|~-), up to 100 characters, as header names are, that is not shaped like a
 * credential (isCredentialShaped). Every key the schemas name is one;
 * a key that is not (a header's name given as "Authorization: Bearer …", a value pasted where a
 * key goes) is never echoed, since it may hold a credential.
 */
export const isPlainKey = (key: string): boolean => HTTP_TOKEN.test(key) && !isCredentialShaped(key);
const NOT_PLAIN = 'not a plain name, so it may hold a value';
/** Unrecognized keys named in one message (the rest are counted). */
const MAX_KEYS_NAMED = 10;
/** How a key that is not a plain name (isPlainKey) stands in a path. */
export const KEY_NOT_SHOWN = `(a key not shown: ${NOT_PLAIN})`;
/** A path's keys as messages show them: an array index or a plain key as it is, any other key not shown. */
const shownKey = (key: PropertyKey): PropertyKey => (typeof key !== 'string' || isPlainKey(key) ? key : KEY_NOT_SHOWN);
