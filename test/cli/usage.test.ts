import { spawn } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import type { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { buildProgram } from '../../src/cli/program.js';
import { migrate, readMigrations } from '../../src/db/migrate.js';
import { acquireWorkersLock } from '../../src/db/workersLock.js';
import { ROOT, runTs } from '../helpers/childServer.js';
import { tempDir } from '../helpers/receiver.js';
import { cli } from './helpers.js';

function allCommands(cmd: Command, path: string[] = []): { path: string; cmd: Command }[] {
  return [{ path: path.join(' '), cmd }, ...cmd.commands.flatMap((c) => allCommands(c, [...path, c.name()]))];
}

describe('CLI usage', () => {
  it('documents every command with examples (help of each command of the tree)', () => {
    const io = { env: {}, out: () => {}, err: () => {}, isTTY: false, stderr: process.stderr };
    const program = buildProgram(io, { code: 0, running: false });
    const missing: string[] = [];
    for (const { path, cmd } of allCommands(program)) {
      let text = '';
      cmd.configureOutput({ writeOut: (s) => (text += s), writeErr: (s) => (text += s) });
      cmd.outputHelp();
      const hasSubcommands = cmd.commands.length > 0;
      if (!text.includes('Usage: hiring-receiver')) missing.push(`${path}: no usage`);
      if (!hasSubcommands && !text.includes('Examples:')) missing.push(`${path}: no examples`);
    }
    expect(missing).toEqual([]);
    expect(program.commands.map((c) => c.name())).toEqual(
      expect.arrayContaining(['serve', 'migrate', 'send', 'replay', 'status', 'dead-letters', 'quarantine', 'webhooks', 'sandbox', 'demo']),
    );
  });

  it('--version is this package\'s, also under another package\'s npm script (npm_package_version)', async () => {
    const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
    const r = await cli(['--version'], { npm_package_version: '9.9.9' });
    expect({ code: r.code, stdout: r.stdout }).toEqual({ code: 0, stdout: `${version}\n` });
  });

  // Some thirty CLI starts at once: on a loaded two-core runner, over the default 30 s.
  it('prints help with exit 0, and exits 2 with one clear line on bad usage; 1 on failures', { timeout: 60_000 }, async () => {
    const env = { DATABASE_PATH: '/nonexistent/receiver.db' };
    const cases: [string[], number, RegExp][] = [
      [['--help'], 0, /Exit codes: 0 success, 1 failure, 2 bad usage/],
      [['send', '--help'], 0, /interview_v2\.completed[\s\S]*Examples:/],
      [['help', 'status'], 0, /Usage: hiring-receiver status/],
      // An age, as it is written on the command line, not the milliseconds it is parsed into.
      [['prune', '--help'], 0, /--older-than <age> +finished more than this long ago: 12h, 30d, 2w \(at least\s+1h\) \(default: 30d\)/],
      [['help', 'nosuch'], 2, /^error: unknown command "nosuch" \(commands: serve, .*\)\n$/],
      [['dead-letters', 'help', 'nosuch'], 2, /^error: unknown command "nosuch" \(commands: list, retry, discard\)\n$/],
      [['frobnicate'], 2, /unknown command 'frobnicate'/],
      // Commander's suggestion on the same line: one line per error.
      [['status', '--jsn'], 2, /^error: unknown option '--jsn' \(did you mean --json\?\)\n$/],
      [['dead-letters', 'lst'], 2, /^error: unknown command 'lst' \(did you mean list\?\)\n$/],
      [['send', 'application.created', '--repeat', 'many'], 2, /--repeat <n>.*expected an integer/],
      [['send', 'no.such_type', '--secret', 'whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3'], 2, /no built-in fixture for "no.such_type"/],
      [['replay', '--since', 'yesterday-ish'], 2, /ISO 8601/],
      [['replay', '--since', '2026-11-31T00:00:00Z'], 2, /"2026-11-31T00:00:00Z": 2026-11-31 is not a date/],
      [['replay', '--since', '999999999d'], 2, /"999999999d": an age that long ago is not a date/],
      [['status', '--database', ''], 2, /--database: the path is empty/],
      // Taken as given, but a folder is no database file: not SQLite's "disk I/O error" (exit 1).
      [['status', '--database', ROOT], 2, /^error: --database: ".+" is a folder: give the path of the database file in it, such as ".+\/receiver\.db"\n$/],
      [['migrate', '--database', '/nonexistent/backups/'], 2, /^error: --database: "\/nonexistent\/backups\/" names a folder: give the path of the database file in it, such as "\/nonexistent\/backups\/receiver\.db"\n$/],
      // The ages swapped: an empty window is a mistake, said before the database is opened.
      [['replay', '--since', '2h', '--until', '3h'], 2, /--since \(.*\) must be before --until \(.*\)/],
      // --timeout bounds --wait only: alone, it bounded nothing, and a script took it for a bound.
      [['replay', '--all', '--timeout', '60'], 2, /^error: --timeout bounds --wait only: give --wait too, or leave --timeout out\n$/],
      [['dead-letters', 'retry', '--all', '--kind', 'fetch_result'], 2, /cannot be used with/],
      [['webhooks', 'register'], 2, /required option '--url <url>'/],
      [['webhooks', 'deliveries', 'wh_1', '--status', 'bogus'], 2, /option '--status <status>' argument 'bogus' is invalid\. Allowed choices are succeeded, failed/],
      [['status'], 1, /^error: no database at \/nonexistent\/receiver\.db \(set DATABASE_PATH or --database; `migrate` creates one\)\n$/],
    ];
    const results = await Promise.all(cases.map(([args]) => cli(args, env)));
    results.forEach((r, i) => {
      const [args, code, message] = cases[i]!;
      expect(r.code, args.join(' ')).toBe(code);
      expect(code === 0 ? r.stdout : r.stderr, args.join(' ')).toMatch(message);
      if (code === 2) expect(r.stderr.trim().split('\n'), args.join(' ')).toHaveLength(1);
    });
  });

  it('send names the variable a bad value came from: WEBHOOK_SECRET or PORT, not --secret or --url', async () => {
    const secret = 'whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3';
    const [fromEnv, fromFlag, port] = await Promise.all([
      cli(['send', 'application.created', '--url', 'http://127.0.0.1:9/webhooks'], { WEBHOOK_SECRET: 'garbage' }),
      cli(['send', 'application.created', '--url', 'http://127.0.0.1:9/webhooks', '--secret', 'garbage']),
      cli(['send', 'application.created', '--secret', secret], { PORT: 'abc' }),
    ]);
    expect([fromEnv.code, fromFlag.code, port.code]).toEqual([2, 2, 2]);
    expect(fromEnv.stderr).toMatch(/^error: WEBHOOK_SECRET must start with "whsec_"/);
    expect(fromFlag.stderr).toMatch(/^error: --secret must start with "whsec_"/);
    expect(port.stderr).toBe('error: PORT must be a port number (0-65535) when --url is not given, got "abc"\n');
  });

  it.skipIf(!existsSync('/proc/self'))('a database path under /proc fails at once with the path named (Node\'s own recursive mkdir spins there forever)', async () => {
    const r = await cli(['migrate', '--database', '/proc/no-such-dir/receiver.db'], {}, 10_000);
    expect(r.signal, 'killed: the command did not end').toBeNull();
    expect(r.code).toBe(1);
    expect(r.stderr).toBe("error: cannot open the database at /proc/no-such-dir/receiver.db: ENOENT: no such file or directory, mkdir '/proc/no-such-dir'\n");
  });

  it('sandbox names a bad SANDBOX_PORT as a config error', async () => {
    const r = await cli(['sandbox'], { SANDBOX_PORT: 'abc' }, 10_000);
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 1, stderr: 'config error: SANDBOX_PORT: must be an integer 0-65535, got "abc"\n' });
  });

  it('webhooks needs only the API settings, names the bad one and never echoes a key', async () => {
    const r = await cli(['webhooks', 'list'], { HIRING_API_URL: 'http://127.0.0.1:9', HIRING_API_KEY: 'oops-secret-value' });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe('config error: HIRING_API_KEY: must have the form sk-<segment>.<segment>, in printable ASCII characters (no spaces, no "…")\n');
  });
});

