import type { Command } from 'commander';
import { intArg } from '../parseArgs.js';
import type { CommandContext } from './context.js';
import { databaseOption, examples, jsonOption, listLimitOption } from './options.js';

/** quarantine list, show and replay. */
export function addQuarantineCommand(program: Command, { io, done }: CommandContext): void {
  const q = program.command('quarantine').description('signed deliveries that could not be parsed, kept whole');
  q.command('list')
    .description('quarantined deliveries, newest first')
    .addOption(databaseOption())
    .addOption(listLimitOption())
    .addOption(jsonOption())
    .addHelpText('after', examples(['hiring-receiver quarantine list']))
    .action((o) => done(import('../commands/quarantine.js').then((m) => m.runQuarantineList(io, o))));
  q.command('show')
    .description('one quarantined delivery: headers (the signature hidden) and the body, escaped for the terminal (hex when not UTF-8)')
    .argument('<id>', 'quarantine id (from `quarantine list`)')
    .addOption(databaseOption())
    .option('--max-bytes <n>', 'show at most n bytes of the body', intArg(1), 65_536)
    .addOption(jsonOption())
    .addHelpText('after', examples(['hiring-receiver quarantine show 3', 'hiring-receiver quarantine show 3 --json | jq -r .body_base64 | base64 -d > body.bin']))
    .action((id: string, o) => done(import('../commands/quarantine.js').then((m) => m.runQuarantineShow(io, id, o))));
  q.command('replay')
    .description("parse quarantined deliveries again with this version's rules: one that now parses is stored as an event (or found a duplicate) and leaves the quarantine; one still refused stays")
    .argument('[ids...]', 'quarantine ids (from `quarantine list`)')
    .addOption(databaseOption())
    .option('--all', 'every quarantined delivery')
    .option('--dry-run', 'say what would happen; change nothing')
    .addOption(jsonOption())
    .addHelpText('after', examples(['hiring-receiver quarantine replay 3 --dry-run', 'hiring-receiver quarantine replay --all']) + '\nExit code 1 when a delivery is still refused (its reason is shown) or an id is not in quarantine.')
    .action((ids: string[], o) => done(import('../commands/quarantine.js').then((m) => m.runQuarantineReplay(io, ids, o))));
}
