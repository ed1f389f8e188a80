import { spawn } from 'node:child_process';
import { ROOT } from '../../helpers/childServer.js';

const SCRIPT = `
const Database = require('better-sqlite3');
const db = new Database(process.argv[1]);
db.pragma('busy_timeout = 10000');
db.exec('BEGIN IMMEDIATE');
process.stdout.write('locked ' + Date.now() + '\\n');
setTimeout(() => { process.stdout.write('releasing ' + Date.now() + '\\n'); db.exec('ROLLBACK'); db.close(); }, Number(process.argv[2]));
`;

/**
 * Another process holding the database's write lock: `node -e` with
 * better-sqlite3 in BEGIN IMMEDIATE for `holdMs`, then ROLLBACK. `locked`
 * resolves to the child's clock just after BEGIN IMMEDIATE returned (the lock
 * is held from then on at the latest); `releasing` to its clock just before
 * ROLLBACK (the lock is held until then at least). Same machine, same clock.
 */
export function holdWriteLock(dbPath: string, holdMs: number) {
  const proc = spawn(process.execPath, ['-e', SCRIPT, dbPath, String(holdMs)], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  proc.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  let onLocked: (t: number) => void;
  let onReleasing: (t: number) => void;
  const locked = new Promise<number>((r) => (onLocked = r));
  const releasing = new Promise<number>((r) => (onReleasing = r));
  let buf = '';
  proc.stdout!.on('data', (d: Buffer) => {
    buf += d.toString();
    const l = /locked (\d+)\n/.exec(buf);
    if (l) onLocked(Number(l[1]));
    const r = /releasing (\d+)\n/.exec(buf);
    if (r) onReleasing(Number(r[1]));
  });
  const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)));
  const timer = setTimeout(() => proc.kill('SIGKILL'), holdMs + 15_000);
  void exited.then(() => clearTimeout(timer));
  return { proc, locked, releasing, exited, stderr: () => stderr };
}
