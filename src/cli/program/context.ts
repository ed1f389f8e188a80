import type { CliIo } from '../io.js';

/** What an action leaves behind: the exit code, or `running` for serve/sandbox (signals end them). */
export interface Outcome {
  code: number;
  running: boolean;
}

/** What the files that add commands to the tree take from buildProgram. */
export interface CommandContext {
  readonly io: CliIo;
  /** serve, work and sandbox set `running`; the other commands' exit code goes in through `done`. */
  readonly outcome: Outcome;
  /** Records the exit code an action's promise resolves to in `outcome`. */
  readonly done: (p: Promise<number>) => Promise<void>;
}
