import type { z } from 'zod';
import { editDistance } from '../util/editDistance.js';
import { isJsonObject } from '../util/json.js';

/**
 * What to add to zod's `Unrecognized key: "filters"` so the operator need not look the key up:
 * the keys that place takes, read from the schema that refused the key (never a list kept by
 * hand beside it), a near one (`did you mean "events"?`), and, in an entry whose keys depend on
 * its `type` (a sink), the type that takes the key (`url` on a file sink).
 */

/** Names operators reach for, each to the key the receiver uses: suggested only where that key is allowed. */
const SYNONYMS: Readonly<Record<string, string>> = {
  filters: 'events',
  filter: 'events',
  types: 'events',
  event_types: 'events',
  source: 'sources',
  maxAttempts: 'max_attempts',
  timeout: 'timeout_ms',
  timeoutMs: 'timeout_ms',
  header: 'headers',
  file: 'path',
  filename: 'path',
  endpoint: 'url',
};

/** Compared without case, `_` or `-`: maxAttempts, max-attempts and MAX_ATTEMPTS are max_attempts. */
const norm = (key: string): string => key.toLowerCase().replace(/[_-]/g, '');
const SYNONYMS_NORM = new Map(Object.entries(SYNONYMS).map(([from, to]) => [norm(from), to]));

/** The parts of a zod schema's definition that lead to an object's keys. */
interface Def {
  readonly type: string;
  readonly innerType?: z.core.$ZodType;
  readonly in?: z.core.$ZodType;
  readonly getter?: () => z.core.$ZodType;
  readonly shape?: Readonly<Record<string, z.core.$ZodType>>;
  readonly element?: z.core.$ZodType;
  readonly valueType?: z.core.$ZodType;
  readonly options?: readonly z.core.$ZodType[];
  readonly discriminator?: string;
  readonly values?: readonly unknown[];
}

const defOf = (schema: z.core.$ZodType): Def => schema._zod.def as unknown as Def;

/** The schema itself, through the wrappers that do not change its keys (optional, default, a pipe's input, lazy). */
function unwrapped(schema: z.core.$ZodType): z.core.$ZodType {
  const def = defOf(schema);
  const inner = def.innerType ?? def.in ?? def.getter?.();
  return inner ? unwrapped(inner) : schema;
}

/** An object schema's keys, in the schema's order; null for any other schema. */
function keysOf(schema: z.core.$ZodType): string[] | null {
  const def = defOf(unwrapped(schema));
  return def.type === 'object' && def.shape ? Object.keys(def.shape) : null;
}

/** The object at one place of the input, as the schema reads it: its keys, and its siblings when a discriminator chose it. */
interface Place {
  readonly keys: readonly string[];
  /** The option of a discriminated union the input's discriminator chose (a sink's `type`), with the other options' keys. */
  readonly variant?: { readonly discriminator: string; readonly value: string; readonly others: readonly { value: string; keys: readonly string[] }[] };
}

/** The literal values an option of a discriminated union takes for its discriminator. */
function discriminatorValues(option: z.core.$ZodType, discriminator: string): unknown[] {
  const field = defOf(unwrapped(option)).shape?.[discriminator];
  return field ? [...(defOf(unwrapped(field)).values ?? [])] : [];
}

