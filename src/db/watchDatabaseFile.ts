import type { Logger } from '../observability/logger.js';
import { DatabaseFileWatch } from './DatabaseFileWatch.js';
import type { OpenDatabase } from './openDatabase.js';

/**
 * The receiver's watch of its database file (`fileWatch`), said at error once the file is found
 * replaced, then `onReplaced` (the workers stop); and its once-a-second check (`watchFile`,
 * `stopWatchingFile`).
 */
export function watchDatabaseFile(database: OpenDatabase, logger: Logger, onReplaced: () => void) {
  // Whether DATABASE_PATH still names the file `database` was opened on (DatabaseFileWatch): found
  // otherwise (deleted, or another file moved there while this process runs), nothing more is
  // acknowledged and the workers stop; said once, here.
  const fileWatch = new DatabaseFileWatch(database.sqlite.memory ? ':memory:' : database.sqlite.name, database.opened, (problem) => {
    logger.error(
      { problem, database_path: database.sqlite.name },
      'the database file is no longer the one this process opened: nothing more is written to it (deliveries are answered 503 database_replaced, /readyz is 503, the workers stop claiming). ' +
        'Restart the receiver (every process on this database) to use the file now at DATABASE_PATH (its stop renames the old file\'s -wal, which SQLite would apply to the new one); to restore a backup, stop them first, then replace the file and remove its -wal and -shm (README, "Backups while it runs")',
    );
    onReplaced();
  });
  let fileWatchTimer: NodeJS.Timeout | null = null;
  /**
   * Checks the files once a second too, so that an idle receiver, or a `work` process, stops
   * writing to a replaced file. Not unref'd: once the workers stop, it is what keeps a `work`
   * process running until it is stopped (it exited 0 at once, unsaid, its database not closed).
   */
  const watchFile = () => {
    fileWatchTimer ??= setInterval(() => fileWatch.check(), 1000);
  };
  const stopWatchingFile = () => {
    if (fileWatchTimer) clearInterval(fileWatchTimer);
    fileWatchTimer = null;
  };
  return { fileWatch, watchFile, stopWatchingFile };
}
