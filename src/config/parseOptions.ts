import type { z } from 'zod';

/**
 * zod parse options for CONFIG_FILE: a missing field says so. zod's own words for it depend on
 * the schema ("Invalid input" for a union such as a secret reference), which does not tell the
 * operator that the field is simply absent.
 */
export const CONFIG_PARSE: z.core.ParseContext<z.core.$ZodIssue> = {
  error: (issue) => (issue.input === undefined ? 'is required' : undefined),
};

type Issue = { readonly code?: string; readonly path: readonly PropertyKey[]; readonly message: string; readonly errors?: readonly (readonly Issue[])[] };

/** Issues that only say the value is of another type than this branch of a union takes. */
function wrongType(issues: readonly Issue[]): boolean {
  return issues.every((i) => i.path.length === 0 && (i.code === 'invalid_type' || (i.code === 'invalid_union' && (i.errors ?? []).every(wrongType))));
}

/**
 * The issues to report, each with its whole path. A union that failed (a secret given as a
 * string, a list or { "env": NAME }) is zod's bare "Invalid input": when one branch took the
 * value's type (a list for a list), that branch's own issues are reported instead, so
 * `"secrets": ["whsec_…", 5]` names `secrets.1`, and `{ "envv": … }` the key that is wrong.
 */
export function configIssues(issues: readonly Issue[], prefix: readonly PropertyKey[] = []): { path: PropertyKey[]; message: string }[] {
  return issues.flatMap((issue) => {
    const path = [...prefix, ...issue.path];
    const branches = issue.code === 'invalid_union' ? (issue.errors ?? []).filter((b) => b.length > 0 && !wrongType(b)) : [];
    return branches.length === 1 ? configIssues(branches[0]!, path) : [{ path, message: issue.message }];
  });
}
