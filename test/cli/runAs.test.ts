import { chmodSync, chownSync, existsSync, mkdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { spawn, spawnSync } from 'node:child_process';
import { freePort, ROOT, runToExit } from '../helpers/childServer.js';
import { tempDir } from '../helpers/receiver.js';
import { newSecret } from '../helpers/signing.js';
import { cli } from './helpers.js';

// The Docker image starts as root with RUN_AS=node (src/cli/runAs.ts). Only root can run this.
const root = typeof process.getuid === 'function' && process.getuid() === 0;
const { dir, cleanup } = tempDir('run-as-');
afterAll(cleanup);
const NOBODY = 65534;

/** Whether this machine lets root bind-mount a folder in a mount namespace of its own (unshare, CAP_SYS_ADMIN). */
const canMount = root && spawnSync('unshare', ['--mount', '--propagation', 'private', 'sh', '-c', 'mount --bind "$0" "$0"', dir]).status === 0;

/**
 * The CLI with `volume` bind-mounted onto itself, a mount point as a Docker or Fly.io volume is, in
 * a mount namespace of the child's own: the mount ends with it, whatever happens to the test.
 */
async function cliOnVolume(volume: string, args: string[], env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  return runToExit('unshare', ['--mount', '--propagation', 'private', 'sh', '-c', 'mount --bind "$0" "$0" && exec "$@"', volume, process.execPath, '--import', `${ROOT}node_modules/tsx/dist/loader.mjs`, `${ROOT}src/cli/main.ts`, ...args], { env });
}

describe.skipIf(!root)('RUN_AS (the image starts as root, on a volume owned by root)', () => {
  it('gives the user the database folder and the database\'s own files, nothing else in it, then runs as that user', async () => {
    chmodSync(dir, 0o755);
    const folder = join(dir, 'volume');
    const db = join(folder, 'receiver.db');
    // What root left there: a database (a CLI run as root before), and a file that is not the database's.
    expect((await cli(['migrate'], { DATABASE_PATH: db })).code).toBe(0);
    writeFileSync(join(folder, 'other-data.txt'), 'not the receiver\'s');
    expect(statSync(db).uid).toBe(0);
    const r = await cli(['migrate', '--json'], { DATABASE_PATH: db, RUN_AS: 'nobody' });
    expect(r.code, r.stderr).toBe(0);
    expect(statSync(folder).uid).toBe(NOBODY);
    expect(statSync(db).uid).toBe(NOBODY);
    expect(statSync(join(folder, 'other-data.txt')).uid).toBe(0);
    // It ran as nobody: a database it creates (in a root-owned folder it was given) is nobody's from the start.
    const fresh = join(dir, 'fresh');
    mkdirSync(fresh);
    expect((await cli(['migrate'], { DATABASE_PATH: join(fresh, 'receiver.db'), RUN_AS: 'nobody' })).code).toBe(0);
    expect(statSync(join(fresh, 'receiver.db')).uid).toBe(NOBODY);
  });

  it('makes a database folder missing on a root-owned volume (DATABASE_PATH=/data/receiver/receiver.db) and gives it, as `mkdir -p` would for the user', async (ctx) => {
    // Before: the user could not create the folder in root's volume, and every start ended in EACCES.
    // The volume is a bind mount in a mount namespace of the child's own, which needs CAP_SYS_ADMIN.
    if (!canMount) return ctx.skip();
    chmodSync(dir, 0o755);
    const volume = join(dir, 'sub-volume');
    mkdirSync(volume);
    const db = join(volume, 'receiver', 'state', 'receiver.db');
    const r = await cliOnVolume(volume, ['migrate'], { DATABASE_PATH: db, RUN_AS: 'nobody' });
    expect(r.code, r.stderr).toBe(0);
    expect(statSync(db).uid).toBe(NOBODY);
    expect(statSync(join(volume, 'receiver', 'state')).uid).toBe(NOBODY);
    expect(statSync(join(volume, 'receiver')).uid).toBe(NOBODY);
    expect(statSync(volume).uid).toBe(0);
    // Not for a command that does not create the database, nor below a folder others may write to.
    const looked = join(dir, 'looked-sub');
    mkdirSync(looked);
    expect((await cliOnVolume(looked, ['status', '--database', join(looked, 'missing', 'r.db')], { RUN_AS: 'nobody' })).code).toBe(1);
    expect(existsSync(join(looked, 'missing'))).toBe(false);
    const open = join(dir, 'open-volume');
    mkdirSync(open);
    chmodSync(open, 0o777);
    expect((await cliOnVolume(open, ['migrate', '--database', join(open, 'missing', 'r.db')], { RUN_AS: 'nobody' })).code).toBe(0);
    expect(statSync(join(open, 'missing')).uid).toBe(NOBODY);
    expect(statSync(open).uid).toBe(0);
  });

  it('makes no folder below a folder that is not a volume, nor in /: a mistyped DATABASE_PATH stops the start naming the folder that does not exist', async () => {
    // Before: /dta/receiver.db (for /data) or /data/receiver.db with the volume at /mnt/data was
    // made on the container's own layer, and every event was lost at the next deploy.
    chmodSync(dir, 0o755);
    const image = join(dir, 'image-folder');
    mkdirSync(image);
    for (const db of [join(image, 'dta', 'receiver.db'), join(image, 'data', 'state', 'receiver.db')]) {
      const r = await cli(['migrate'], { DATABASE_PATH: db, RUN_AS: 'nobody' });
      expect(r.code).toBe(1);
      const missing = dirname(db);
      const blocked = join(image, relative(image, db).split('/')[0]!);
      expect(r.stderr).toBe(
        `error: cannot open the database at ${db}: the folder ${missing} does not exist, and this process (uid ${NOBODY}) may not create ${blocked} in ${image} (EACCES); ` +
          'is the path mistyped, or the volume mounted at another folder? Give the path of a folder that exists or that this process may create\n',
      );
      expect(existsSync(blocked)).toBe(false);
    }
    expect(statSync(image).uid).toBe(0);
    // `/` is a mount point, and the one folder never taken for a volume.
    const top = `/receiver-test-typo-${process.pid}`;
    let served;
    try {
      served = await cli(['serve'], { DATABASE_PATH: `${top}/receiver.db`, RUN_AS: 'nobody', WEBHOOK_SECRET: newSecret(), HIRING_API_URL: 'http://127.0.0.1:9', HIRING_API_KEY: 'sk-test.unused', PORT: '0', HOST: '127.0.0.1' });
      expect(existsSync(top)).toBe(false);
    } finally {
      rmSync(top, { recursive: true, force: true });
    }
    expect(served.code).toBe(1);
    expect(served.stderr).toContain(`fatal: cannot open the database at ${top}/receiver.db (DATABASE_PATH): the folder ${top} does not exist, and this process (uid ${NOBODY}) may not create ${top} in / (EACCES)`);
  });

  it('warns at a start that creates the database in a folder not on a volume (the container\'s own file system, lost with it), not for a read', async () => {
    // The image makes /data: on a platform that does not mount a volume there (Fly.io without
    // [[mounts]], a Kubernetes pod without one: neither reads the image's VOLUME), every event was
    // stored on the container's own file system without a word, and lost with the next container.
    // Needs no mount of its own: run wherever root runs the rest.
    chmodSync(dir, 0o755);
    const layer = join(dir, 'container-layer');
    mkdirSync(layer);
    // What follows needs the temp folder on the root file system, as a container's own is: a
    // tmpfs /tmp is a mount point, where the receiver rightly says nothing.
    expect(statSync(layer).dev, `${layer} is on a file system of its own (set TMPDIR to a folder on /)`).toBe(statSync('/').dev);
    const r = await cli(['migrate'], { DATABASE_PATH: join(layer, 'receiver.db'), RUN_AS: 'nobody' });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain(`warning: the database folder ${layer} is on the container's own file system, not on a volume (no mount point from it up to /)`);
    expect(r.stderr).toContain('Fly.io: [[mounts]] in fly.toml');
    // The folder it names, not the image's /data: `-v <volume>:/data` would not move this database.
    expect(r.stderr).toContain(`Docker: -v <volume>:${layer})`);
    const read = await cli(['status'], { DATABASE_PATH: join(layer, 'receiver.db'), RUN_AS: 'nobody' });
    expect(read.code, read.stderr).toBe(0);
    expect(read.stderr).not.toContain('not on a volume');
  });

  it('warns too when the image runs as another user (docker run --user, a pod\'s runAsUser): RUN_AS set, nothing to drop', async () => {
    // The image sets RUN_AS; started as uid 65534 it gives and drops nothing, and said nothing
    // either while the database went to the container's own file system.
    chmodSync(dir, 0o755);
    const layer = join(dir, 'layer-other-user');
    mkdirSync(layer);
    chownSync(layer, NOBODY, NOBODY);
    expect(statSync(layer).dev, `${layer} is on a file system of its own (set TMPDIR to a folder on /)`).toBe(statSync('/').dev);
    const entry = [process.execPath, '--import', `${ROOT}node_modules/tsx/dist/loader.mjs`, `${ROOT}src/cli/main.ts`] as const;
    const r = await runToExit(entry[0], [...entry.slice(1), 'migrate'], { env: { DATABASE_PATH: join(layer, 'receiver.db'), RUN_AS: 'node', HOME: layer }, uid: NOBODY, gid: NOBODY });
    expect(r.code, r.stderr).toBe(0);
    expect(statSync(join(layer, 'receiver.db')).uid).toBe(NOBODY);
    expect(r.stderr).toContain(`warning: the database folder ${layer} is on the container's own file system, not on a volume`);
    // Not for a read, nor without RUN_AS (a developer's shell).
    const read = await runToExit(entry[0], [...entry.slice(1), 'status'], { env: { DATABASE_PATH: join(layer, 'receiver.db'), RUN_AS: 'node', HOME: layer }, uid: NOBODY, gid: NOBODY });
    expect(read.code, read.stderr).toBe(0);
    expect(read.stderr).not.toContain('not on a volume');
    const plain = await runToExit(entry[0], [...entry.slice(1), 'migrate'], { env: { DATABASE_PATH: join(layer, 'receiver.db'), HOME: layer }, uid: NOBODY, gid: NOBODY });
    expect(plain.code, plain.stderr).toBe(0);
    expect(plain.stderr).not.toContain('not on a volume');
  });

  it('says nothing of the kind for a folder on a volume, or below one (DATABASE_PATH=/data/state/receiver.db)', async (ctx) => {
    if (!canMount) return ctx.skip();
    chmodSync(dir, 0o755);
    const volume = join(dir, 'mounted-volume');
    mkdirSync(join(volume, 'state'), { recursive: true });
    for (const db of [join(volume, 'receiver.db'), join(volume, 'state', 'receiver.db')]) {
      const v = await cliOnVolume(volume, ['migrate'], { DATABASE_PATH: db, RUN_AS: 'nobody' });
      expect(v.code, v.stderr).toBe(0);
      expect(v.stderr).not.toContain('not on a volume');
    }
  });

  it('--database names the folder it gives, not DATABASE_PATH', async () => {
    const envFolder = join(dir, 'env');
    const flagFolder = join(dir, 'flag');
    mkdirSync(envFolder);
    mkdirSync(flagFolder);
    const r = await cli(['migrate', '--database', join(flagFolder, 'r.db')], { DATABASE_PATH: join(envFolder, 'r.db'), RUN_AS: 'nobody' });
    expect(r.code, r.stderr).toBe(0);
    expect(statSync(flagFolder).uid).toBe(NOBODY);
    expect(statSync(envFolder).uid).toBe(0);
  });

  it('a command that does not create the database gives no folder, and no command gives a shared sticky folder such as /tmp', async () => {
    // `status --database /tmp/copy.db` handed /tmp to the user before.
    const looked = join(dir, 'looked-at');
    mkdirSync(looked);
    const status = await cli(['status', '--database', join(looked, 'copy.db')], { RUN_AS: 'nobody' });
    expect(status.code).toBe(1);
    expect(status.stderr).toMatch(/^error: no database at /);
    expect(statSync(looked).uid).toBe(0);
    const shared = join(dir, 'shared-tmp');
    mkdirSync(shared);
    chmodSync(shared, 0o1777);
    expect((await cli(['migrate', '--database', join(shared, 'r.db')], { RUN_AS: 'nobody' })).code).toBe(0);
    expect(statSync(shared).uid).toBe(0);
    expect(statSync(join(shared, 'r.db')).uid).toBe(NOBODY);
  });

  it('leaves a relative database path (the working directory: the code in the image) and a linked folder alone', async () => {
    // The working directory holds what root runs at the next start: never given away.
    const app = join(dir, 'app');
    mkdirSync(app);
    writeFileSync(join(app, 'code.js'), '');
    const child = spawn(process.execPath, ['--import', `${ROOT}node_modules/tsx/dist/loader.mjs`, `${ROOT}src/cli/main.ts`, 'migrate'], {
      cwd: app,
      env: { PATH: process.env.PATH ?? '', DATABASE_PATH: 'receiver.db', RUN_AS: 'nobody' },
      stdio: 'ignore',
    });
    // As nobody, it cannot create a database in root's folder: it fails, having given nothing away.
    expect(await new Promise((r) => child.on('exit', r))).toBe(1);
    // A folder reached through a link: the link could point anywhere (a victim's files).
    const victim = join(dir, 'victim');
    mkdirSync(victim);
    writeFileSync(join(victim, 'receiver.db'), '');
    const volume = join(dir, 'linked-volume');
    mkdirSync(volume);
    symlinkSync(victim, join(volume, 'db'));
    await cli(['status'], { DATABASE_PATH: join(volume, 'db', 'receiver.db'), RUN_AS: 'nobody' });
    expect(statSync(victim).uid).toBe(0);
    expect(statSync(join(victim, 'receiver.db')).uid).toBe(0);
    expect(statSync(app).uid).toBe(0);
    expect(statSync(join(app, 'code.js')).uid).toBe(0);
  });

  it('the server started directly (node dist/main.js) drops too', async () => {
    const folder = join(dir, 'direct');
    mkdirSync(folder);
    const db = join(folder, 'receiver.db');
    const child = spawn(process.execPath, ['--import', `${ROOT}node_modules/tsx/dist/loader.mjs`, `${ROOT}src/main.ts`], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', DATABASE_PATH: db, RUN_AS: 'nobody', WEBHOOK_SECRET: newSecret(), HIRING_API_URL: 'http://127.0.0.1:9', HIRING_API_KEY: 'sk-test.unused', PORT: String(await freePort()), HOST: '127.0.0.1', WORKER_CONCURRENCY: '0' },
      stdio: 'ignore',
    });
    try {
      const deadline = Date.now() + 15_000;
      while (!existsSync(`${db}-ingest-wait`) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      expect(statSync(db).uid).toBe(NOBODY);
      expect(statSync(`${db}-ingest-wait`).uid).toBe(NOBODY);
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) => child.on('exit', r));
    }
  });

  it('a database file left read-only (chmod 444) stops the start naming it and why; once fixed, the next start works and its side files are writable again', async () => {
    chmodSync(dir, 0o755);
    const folder = join(dir, 'readonly');
    mkdirSync(folder);
    const db = join(folder, 'receiver.db');
    expect((await cli(['migrate'], { DATABASE_PATH: db, RUN_AS: 'nobody' })).code).toBe(0);
    // Stopped cleanly: no -wal or -shm beside it, so a start that opened it would create them.
    const closing = new BetterSqlite3(db);
    closing.pragma('wal_checkpoint(TRUNCATE)');
    closing.close();
    expect([existsSync(`${db}-wal`), existsSync(`${db}-shm`)]).toEqual([false, false]);
    chmodSync(db, 0o444);
    const env = { DATABASE_PATH: db, RUN_AS: 'nobody', WEBHOOK_SECRET: newSecret(), HIRING_API_URL: 'http://127.0.0.1:9', HIRING_API_KEY: 'sk-test.unused', HOST: '127.0.0.1' };
    const refused = await cli(['serve'], { ...env, PORT: String(await freePort()) }, 20_000);
    expect(refused.code).toBe(1);
    // This folder is not a mount point: the start also warns that it is not on a volume.
    expect(refused.stderr.replace(/^warning: .* not on a volume .*\n/m, '')).toBe(
      `fatal: cannot write the database at ${db} (DATABASE_PATH): the file is read-only to this process (the receiver runs as uid ${NOBODY}); the receiver writes it, and SQLite needs the folder writable too for its -wal and -shm\n`,
    );
    // Nothing was made read-only beside it: fixing the file itself is enough.
    for (const side of ['-wal', '-shm']) expect(existsSync(`${db}${side}`), side).toBe(false);
    chmodSync(db, 0o600);
    const port = await freePort();
    const child = spawn(process.execPath, ['--import', `${ROOT}node_modules/tsx/dist/loader.mjs`, `${ROOT}src/cli/main.ts`, 'serve'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', ...env, PORT: String(port) },
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    try {
      const deadline = Date.now() + 15_000;
      while (!out.includes('"msg":"workers started"') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      expect(out).toContain('"msg":"workers started"');
      expect(out).not.toContain('ingest-wait file unavailable');
      for (const side of ['-ingest-wait', '-workers-lock']) expect(statSync(`${db}${side}`).mode & 0o600, side).toBe(0o600);
      expect((await fetch(`http://127.0.0.1:${port}/readyz`)).status).toBe(200);
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) => child.on('exit', r));
    }
  });

  it('a -wal and -shm another user made stop the start with a message naming the file and its owner', async () => {
    const db = join(dir, 'others-sidecars', 'receiver.db');
    expect((await cli(['migrate'], { DATABASE_PATH: db })).code).toBe(0);
    // What a reader running as another user leaves when it opens the database while nothing else
    // has it open: an empty -wal and a -shm, its own, in its own group (RUN_AS gives the user only
    // root's files). SQLite alone says "unable to open database file", naming nothing.
    const other = 4242;
    for (const side of ['-wal', '-shm']) {
      writeFileSync(`${db}${side}`, side === '-shm' ? Buffer.alloc(32768) : '', { mode: 0o600 });
      chownSync(`${db}${side}`, other, other);
    }
    const env = { WEBHOOK_SECRET: newSecret(), HIRING_API_URL: 'http://127.0.0.1:9', HIRING_API_KEY: 'sk-test.unused', PORT: '0', HOST: '127.0.0.1' };
    const r = await cli(['serve'], { ...env, DATABASE_PATH: db, RUN_AS: 'nobody' });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`${db}-wal is not readable and writable by this process (uid ${NOBODY}); it belongs to uid ${other}, gid ${other}, mode 0600`);
    expect(r.stderr).toMatch(/setgid/);
  });

  it('a RUN_AS user that does not exist stops it with one line', async () => {
    const r = await cli(['status'], { DATABASE_PATH: join(dir, 'x.db'), RUN_AS: 'no-such-user' });
    expect(r).toMatchObject({ code: 1, stderr: 'fatal: RUN_AS: no user named "no-such-user" in /etc/passwd\n' });
  });
});
