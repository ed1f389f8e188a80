import { readFileSync } from 'node:fs';
import { Command, CommanderError } from 'commander';
import { CliError, EXIT } from './errors.js';
import type { CliIo } from './io.js';
import type { CommandContext, Outcome } from './program/context.js';
import { examples } from './program/options.js';
import { addReceiverCommands } from './program/receiver.js';
import { addDatabaseCommands } from './program/database.js';
import { addEventCommands } from './program/events.js';
import { addDeadLettersCommand } from './program/deadLetters.js';
import { addQuarantineCommand } from './program/quarantine.js';
import { addConflictsCommand } from './program/conflicts.js';
import { addSinksCommand } from './program/sinks.js';
import { addWebhooksCommand } from './program/webhooks.js';
import { addSandboxCommands } from './program/sandbox.js';

export type { Outcome };

/**
 * This package's version, from its package.json (two folders up from src/cli and dist/cli alike):
 * not npm_package_version, which under another package's npm script is that package's.
 */
function packageVersion(): string {
  try {
    return (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}

/**
 * The command tree, in the order --help lists it (each file in program/ adds a group). Command
 * modules are imported when their command runs, so `--help` and light commands stay quick to start.
 */
export function buildProgram(io: CliIo, outcome: Outcome): Command {
  const program = new Command('hiring-receiver');
  program
    .description('Webhook receiver for the hiring service: run it, send test events, replay, inspect, manage webhooks, try the demo.')
    .version(packageVersion(), '-V, --version')
    .exitOverride()
    .showSuggestionAfterError(true)
    .configureOutput({
      writeOut: (s) => void process.stdout.write(s),
      writeErr: (s) => void process.stderr.write(s),
      // Commander puts its suggestion on a second line: one line, as every other error.
      outputError: (s, write) => write(s.replace(/\n\(Did you mean (.*)\?\)\n$/, ' (did you mean $1?)\n')),
    })
    .addHelpText(
      'after',
      `${examples(['hiring-receiver demo', 'hiring-receiver send interview.completed --url http://127.0.0.1:8080/webhooks --secret whsec_...', 'hiring-receiver status', 'hiring-receiver <command> --help'])}
Exit codes: 0 success, 1 failure, 2 bad usage, 130 Ctrl-C, 143 SIGTERM. Configuration: the server's environment and CONFIG_FILE (README.md, "Configuration" and "The command line").`,
    );

  const done = (p: Promise<number>) =>
    p.then((code) => {
      outcome.code = code;
    });
  const ctx: CommandContext = { io, outcome, done };

  addReceiverCommands(program, ctx);
  addDatabaseCommands(program, ctx);
  addEventCommands(program, ctx);
  addDeadLettersCommand(program, ctx);
  addQuarantineCommand(program, ctx);
  addConflictsCommand(program, ctx);
  addSinksCommand(program, ctx);
  addWebhooksCommand(program, ctx);
  addSandboxCommands(program, ctx);

  // The operator commands read DATABASE_PATH and nothing else to find the database: a misspelt one
  // (DATABSE_PATH) sends them to ./data/receiver.db without a word, which `migrate` creates. The
  // server warns of it at start; so does a command with --database here (not serve/work: theirs).
  program.hook('preAction', async (_program, command) => {
    if (!command.options.some((o) => o.long === '--database') || command.opts()['database'] !== undefined) return;
    if ((io.env['DATABASE_PATH'] ?? '') !== '') return;
    const [{ DEFAULT_DATABASE_PATH }, { misspellingsOf }] = await Promise.all([import('../config/databasePath.js'), import('../config/misspeltSettings.js')]);
    const typos = misspellingsOf(io.env, 'DATABASE_PATH');
    if (typos.length === 0) return;
    io.err(`warning: DATABASE_PATH is unset, so the database is ${DEFAULT_DATABASE_PATH}; ${typos.join(', ')} ${typos.length === 1 ? 'is' : 'are'} set: a misspelling of DATABASE_PATH?`);
  });

  return program;
}

/** For `[command...] help <name>`: the name when no such command exists there, with the ones that do. */
function unknownHelpTopic(program: Command, argv: readonly string[]): { name: string; known: string[] } | null {
  let parent = program;
  for (let i = 0; i < argv.length; i++) {
    const word = argv[i]!;
    if (word.startsWith('-')) return null;
    if (word === 'help') {
      const name = argv[i + 1];
      if (name === undefined || name.startsWith('-') || parent.commands.some((c) => c.name() === name || c.aliases().includes(name))) return null;
      return { name, known: parent.commands.map((c) => c.name()) };
    }
    const next = parent.commands.find((c) => c.name() === word || c.aliases().includes(word));
    if (!next) return null;
    parent = next;
  }
  return null;
}

/** Parses and runs; usage errors exit 2, failures 1 (one line on stderr each). */
export async function runCli(argv: readonly string[], io: CliIo): Promise<Outcome> {
  const outcome: Outcome = { code: EXIT.ok, running: false };
  const program = buildProgram(io, outcome);
  // `help nosuch`: commander would print the whole help as an error without naming the word.
  const unknown = unknownHelpTopic(program, argv);
  if (unknown !== null) {
    io.err(`error: unknown command ${JSON.stringify(unknown.name)} (commands: ${unknown.known.join(', ')})`);
    return { code: EXIT.usage, running: false };
  }
  try {
    await program.parseAsync([...argv], { from: 'user' });
  } catch (err) {
    if (err instanceof CommanderError) {
      // Help and version exit 0; help shown because a subcommand is missing, and every parse error, are bad usage.
      // `help <command>` is commander.help with exit code 0; help for a missing subcommand has 1.
      const asked = err.code === 'commander.helpDisplayed' || err.code === 'commander.version' || (err.code === 'commander.help' && err.exitCode === 0);
      outcome.code = asked ? EXIT.ok : EXIT.usage;

      outcome.running = false;
      return outcome;
    }
    outcome.running = false;
    if (err instanceof CliError) {
      io.err(err.message.startsWith('config error:') ? err.message : `error: ${err.message}`);
      outcome.code = err.exitCode;
      return outcome;
    }
    const code = (err as { code?: unknown }).code;
    if (typeof code === 'string' && code.startsWith('SQLITE_BUSY')) {
      // SQLite says only "database is locked".
      io.err('error: the database stayed locked by another process for more than 5 s (a long write: a receiver under load, or another command such as `replay` or `prune`): try again');
    } else io.err(`error: ${(err as Error).message ?? String(err)}`);
    outcome.code = EXIT.failure;
  }
  return outcome;
}
