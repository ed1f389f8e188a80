/** The options and --help texts that several commands share. */
import { Option } from 'commander';
import { intArg } from '../parseArgs.js';

/** The "Examples:" block of a command's --help. */
export const examples = (lines: string[]) => `\nExamples:\n${lines.map((l) => `  $ ${l}`).join('\n')}\n`;
export const databaseOption = () => new Option('--database <path>', 'SQLite file of the receiver (default: DATABASE_PATH or ./data/receiver.db)');
export const jsonOption = () => new Option('--json', 'print JSON for scripts');
/** --limit of the list commands (dead letters, quarantine, conflicts): the newest n, 100 by default (printUpToLimit says when more are stored). */
export const listLimitOption = () => new Option('--limit <n>', 'at most n').argParser(intArg(1)).default(100);
export const progressOption = () => new Option('--progress', 'progress lines on stderr also when it is not a terminal (cron logs): one every 2 s at most');
/** What the --help of a command with --progress says about it. */
export const progressHelp = (what: string) =>
  `\nProgress (${what}) is shown on stderr when it is a terminal, one line rewritten in place; elsewhere nothing, unless --progress. Stdout and the exit code are the same either way.`;
/** What the --help of a bulk command that stops between two transactions (stopOnInterrupt) says about Ctrl-C. */
export const interruptHelp = (done: string) =>
  `\nCtrl-C or SIGTERM stops it after the transaction in flight: a line on stderr says how many ${done} (with --json, also the result so far with "interrupted": true), exit 130 or 143; run it again for the rest. A second one (not the same one within half a second, as timeout repeats it) ends it at once.`;
