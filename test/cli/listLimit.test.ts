import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/receiver.js';
import { cli, deadDeliveries, withMigratedDatabase } from './helpers.js';

const { dir, cleanup } = tempDir('cli-list-limit-');
afterAll(cleanup);

const more = (what: string, n: number) => `warning: only the newest ${n} ${what} are listed, and there are more: --limit <n> lists more (\`status\` counts them)\n`;

// The list commands show the newest 100 by default: a script counting `dead-letters list --json | jq
// length` read 100 when thousands were dead, and nothing said the list was cut.
describe('a list cut by --limit', { timeout: 60_000 }, () => {
  it('says on stderr that there are more; stdout (--json included) keeps only the rows', async () => {
    await withMigratedDatabase(join(dir, 'lists.db'), async (path, w) => {
      deadDeliveries(w, 3);
      const at = '2026-11-20T10:00:00.000Z';
      const q = w.prepare("INSERT INTO quarantine (received_at, source, delivery_id, reason, headers, body) VALUES (?, 'default', ?, 'not JSON', '{}', x'7b')");
      const ev = w.prepare("INSERT INTO events (id, event_type, source, received_at, delivery_id, envelope) VALUES (?, 'application.created', 'default', ?, ?, '{}')");
      const conflict = w.prepare("INSERT INTO event_conflicts (event_id, source, received_at, delivery_id, envelope) VALUES (?, 'default', ?, ?, '{\"a\":1}')");
      for (let i = 0; i < 3; i++) {
        q.run(at, `msg-q${i}`);
        ev.run(`evt-c${i}`, at, `msg-e${i}`);
        conflict.run(`evt-c${i}`, at, `msg-c${i}`);
      }
      const env = { DATABASE_PATH: path };
      const lists: [string[], string][] = [
        [['dead-letters', 'list'], 'dead letters'],
        [['quarantine', 'list'], 'quarantined deliveries'],
        [['conflicts', 'list'], 'conflicts'],
      ];
      const runs = await Promise.all(
        lists.flatMap(([args]) => [cli([...args, '--limit', '2', '--json'], env), cli([...args, '--limit', '2'], env), cli([...args, '--limit', '3', '--json'], env)]),
      );
      lists.forEach(([args, what], i) => {
        const [cut, cutText, whole] = runs.slice(i * 3, i * 3 + 3) as [(typeof runs)[0], (typeof runs)[0], (typeof runs)[0]];
        expect({ code: cut.code, stderr: cut.stderr, rows: (JSON.parse(cut.stdout) as unknown[]).length }, args.join(' ')).toEqual({ code: 0, stderr: more(what, 2), rows: 2 });
        // The table: its header and two rows on stdout, the same line on stderr.
        expect({ code: cutText.code, stderr: cutText.stderr, lines: cutText.stdout.trim().split('\n').length }, args.join(' ')).toEqual({ code: 0, stderr: more(what, 2), lines: 3 });
        // All of them listed: nothing said.
        expect({ code: whole.code, stderr: whole.stderr, rows: (JSON.parse(whole.stdout) as unknown[]).length }, args.join(' ')).toEqual({ code: 0, stderr: '', rows: 3 });
      });
    });
  });
});
