import { type Command, Option } from 'commander';
import { collect } from '../parseArgs.js';
import type { CommandContext } from './context.js';
import { databaseOption, examples, interruptHelp, jsonOption, listLimitOption, progressHelp, progressOption } from './options.js';

/** dead-letters list, retry and discard. */
export function addDeadLettersCommand(program: Command, { io, done }: CommandContext): void {
  const dl = program.command('dead-letters').description('jobs that failed all their attempts: list them, run them again, or discard those meant to stay unsent');
  dl.command('list')
    .description('dead-lettered jobs, newest first, with their last error')
    .addOption(databaseOption())
    .option('--kind <kind>', 'only this job kind (process_event, fetch_result, sink:<name>)')
    .option('--source <name>', 'only this source')
    .addOption(listLimitOption())
    .addOption(jsonOption())
    .addHelpText('after', examples(['hiring-receiver dead-letters list', 'hiring-receiver dead-letters list --kind fetch_result --json']))
    .action((o) => done(import('../commands/deadLetters.js').then((m) => m.runDeadLettersList(io, o))));
  /** retry's and discard's selection: by id, or every dead letter, or by kind, source and event. */
  const deadLetterSelection = (cmd: Command) =>
    cmd
      .addOption(new Option('--id <ids...>', 'job ids (repeatable, or comma-separated)').argParser(collect).conflicts('all'))
      .addOption(new Option('--all', 'every dead letter').conflicts(['kind', 'source', 'event']))
      .option('--kind <kind>', 'every dead letter of this job kind')
      .option('--source <name>', 'every dead letter of this source')
      .option('--event <id>', 'every dead letter of this event');
  deadLetterSelection(dl.command('retry').description('run dead-lettered jobs again now, with fresh attempts').addOption(databaseOption()))
    .option('--dry-run', 'count what would run again; change nothing')
    .addOption(jsonOption())
    .addOption(progressOption())
    .addHelpText(
      'after',
      examples(['hiring-receiver dead-letters retry --all --dry-run', 'hiring-receiver dead-letters retry --id 42 43', 'hiring-receiver dead-letters retry --kind fetch_result', 'hiring-receiver dead-letters retry --kind sink:crm   # all of a sink, once its consumer is back']) +
        progressHelp('dead-letters retry: 12,000 of 140,000 dead letters (8%)') +
        interruptHelp('it queued again'),
    )
    .action((o) => done(import('../commands/deadLetters.js').then((m) => m.runDeadLettersRetry(io, o))));
  deadLetterSelection(
    dl
      .command('discard')
      .description('delete dead-lettered jobs meant to stay unsent (their failures stay in deliveries and the result tables), so the dead-letter alert clears')
      .addOption(databaseOption()),
  )
    .option('--dry-run', 'count what would be discarded; change nothing')
    .addOption(jsonOption())
    .addOption(progressOption())
    .addHelpText('after', examples(['hiring-receiver dead-letters discard --kind sink:old-crm --dry-run', 'hiring-receiver dead-letters discard --id 42 43']) + progressHelp('dead-letters discard: 12,000 of 140,000 dead letters (8%)') + interruptHelp('it discarded'))
    .action((o) => done(import('../commands/deadLetters.js').then((m) => m.runDeadLettersDiscard(io, o))));
}
