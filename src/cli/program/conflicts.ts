import type { Command } from 'commander';
import type { CommandContext } from './context.js';
import { databaseOption, examples, jsonOption, listLimitOption } from './options.js';

/** conflicts list and show. */
export function addConflictsCommand(program: Command, { io, done }: CommandContext): void {
  const cf = program.command('conflicts').description('bodies sent later under an event id already stored with another body (the stored one is kept)');
  cf.command('list')
    .description('conflicts, newest first')
    .addOption(databaseOption())
    .addOption(listLimitOption())
    .addOption(jsonOption())
    .addHelpText('after', examples(['hiring-receiver conflicts list']))
    .action((o) => done(import('../commands/conflicts.js').then((m) => m.runConflictsList(io, o))));
  cf.command('show')
    .description('one conflict: the JSON paths where it differs from the stored event, then both bodies, escaped for the terminal')
    .argument('<id>', 'conflict id (from `conflicts list`)')
    .addOption(databaseOption())
    .addOption(jsonOption())
    .addHelpText('after', examples(['hiring-receiver conflicts show 2', 'hiring-receiver conflicts show 2 --json | jq .differing_paths']))
    .action((id: string, o) => done(import('../commands/conflicts.js').then((m) => m.runConflictsShow(io, id, o))));
}