describe('CLI DATABASE_PATH', () => {
  it('refuses the DATABASE_PATH serve refuses (a "~" path from an env file, a folder), before making a database anywhere', async () => {
    const { dir, cleanup } = tempDir('cli-database-path-');
    try {
      const home = await cli(['migrate'], { DATABASE_PATH: '~/receiver.db', HOME: dir });
      expect([home.code, home.stderr]).toEqual([
        1,
        `config error: DATABASE_PATH: starts with "~", which only a shell expands (not an env file, Docker or systemd): give the whole path, such as ${JSON.stringify(join(dir, 'receiver.db'))}\n`,
      ]);
      expect(existsSync(join(ROOT, '~'))).toBe(false);
      const folder = await cli(['status'], { DATABASE_PATH: dir });
      expect([folder.code, folder.stderr]).toEqual([
        1,
        `config error: DATABASE_PATH: ${JSON.stringify(dir)} is a folder: give the path of the database file in it, such as ${JSON.stringify(join(dir, 'receiver.db'))}\n`,
      ]);
    } finally {
      rmSync(join(ROOT, '~'), { recursive: true, force: true });
      cleanup();
    }
  });

  it('refuses an SQLite URI as such (README: "not an SQLite URI"), naming the path to give, not the reason of ":memory:"', async () => {
    const { dir, cleanup } = tempDir('cli-database-uri-');
    try {
      const uri = `file:${join(dir, 'receiver.db')}?mode=rwc`;
      const r = await cli(['migrate'], { DATABASE_PATH: uri });
      expect([r.code, r.stderr]).toEqual([
        1,
        `config error: DATABASE_PATH: must be the path of a database file, not an SQLite URI (${JSON.stringify(uri)}): give the file's path, such as ${JSON.stringify(join(dir, 'receiver.db'))}\n`,
      ]);
      // Nothing made: neither the file the URI names nor a folder named "file:" where it ran.
      expect(existsSync(join(dir, 'receiver.db'))).toBe(false);
      expect(existsSync(join(ROOT, 'file:'))).toBe(false);
      const local = await cli(['status'], { DATABASE_PATH: 'file:///srv/receiver.db' });
      expect([local.code, local.stderr]).toEqual([1, `config error: DATABASE_PATH: must be the path of a database file, not an SQLite URI ("file:///srv/receiver.db"): give the file's path, such as "/srv/receiver.db"\n`]);
      // No path to suggest where the URI's would be wrong: percent-escaped (the file is "my db.db", not "my%20db.db"), or ':memory:' (refused too).
      for (const uri of ['file:/srv/my%20db.db', 'file::memory:?cache=shared']) {
        const none = await cli(['status'], { DATABASE_PATH: uri });
        expect([none.code, none.stderr]).toEqual([1, `config error: DATABASE_PATH: must be the path of a database file, not an SQLite URI (${JSON.stringify(uri)}): give the file's path\n`]);
      }
    } finally {
      cleanup();
      // Made in the checkout only when the refusal fails: left there, every later run failed on it.
      rmSync(join(ROOT, 'file:'), { recursive: true, force: true });
    }
  });

  it('warns when DATABASE_PATH is unset and a misspelling of it is set (the command would use ./data/receiver.db), as serve does', async () => {
    const { dir, cleanup } = tempDir('cli-database-typo-');
    try {
      const own = join(dir, 'receiver.db');
      const warning = 'warning: DATABASE_PATH is unset, so the database is ./data/receiver.db; DATABSE_PATH is set: a misspelling of DATABASE_PATH?\n';
      const [typo, given, option] = await Promise.all([
        // --json: whatever ./data/receiver.db holds in the checkout, only stderr's first line matters.
        cli(['status', '--json'], { DATABSE_PATH: own }),
        cli(['status', '--json'], { DATABSE_PATH: own, DATABASE_PATH: join(dir, 'none.db') }),
        cli(['status', '--json', '--database', join(dir, 'none.db')], { DATABSE_PATH: own }),
      ]);
      expect(typo.stderr.startsWith(warning), typo.stderr).toBe(true);
      // DATABASE_PATH or --database given: no guess about the other variable.
      expect(given.stderr).not.toMatch(/misspelling/);
      expect(option.stderr).not.toMatch(/misspelling/);
    } finally {
      cleanup();
    }
  });

  it('does not take a variable CONFIG_FILE names (a sink header\'s DATABASE_AUTH) for a misspelt DATABASE_PATH, as serve does not', async () => {
    const { dir, cleanup } = tempDir('cli-database-named-');
    try {
      const sink = (headers: Record<string, unknown>) => ({ sinks: [{ name: 'crm', type: 'http', url: 'https://crm.example/hook', secret: { env: 'CRM_SECRET' }, headers }] });
      const naming = join(dir, 'naming.json');
      writeFileSync(naming, JSON.stringify(sink({ 'X-Db-Auth': { env: 'DATABASE_AUTH' } })));
      const other = join(dir, 'other.json');
      writeFileSync(other, JSON.stringify(sink({ 'X-Db-Auth': 'inline' })));
      const [named, unnamed] = await Promise.all([
        cli(['status', '--json'], { DATABASE_AUTH: 'token', CONFIG_FILE: naming }),
        cli(['status', '--json'], { DATABASE_AUTH: 'token', CONFIG_FILE: other }),
      ]);
      expect(named.stderr).not.toMatch(/misspelling/);
      // Not named by the file: still the server's near miss, and warned of.
      expect(unnamed.stderr).toMatch(/^warning: DATABASE_PATH is unset, so the database is \.\/data\/receiver\.db; DATABASE_AUTH is set: a misspelling of DATABASE_PATH\?$/m);
      expect(`${named.stdout}${named.stderr}${unnamed.stdout}${unnamed.stderr}`).not.toContain('token');
    } finally {
      cleanup();
    }
  });
});

