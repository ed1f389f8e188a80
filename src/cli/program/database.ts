import { type Command, Option } from 'commander';
import { ageArg } from '../parseArgs.js';
import type { CommandContext } from './context.js';
import { databaseOption, examples, interruptHelp, jsonOption, progressHelp, progressOption } from './options.js';

/** migrate, prune and backup: the database file itself. */
export function addDatabaseCommands(program: Command, { io, done }: CommandContext): void {
  program
    .command('migrate')
    .description('create the database if needed and apply pending migrations (the server also migrates at start-up)')
    .addOption(databaseOption())
    .addOption(jsonOption())
    .addOption(progressOption())
    .addHelpText('after', examples(['DATABASE_PATH=/var/lib/receiver/receiver.db hiring-receiver migrate']) + progressHelp('migrate: applying 006_processing_cursor (2 of 4): an index over a large table takes seconds'))
    .action((o) => done(import('../commands/migrate.js').then((m) => m.runMigrate(io, o))));

  program
    .command('prune')
    .description('delete finished jobs (state done) older than an age: the queue\'s history, which nothing reads again (the receiver prunes by itself after JOB_RETENTION_DAYS)')
    .addOption(databaseOption())
    // The default named as an age: commander would print it in milliseconds (2592000000).
    .addOption(new Option('--older-than <age>', 'finished more than this long ago: 12h, 30d, 2w (at least 1h)').argParser(ageArg(3_600_000, '1h')).default(30 * 86_400_000, '30d'))
    .option('--dry-run', 'count them, delete nothing')
    .addOption(jsonOption())
    .addOption(progressOption())
    .addHelpText('after', examples(['hiring-receiver prune --older-than 7d --dry-run', 'hiring-receiver prune --older-than 7d', 'hiring-receiver prune --older-than 7d --progress >> /var/log/receiver-prune.log 2>&1']) + progressHelp('prune: 120,000 jobs deleted so far') + interruptHelp('it deleted'))
    .action((o) => done(import('../commands/prune.js').then((m) => m.runPrune(io, o))));

  program
    .command('backup')
    .description('a consistent copy of the database while the receiver runs (SQLite online backup), as one self-contained 0600 file')
    .argument('<destination>', 'file to write, or a folder (the copy is named receiver-<UTC time>.db in it)')
    .addOption(databaseOption())
    .option('--force', 'replace an existing destination file')
    .addOption(jsonOption())
    .addOption(progressOption())
    .addHelpText(
      'after',
      examples(['hiring-receiver backup /data/backups/', 'hiring-receiver backup ./before-upgrade.db --database ./data/receiver.db']) +
        '\nAny schema version (take one before an upgrade). To restore: stop the receiver, put the copy in place of the database, remove the files beside it named after it (-wal, -shm, -ingest-wait, -workers-lock, -workers-lock-journal), start.' +
        progressHelp('backup: 1,234 of 52,000 pages (2%), then checking and syncing the copy'),
    )
    .action((destination: string, o) => done(import('../commands/backup.js').then((m) => m.runBackup(io, destination, o))));
}
