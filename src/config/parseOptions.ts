import type { z } from 'zod';

/**
 * zod parse options for CONFIG_FILE: a missing field says so. zod's own words for it depend on
 * the schema ("Invalid input" for a union such as a secret reference), which does not tell the
 * operator that the field is simply absent.
 */
export const CONFIG_PARSE: z.core.ParseContext<z.core.$ZodIssue> = {
  error: (issue) => (issue.input === undefined ? 'is required' : undefined),
};