describe('CLI on a database of another schema version', () => {
  it('an empty file (no schema yet) is said as such, not as an older receiver to stop, and left empty', async () => {
    const { dir, cleanup } = tempDir('cli-empty-');
    try {
      const db = join(dir, 'empty.db');
      writeFileSync(db, '');
      const r = await cli(['status', '--database', db]);
      expect({ code: r.code, stdout: r.stdout, stderr: r.stderr }).toEqual({
        code: 1,
        stdout: '',
        stderr: `error: the database at ${db} has no receiver schema yet (an empty file, or one never migrated): run \`migrate\`, or start the receiver, which migrates\n`,
      });
      expect(statSync(db).size).toBe(0);
      expect(existsSync(`${db}-wal`)).toBe(false);
    } finally {
      cleanup();
    }
  });

  /** A database at schema 7, as the version before this one left it, in rollback-journal mode (a copy, a backup). */
  function olderDatabase(dir: string): string {
    const db = join(dir, 'old.db');
    const sqlite = new BetterSqlite3(db);
    migrate(sqlite, readMigrations().filter((m) => m.version <= 7));
    sqlite.close();
    return db;
  }

  it('a command that refuses it leaves it as it was (not turned into WAL mode), and says to stop the older receiver before migrating', async () => {
    const { dir, cleanup } = tempDir('cli-older-');
    try {
      const db = olderDatabase(dir);
      const r = await cli(['replay', '--all', '--database', db]);
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(`error: the database at ${db} is at schema version 7, this build needs 11: stop the receiver running on it (an older version), then run \`migrate\`, or start the new version, which migrates\n`);
      const sqlite = new BetterSqlite3(db, { readonly: true });
      expect(sqlite.pragma('journal_mode', { simple: true })).toBe('delete');
      sqlite.close();
      expect(existsSync(`${db}-wal`)).toBe(false);
    } finally {
      cleanup();
    }
  });

  it('a rollback: commands run on a database whose newer migrations declare this build compatible', async () => {
    const { dir, cleanup } = tempDir('cli-newer-');
    try {
      const db = join(dir, 'newer.db');
      const sqlite = new BetterSqlite3(db);
      const all = readMigrations();
      const known = all.at(-1)!.version;
      migrate(sqlite, [...all, { version: known + 1, name: 'an_index', sql: 'CREATE INDEX later_idx ON events (delivery_id);', compatibleFrom: known }]);
      sqlite.close();
      const status = await cli(['status', '--json', '--database', db]);
      expect(status.code, status.stderr).toBe(0);
      const migrated = await cli(['migrate', '--database', db]);
      expect({ code: migrated.code, stdout: migrated.stdout }).toEqual({ code: 0, stdout: `${db} is up to date (schema version ${known + 1})\n` });
    } finally {
      cleanup();
    }
  });

  it('migrate refuses while a receiver holds the workers lock (an older version still running), and migrates once it is gone', async () => {
    const { dir, cleanup } = tempDir('cli-older-');
    try {
      const db = olderDatabase(dir);
      const running = acquireWorkersLock(db);
      const refused = await cli(['migrate', '--database', db]);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toBe(`error: a receiver is running on ${db} (it holds the workers lock): stop it, then run \`migrate\`, or start the new version, which migrates\n`);
      running.release();
      const done = await cli(['migrate', '--database', db]);
      expect(done.code, done.stderr).toBe(0);
      expect(done.stdout).toBe(`${db}: applied migrations 8, 9, 10, 11; schema version 11\n`);
      // Nothing to apply: said beside a running receiver, without the lock.
      const again = acquireWorkersLock(db);
      try {
        expect((await cli(['migrate', '--database', db])).stdout).toBe(`${db} is up to date (schema version 11)\n`);
      } finally {
        again.release();
      }
    } finally {
      cleanup();
    }
  });
});