/** The object schema at `path` of `input`, walking the schema and the input together; null when the path leaves them. */
function placeAt(schema: z.core.$ZodType, input: unknown, path: readonly PropertyKey[]): Place | null {
  const def = defOf(unwrapped(schema));
  const [head, ...rest] = path;
  switch (def.type) {
    case 'object': {
      if (!isJsonObject(input)) return null;
      if (head === undefined) return { keys: Object.keys(def.shape ?? {}) };
      const field = def.shape && Object.hasOwn(def.shape, head) ? def.shape[String(head)] : undefined;
      return field ? placeAt(field, input[String(head)], rest) : null;
    }
    case 'array':
      return Array.isArray(input) && typeof head === 'number' && def.element ? placeAt(def.element, input[head], rest) : null;
    case 'record':
      return isJsonObject(input) && head !== undefined && def.valueType ? placeAt(def.valueType, input[String(head)], rest) : null;
    case 'union': {
      const options = def.options ?? [];
      const disc = def.discriminator;
      if (disc === undefined) {
        // The first branch the input's shape fits ({ "env": NAME } rather than a string).
        for (const option of options) {
          const found = placeAt(option, input, path);
          if (found) return found;
        }
        return null;
      }
      if (!isJsonObject(input)) return null;
      const value = input[disc];
      const chosen = options.find((o) => discriminatorValues(o, disc).includes(value));
      if (!chosen) return null;
      const found = placeAt(chosen, input, path);
      if (!found || head !== undefined || typeof value !== 'string') return found;
      const others = options
        .filter((o) => o !== chosen)
        .flatMap((o) => discriminatorValues(o, disc).filter((v): v is string => typeof v === 'string').map((v) => ({ value: v, keys: keysOf(o) ?? [] })));
      return { ...found, variant: { discriminator: disc, value, others } };
    }
    default:
      return null;
  }
}

/**
 * The allowed keys nearest `key`: those equal to it but for case, `_` and `-`, else the one a
 * synonym names, else those at the least edit distance of at most 2 (and less than the key's own
 * length, so that "ab" is not "near" every two-letter key).
 */
function nearKeys(key: string, allowed: readonly string[]): string[] {
  const k = norm(key);
  const same = allowed.filter((a) => norm(a) === k);
  if (same.length > 0) return same;
  const synonym = SYNONYMS_NORM.get(k);
  if (synonym !== undefined && allowed.includes(synonym)) return [synonym];
  const scored = allowed.map((a) => ({ a, d: editDistance(k, norm(a)) })).filter(({ d }) => d <= 2 && d < k.length);
  const best = Math.min(...scored.map(({ d }) => d));
  return scored.filter(({ d }) => d === best).map(({ a }) => a);
}

const quoted = (keys: readonly string[]): string => keys.map((k) => JSON.stringify(k)).join(' or ');

/** What to say of one unknown key: a near allowed key, or the other type that takes it; null when neither. */
function keyHint(key: string, place: Place, named: boolean): string | null {
  const near = nearKeys(key, place.keys);
  const takers = place.variant?.others.filter((o) => o.keys.some((k) => norm(k) === norm(key))).map((o) => o.value) ?? [];
  // A key another type takes as it is (`url` on a file sink) says so, unless this one takes it but for its case.
  if (near.length > 0 && (takers.length === 0 || near.some((a) => norm(a) === norm(key)))) return `did you mean ${quoted(near)}${named ? ` for ${JSON.stringify(key)}` : ''}?`;
  if (takers.length === 0 || !place.variant) return null;
  const { discriminator, value } = place.variant;
  return `${JSON.stringify(key)} is a key of ${discriminator} ${quoted(takers)}, not of ${discriminator} ${JSON.stringify(value)}`;
}

/**
 * The words to append to zod's message for the keys it did not recognize at `path` of `input`
 * (`schema` being what parsed `input`): `; did you mean "events"? (allowed keys for type "file": ...)`.
 * Empty when the schema cannot be followed to that place.
 */
export function unknownKeysHint(schema: z.core.$ZodType, input: unknown, path: readonly PropertyKey[], keys: readonly string[]): string {
  const place = placeAt(schema, input, path);
  if (!place) return '';
  const hints = keys.flatMap((k) => keyHint(k, place, keys.length > 1) ?? []);
  const allowed = place.keys.length === 0 ? 'none' : place.keys.join(', ');
  const where = place.variant ? ` for ${place.variant.discriminator} ${JSON.stringify(place.variant.value)}` : '';
  return `${hints.map((h) => `; ${h}`).join('')} (allowed keys${where}: ${allowed})`;
}
