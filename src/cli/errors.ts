/** Exit codes of every command: 0 success, 1 failure, 2 bad usage. */
export const EXIT = { ok: 0, failure: 1, usage: 2 } as const;

/** A failure reported as one line on stderr, with its exit code. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number = EXIT.failure,
  ) {
    super(message);
    this.name = 'CliError';
  }
}

/** Bad usage found after parsing (conflicting or missing choices): exit code 2. */
export class UsageError extends CliError {
  constructor(message: string) {
    super(message, EXIT.usage);
    this.name = 'UsageError';
  }
}