describe('CLI output into a closed pipe', () => {
  it('output that cannot be written (a full disk: /dev/full) is a failure: exit 1, one line on stderr', async () => {
    const { dir, cleanup } = tempDir('cli-full-');
    try {
      const db = join(dir, 'r.db');
      expect((await cli(['migrate'], { DATABASE_PATH: db })).code).toBe(0);
      const full = openSync('/dev/full', 'w');
      const child = spawn(process.execPath, ['--import', `${ROOT}node_modules/tsx/dist/loader.mjs`, `${ROOT}src/cli/main.ts`, 'status'], {
        cwd: ROOT,
        env: { PATH: process.env.PATH ?? '', DATABASE_PATH: db },
        stdio: ['ignore', full, 'pipe'],
      });
      closeSync(full);
      let stderr = '';
      child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
      expect(await new Promise((r) => child.on('close', r))).toBe(1);
      expect(stderr).toMatch(/^error: cannot write to stdout: ENOSPC[^\n]*\n$/);
    } finally {
      cleanup();
    }
  });

  it('`status | head -0`: no stack trace, the command finishes with its own exit code', async () => {
    const { dir, cleanup } = tempDir('cli-epipe-');
    try {
      const db = join(dir, 'r.db');
      expect((await cli(['migrate'], { DATABASE_PATH: db })).code).toBe(0);
      const child = runTs('src/cli/main.ts', ['status'], { DATABASE_PATH: db });
      child.proc.stdout!.destroy(); // the reader is gone before the first line
      const { code } = await child.exited;
      expect(child.stderr.join('')).toBe('');
      expect(code).toBe(0);
    } finally {
      cleanup();
    }
  });
});
