import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkImageNode, listeningLine, parseDockerfile } from '../../scripts/docker-dry-run.js';
import { isIgnored, leftOutOfContext, parseDockerignore } from '../../scripts/dockerignore.js';
import { loadConfig } from '../../src/config/loadConfig.js';
import { freePort, ROOT, runTs, waitForHttp } from '../helpers/childServer.js';
import { readFlyToml, type TomlTable } from '../helpers/flyToml.js';
import { newSecret } from '../helpers/signing.js';

const dockerfile = parseDockerfile(readFileSync(`${ROOT}Dockerfile`, 'utf8'));
const runtime = dockerfile.filter((i) => i.stage === dockerfile.at(-1)!.stage);
/** The sources of the COPY steps that take from the build context (not --from a stage). */
const copiedFromContext = dockerfile.filter((i) => i.op === 'COPY' && !i.args.startsWith('--from')).flatMap((i) => i.args.split(/\s+/).slice(0, -1));
const fly = readFileSync(`${ROOT}fly.toml`, 'utf8');
const lock = readFileSync(`${ROOT}package-lock.json`, 'utf8');

describe('Dockerfile', () => {
  it('builds in one stage and runs in a slim second stage with production dependencies only', () => {
    const stages = dockerfile.filter((i) => i.op === 'FROM');
    expect(stages).toHaveLength(2);
    expect(stages[1]!.args).toMatch(/slim/);
    const buildRuns = dockerfile.filter((i) => i.stage === 'build' && i.op === 'RUN').map((i) => i.args);
    // No install scripts in the image: better-sqlite3's (node-gyp's default) would need Python and
    // make; the module it ships is kept for this platform only, after the prune. No optional
    // packages: dev tools' platform builds, the npm scripts' own Node.js among them.
    expect(buildRuns).toEqual([
      'npm ci --no-audit --no-fund --ignore-scripts --omit=optional',
      'npm run build',
      expect.stringMatching(/^npm prune --omit=dev/),
      expect.stringMatching(/^cd node_modules\/better-sqlite3 && .*find prebuilds -type f ! -name "\$keep" -delete && test -f "prebuilds\/\$keep"$/),
    ]);
  });

  it.skipIf(process.platform === 'win32')('fails the build with a sentence naming the platform where better-sqlite3 ships no compiled module for it', () => {
    // linux/arm/v7, ppc64le, s390x: Debian images Docker builds, for which getPrebuildPath() is null.
    // The step runs as the image would, on a copy of the package (it deletes files), as linux-arm by
    // a preload.
    const step = dockerfile.find((i) => i.stage === 'build' && i.op === 'RUN' && i.args.startsWith('cd node_modules/better-sqlite3'))!.args;
    const dir = mkdtempSync(join(tmpdir(), 'dockerfile-keep-'));
    try {
      cpSync(`${ROOT}node_modules/better-sqlite3`, join(dir, 'node_modules', 'better-sqlite3'), { recursive: true });
      const preload = join(dir, 'arm.cjs');
      writeFileSync(preload, "Object.defineProperty(process, 'platform', { value: 'linux' });\nObject.defineProperty(process, 'arch', { value: 'arm' });\n");
      const run = spawnSync('sh', ['-c', step], {
        cwd: dir,
        encoding: 'utf8',
        timeout: 20_000,
        env: { PATH: `${dirname(process.execPath)}${delimiter}${process.env.PATH ?? ''}`, NODE_OPTIONS: `--require ${preload}` },
      });
      expect(run.status).not.toBe(0);
      expect(run.stderr).toContain('better-sqlite3 ships no compiled module for linux-arm: build the image for linux/amd64 or linux/arm64');
      // It stopped before deleting anything.
      expect(existsSync(join(dir, 'node_modules', 'better-sqlite3', 'prebuilds', 'linux-x64.node'))).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('runs as the non-root node user (dropped to at start, RUN_AS) with the database on /data, port 8080 and a health check on /healthz', () => {
    // Not USER node: a volume mounted from outside is root's; the process chowns it, then drops.
    expect(runtime.find((i) => i.op === 'USER')).toBeUndefined();
    expect(runtime.find((i) => i.op === 'VOLUME')?.args).toContain('/data');
    const env = runtime.filter((i) => i.op === 'ENV').map((i) => i.args).join(' ');
    expect(env).toContain('RUN_AS=node');
    expect(env).toContain('DATABASE_PATH=/data/receiver.db');
    expect(env).toContain('PORT=8080');
    // /metrics off the published webhook port, as on Fly (it names sources and sinks).
    expect(env).toContain('METRICS_PORT=9091');
    expect(runtime.find((i) => i.op === 'EXPOSE')?.args).toBe('8080');
    expect(runtime.find((i) => i.op === 'HEALTHCHECK')?.args).toContain('/healthz');
    expect(runtime.find((i) => i.op === 'STOPSIGNAL')?.args).toBe('SIGTERM');
  });
});

describe("the image's Node.js", () => {
  const on = (date: string, text: string) => checkImageNode(parseDockerfile(text), lock, new Date(date));

  it('is one supported LTS line in both stages, which the locked better-sqlite3 supports', () => {
    // 2026-11-27: Node.js 22 (LTS until 2027-04-30), with better-sqlite3 13.
    expect(on('2026-11-27T12:00:00Z', readFileSync(`${ROOT}Dockerfile`, 'utf8'))).toEqual({ major: 22, problems: [] });
  });

  it('names a major past its end of life, stages on different majors, or one better-sqlite3 does not support', () => {
    const two = (a: string, b: string) => `FROM node:${a}-bookworm-slim AS build\nRUN true\nFROM node:${b}-bookworm-slim AS runtime\n`;
    expect(on('2026-11-27', two('22', '22')).problems).toEqual([]);
    expect(on('2027-05-01', two('22', '22')).problems).toEqual(['Node.js 22 reached end of life on 2027-04-30 (no security fixes): move both FROM lines to a supported LTS line']);
    expect(on('2026-11-27', two('22', '24')).problems[0]).toMatch(/different Node.js majors \(22, 24\)/);
    // better-sqlite3 13 is Node-API 10: Node.js 20 has 9.
    expect(on('2026-04-01', two('20', '20')).problems).toEqual([expect.stringMatching(/^Node.js 20: the locked better-sqlite3 13\.\S+ supports >=22$/)]);
    expect(on('2026-11-27', two('28', '28')).problems).toContain('Node.js 28: no end-of-life date known; add it to NODE_END_OF_LIFE (scripts/docker-dry-run.ts)');
  });

  it('is refused on Node.js 24 and later with a better-sqlite3 before 13, which aborts there when a statement is collected', () => {
    const lock12 = JSON.stringify({ packages: { 'node_modules/better-sqlite3': { version: '12.11.1', engines: { node: '20.x || 22.x || 23.x || 24.x || 25.x || 26.x' } } } });
    const steps = parseDockerfile('FROM node:24-bookworm-slim AS build\nRUN true\nFROM node:24-bookworm-slim AS runtime\n');
    expect(checkImageNode(steps, lock12, new Date('2026-11-27')).problems).toEqual([expect.stringMatching(/^Node.js 24: better-sqlite3 12\.11\.1 \(before 13\) aborts/)]);
  });
});

describe('the Docker dry run (npm run test:docker)', () => {
  it('takes the ports the receiver listens on (PORT=0) from its log line, and stops waiting when it exits first', async () => {
    const running = { exitCode: null, signalCode: null };
    const listening = JSON.stringify({ level: 30, port: 40_001, host: '127.0.0.1', metricsPort: 40_002, msg: 'receiver listening' });
    expect(await listeningLine(() => `{"level":30,"msg":"database migrated"}\n${listening}\n`, running, 1_000)).toEqual({ port: 40_001, metricsPort: 40_002 });
    const started = Date.now();
    await expect(listeningLine(() => 'fatal: PORT: in use\n', { exitCode: 1, signalCode: null }, 20_000)).rejects.toThrow('the server exited (1) before it listened');
    expect(Date.now() - started).toBeLessThan(10_000);
    await expect(listeningLine(() => '', running, 150)).rejects.toThrow("no 'receiver listening' line within 150 ms");
  });
});

describe('.dockerignore', () => {
  it('keeps local databases (candidate data), dependencies and build output out of the build context', () => {
    // Read as Docker reads it: the paths themselves are left out, whatever the lines say (a line
    // alone could be taken back by a later `!` one).
    const rules = parseDockerignore(readFileSync(`${ROOT}.dockerignore`, 'utf8'));
    // **/: Docker matches a pattern without it at the top of the context only (a backup in ./backups/ was sent).
    const kept = ['node_modules/hono/package.json', 'dist/main.js', 'data/receiver.db', 'receiver.db', 'backups/receiver-1.db', 'backups/receiver-1.db-wal', 'data/receiver.db.partial-1', '.env', 'deploy/.env', '.git/HEAD'];
    expect(kept.filter((path) => !isIgnored(rules, path)), 'sent to docker build').toEqual([]);
    // Nothing the Dockerfile copies is left out, read as Docker reads the patterns (not only a
    // line equal to a COPY source: `**/*.sql` would leave every migration out of the image).
    expect(leftOutOfContext(ROOT, copiedFromContext, rules)).toEqual([]);
  });

  it('is read as Docker reads it: whole paths from the root, ** across folders, parents, ! exceptions, the last rule deciding', () => {
    const rules = parseDockerignore('# a comment\n**/*.sql\n/test/\n*.json\n!package.json\ndata\n\n');
    expect(isIgnored(rules, 'migrations/001_ingest.sql')).toBe(true);
    expect(isIgnored(rules, 'top.sql')).toBe(true);
    expect(isIgnored(rules, 'test/deploy/x.ts')).toBe(true);
    expect(isIgnored(rules, 'src/test/x.ts')).toBe(false);
    expect(isIgnored(rules, 'package-lock.json')).toBe(true);
    expect(isIgnored(rules, 'package.json')).toBe(false);
    expect(isIgnored(rules, 'src/a.json')).toBe(false);
    expect(isIgnored(rules, 'data/receiver.db')).toBe(true);
    expect(isIgnored(rules, 'src/data/x.ts')).toBe(false);
    // What the Dockerfile copies, against such a file: every migration and the lockfile are out.
    const out = leftOutOfContext(ROOT, copiedFromContext, rules);
    expect(out).toContain('package-lock.json');
    expect(out).toContain('migrations/001_ingest.sql');
    expect(out.filter((f) => f.startsWith('src/'))).toEqual([]);
    expect(leftOutOfContext(ROOT, ['src'], parseDockerignore('src\n'))).toEqual(['src']);
    expect(leftOutOfContext(ROOT, ['no-such-file'], [])).toEqual(['no-such-file']);
  });
});

describe('fly.toml', () => {
  // Read as flyctl reads it: a line commented out is not configuration (the regular expressions
  // over the text these tests used took `# destination = "/data"` for a mount).
  const toml = readFlyToml(fly);
  const env = toml.env as Record<string, string>;
  const service = toml.http_service as TomlTable;
  // fly.toml's [env], with the secrets `fly secrets set` adds, is a configuration the receiver takes.
  const config = loadConfig({ ...env, WEBHOOK_SECRET: newSecret(), HIRING_API_URL: 'https://h.example', HIRING_API_KEY: 'sk-a.b' });

  it('keeps the database, its -wal and -shm on the volume it mounts', () => {
    const mounts = toml.mounts as TomlTable[] | undefined;
    expect(mounts, 'no [[mounts]]: the database would be on the machine\'s own disk, lost at the next deploy').toHaveLength(1);
    const destination = String(mounts![0]!.destination);
    expect(config.databasePath).toBe('/data/receiver.db');
    // SQLite keeps the -wal and -shm beside the file: the folder must be the volume or below it.
    expect(`${dirname(config.databasePath)}/`.startsWith(`${destination.replace(/\/$/, '')}/`), `${config.databasePath} is not on the volume at ${destination}`).toBe(true);
  });

  it('serves the receiver\'s port over forced HTTPS, checks /readyz, keeps the one machine running', () => {
    expect(service.internal_port).toBe(config.port);
    expect(service.force_https).toBe(true);
    expect(service.auto_stop_machines).toBe('off');
    expect(service.min_machines_running).toBe(1);
    expect((service.checks as TomlTable[]).map((c) => c.path)).toEqual(['/readyz']);
  });

  it('stops with SIGTERM and gives the receiver longer than its own SHUTDOWN_GRACE_MS before the SIGKILL', () => {
    expect(toml.kill_signal).toBe('SIGTERM');
    const m = /^(\d+)s$/.exec(String(toml.kill_timeout));
    const killMs = typeof toml.kill_timeout === 'number' ? toml.kill_timeout * 1000 : Number(m?.[1]) * 1000;
    expect(killMs).toBeGreaterThan(config.shutdownGraceMs);
  });

  it('serves /metrics on METRICS_PORT, scraped by Fly there, not on the public service port', () => {
    expect(config.metricsPort).toBe(9091);
    expect(toml.metrics).toEqual({ port: config.metricsPort, path: '/metrics' });
    expect(config.metricsPort).not.toBe(service.internal_port);
  });

  it("listens where Fly reaches it: IPv4 for Fly Proxy and IPv6 for the private network (<app>.internal)", async () => {
    const [port, metricsPort] = [await freePort(), await freePort()];
    const dir = mkdtempSync(join(tmpdir(), 'fly-host-'));
    const child = runTs('src/cli/main.ts', ['serve'], { ...env, PORT: String(port), METRICS_PORT: String(metricsPort), DATABASE_PATH: join(dir, 'r.db'), LOG_LEVEL: 'warn', WEBHOOK_SECRET: newSecret(), HIRING_API_URL: 'http://127.0.0.1:9', HIRING_API_KEY: 'sk-a.b' });
    try {
      await waitForHttp(`http://127.0.0.1:${port}/healthz`, undefined, child);
      const status = (url: string) => fetch(url).then((r) => r.status, (e: Error) => `${(e.cause as Error | undefined)?.message ?? e.message}`);
      expect(await status(`http://127.0.0.1:${port}/healthz`)).toBe(200);
      expect(await status(`http://[::1]:${port}/healthz`)).toBe(200);
      expect(await status(`http://127.0.0.1:${metricsPort}/metrics`)).toBe(200);
      expect(await status(`http://[::1]:${metricsPort}/metrics`)).toBe(200);
    } finally {
      child.proc.kill('SIGTERM');
      await child.exited;
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('holds no secret values', () => {
    expect(fly).not.toMatch(/whsec_[A-Za-z0-9+/]{8}/);
    expect(fly).not.toMatch(/sk-[^.\s"]+\.[^\s"]+/);
  });
});
