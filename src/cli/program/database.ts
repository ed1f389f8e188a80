import { type Command, Option } from 'commander';
import { ageArg } from '../parseArgs.js';
import type { CommandContext } from './context.js';
import { databaseOption, examples, interruptHelp, jsonOption, progressHelp, progressOption } from './options.js';

/** migrate, prune, backup and erase: the database file itself. */
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

  program
    .command('erase')
    .description("erase one candidate (a GDPR request): their applications, events and everything keyed by them, conflicts and quarantined bodies naming the address, their lines in the file sinks; then VACUUM and a WAL checkpoint, so no copy stays in the file")
    .option('--email <address>', "the candidate's email (compared ignoring case); never printed")
    .addOption(new Option('--application <id...>', 'also these applications, by id (a candidate without an email)'))
    .option('--deleted-at-service', 'the applications not marked deleted here were checked to be gone at the service (a redelivery stored one again after an earlier erasure)')
    .option('--finish', 'only the VACUUM and checkpoint, after an erasure whose checkpoint was held up by another process')
    .option('--without-sink-files', 'erase although CONFIG_FILE is unset and the candidate\'s events went to sinks: the database alone (take the lines out of the file sinks yourself)')
    .addOption(databaseOption())
    .option('--dry-run', 'say what would be erased (application ids, rows per table, file sink lines), change nothing')
    .addOption(jsonOption())
    .addHelpText(
      'after',
      examples(['hiring-receiver erase --email jane.doe@example.com --dry-run', 'hiring-receiver erase --email jane.doe@example.com', 'hiring-receiver erase --application 3f2c… --dry-run']) +
        '\nFirst delete the applications at the service, wait 11 h after the last of their events (the service retries for that long), and stop every process that has the database open. It refuses (exit 1, nothing erased) otherwise: README "Personal data and erasure". Set CONFIG_FILE as the receiver has it, so its file sinks are rewritten too. Not reached: backups, Litestream replicas, what http and stdout sinks sent.',
    )
    .action((o) => done(import('../commands/erase.js').then((m) => m.runErase(io, o))));
}
