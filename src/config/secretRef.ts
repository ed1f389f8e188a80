import { z } from 'zod';

/** A secret in CONFIG_FILE: given inline, or as `{ "env": "NAME" }` to read it from the environment. */
export const secretRef = z.union([z.string(), z.object({ env: z.string().min(1, 'must name an environment variable') }).strict()], {
  error: (iss) => (iss.input === undefined ? undefined : 'must be a string, or { "env": "NAME" } to read it from an environment variable'),
});
export type SecretRef = z.infer<typeof secretRef>;

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Whether `{ "env": name }`'s name may be printed. A secret made only of letters and digits
 * passes ENV_NAME: only a name shaped like one is shown (upper-case words joined by _, none longer
 * than 24, or one word of letters only, up to 16), never a hex or base32 token.
 */
export function envNameShown(name: string): boolean {
  return ENV_NAME.test(name) && (/^[A-Z][A-Z0-9]{0,23}(_[A-Z0-9]{1,24})+$/.test(name) || /^[A-Z]{1,16}$/.test(name)) && !/^(WHSEC|SK)_/.test(name) && name.length <= 64;
}

/** The secret's value, or null after reporting (through `problem`) an unset or empty variable, named by `where`. */
export function resolveSecretRef(
  where: string,
  ref: SecretRef,
  env: Record<string, string | undefined>,
  problem: (message: string) => void,
): string | null {
  if (typeof ref === 'string') return ref;
  // Not echoed unless it reads as a variable's name: the secret itself pasted here would be printed.
  if (!ENV_NAME.test(ref.env)) {
    problem(`${where}: "env" must name an environment variable (letters, digits and _), not hold the value (not shown: is the secret itself here?)`);
    return null;
  }
  const v = env[ref.env];
  if (v === undefined || v === '') {
    const shown = envNameShown(ref.env);
    // Told apart: an empty one is usually a `NAME=` left blank in an env file or compose file, not a missing one.
    const state = v === undefined ? 'is not set' : 'is set but empty';
    problem(shown ? `${where}: environment variable ${ref.env} ${state}` : `${where}: the environment variable it names ${state} (the name is not shown: it does not look like one; is the secret itself here?)`);
    return null;
  }
  return v;
}
