/**
 * Replays the Dockerfile's build and runtime steps without a Docker engine
 * (CI machines have none), in a clean temporary folder:
 *   build stage:   COPY the sources, RUN npm ci / build / prune
 *   runtime stage: COPY --from=build the production files, apply ENV,
 *                  start ENTRYPOINT, run HEALTHCHECK, probe /readyz, send a
 *                  signed event, stop with SIGTERM and expect exit code 0.
 * The steps are read from the Dockerfile itself, so the two cannot drift:
 * an instruction this script cannot replay fails the run.
 *
 * Usage: npx tsx scripts/docker-dry-run.ts [--keep]
 */
import { spawn, spawnSync } from 'node:child_process';
import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import { cpSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { contextPath, leftOutOfContext, parseDockerignore } from './dockerignore.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const keep = process.argv.includes('--keep');

export interface Instruction {
  stage: string;
  op: string;
  args: string;
}

/** Dockerfile → instructions (continuations joined, comments dropped), tagged with their stage. */
export function parseDockerfile(text: string): Instruction[] {
  const logical = text.replace(/\\\r?\n/g, ' ').split(/\r?\n/);
  const out: Instruction[] = [];
  let stage = '';
  for (const raw of logical) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const m = /^(\w+)\s+(.*)$/.exec(line);
    if (!m) throw new Error(`cannot parse Dockerfile line: ${line}`);
    const op = m[1]!.toUpperCase();
    const args = m[2]!.trim();
    if (op === 'FROM') stage = /\sAS\s+(\S+)/i.exec(args)?.[1] ?? `stage${out.length}`;
    out.push({ stage, op, args });
  }
  return out;
}

/**
 * End of life of each Node.js release line (nodejs.org/en/about/previous-releases): after it, no
 * security fixes. A new line is added here before the Dockerfile may name it.
 */
const NODE_END_OF_LIFE: Record<number, string> = {
  18: '2025-04-30',
  20: '2026-04-30',
  21: '2024-06-01',
  22: '2027-04-30',
  23: '2025-06-01',
  24: '2028-04-30',
  25: '2026-06-01',
  26: '2029-04-30',
};

/** Does a package's `engines.node` (`20.x || 22.x`, `>=20`, `^20.19.0` alternatives) admit this major? */
function enginesAdmit(range: string, major: number): boolean {
  return range.split('||').some((alt) => {
    const m = /^\s*(>=|\^|~)?\s*(\d+)(?:\.(?:\d+|x))*\s*$/.exec(alt);
    if (!m) throw new Error(`cannot read the engines range "${range}"`);
    return m[1] === '>=' ? major >= Number(m[2]) : major === Number(m[2]);
  });
}

/**
 * What is wrong with the image's Node.js: its stages on different majors, a major the locked
 * better-sqlite3 (a native module built for one ABI) does not support, or one past its end of life
 * on `today`. Returns the major and the problems (none: fine).
 */
export function checkImageNode(steps: Instruction[], packageLock: string, today: Date): { major: number | null; problems: string[] } {
  const problems: string[] = [];
  const majors = steps
    .filter((s) => s.op === 'FROM')
    .map((s) => {
      const m = /^node:(\d+)[.-]/.exec(s.args);
      if (!m) problems.push(`FROM ${s.args} (stage ${s.stage}): not an official node:<major>-… image`);
      return m ? Number(m[1]) : null;
    });
  const distinct = [...new Set(majors.filter((m): m is number => m !== null))];
  if (distinct.length > 1) problems.push(`the stages use different Node.js majors (${distinct.join(', ')}): the image would run on another Node.js than the one it was installed and built with; keep both FROM lines on one`);
  const major = distinct.length === 1 ? distinct[0]! : null;
  if (major === null) return { major, problems };
  const lock = JSON.parse(packageLock) as { packages: Record<string, { version?: string; engines?: { node?: string } }> };
  const bs = lock.packages['node_modules/better-sqlite3'];
  if (bs?.engines?.node && !enginesAdmit(bs.engines.node, major)) problems.push(`Node.js ${major}: the locked better-sqlite3 ${bs.version} supports ${bs.engines.node}`);
  // From 24.19.0, node::ObjectWrap's destructor CHECKs for an entered Environment; better-sqlite3
  // before 13 (built on node::ObjectWrap, not Node-API) compiled against those headers aborts the
  // process with SIGABRT when V8 collects a Statement outside JS (nodejs/node#65446). Seen here:
  // Node 24.21.0 with 12.11.1 built from source aborted the vitest worker of signature.test.ts.
  if (major >= 24 && bs?.version && Number(bs.version.split('.')[0]) < 13) problems.push(`Node.js ${major}: better-sqlite3 ${bs.version} (before 13) aborts on Node.js 24.19 and later when a statement is garbage-collected (nodejs/node#65446); move to better-sqlite3 13 first`);
  const eol = NODE_END_OF_LIFE[major];
  if (!eol) problems.push(`Node.js ${major}: no end-of-life date known; add it to NODE_END_OF_LIFE (scripts/docker-dry-run.ts)`);
  else if (today.toISOString().slice(0, 10) > eol) problems.push(`Node.js ${major} reached end of life on ${eol} (no security fixes): move both FROM lines to a supported LTS line`);
  return { major, problems };
}

/** Runtime RUN steps that only make sense inside the image (root paths, users); reported, not replayed. */
const CONTAINER_ONLY = /^(apt-get|mkdir -p \/data|chown|ln -s .* \/usr\/local\/bin)/;

const log = (msg: string) => process.stdout.write(`${msg}\n`);

/** Bytes of the files below a folder (symbolic links not followed). */
function duBytes(dir: string): number {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .reduce((sum, e) => sum + lstatSync(join(e.parentPath, e.name)).size, 0);
}

async function waitFor(url: string, ms: number): Promise<Response> {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      const r = await fetch(url);
      if (r.ok) return r;
    } catch {
      // not up yet
    }
    if (Date.now() > deadline) throw new Error(`${url} not ready within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * The receiver's 'receiver listening' log line (JSON on its stdout, `out()` so far), with the ports
 * it took. Fails at once when the child exits first, and after `ms` (bounded).
 */
export async function listeningLine(out: () => string, child: { exitCode: number | null; signalCode: NodeJS.Signals | null }, ms: number): Promise<{ port: number; metricsPort?: number }> {
  const deadline = Date.now() + ms;
  for (;;) {
    for (const line of out().split('\n')) {
      if (!line.startsWith('{')) continue;
      try {
        const l = JSON.parse(line) as { msg?: unknown; port?: unknown; metricsPort?: unknown };
        if (l.msg === 'receiver listening' && typeof l.port === 'number') return { port: l.port, ...(typeof l.metricsPort === 'number' ? { metricsPort: l.metricsPort } : {}) };
      } catch {
        // a line cut by the pipe: read again next turn
      }
    }
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`the server exited (${child.exitCode ?? child.signalCode}) before it listened (its stderr is above)`);
    if (Date.now() > deadline) throw new Error(`no 'receiver listening' line within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function main(): Promise<void> {
  const steps = parseDockerfile(readFileSync(join(ROOT, 'Dockerfile'), 'utf8'));
  const ignore = existsSync(join(ROOT, '.dockerignore')) ? parseDockerignore(readFileSync(join(ROOT, '.dockerignore'), 'utf8')) : [];
  const node = checkImageNode(steps, readFileSync(join(ROOT, 'package-lock.json'), 'utf8'), new Date());
  if (node.problems.length > 0) throw new Error(`the image's Node.js: ${node.problems.join('; ')}`);
  log(`image runs Node.js ${node.major} in both stages (a supported line the locked better-sqlite3 supports)`);
  const hostMajor = Number(process.versions.node.split('.')[0]);
  if (hostMajor !== node.major) log(`note this replay runs on this machine's Node.js ${process.versions.node}, not the image's ${node.major}`);
  const tmp = mkdtempSync(join(tmpdir(), 'docker-dry-run-'));
  const dataDir = join(tmp, 'data');
  mkdirSync(dataDir);
  const stageRoot = (stage: string) => join(tmp, stage);
  const env: Record<string, Record<string, string>> = {};
  const workdir: Record<string, string> = {};
  let entrypoint: string[] = [];
  let cmd: string[] = [];
  let healthcheck: string[] = [];
  const inContainer = (stage: string, p: string) => (p.startsWith('/') ? join(stageRoot(stage), p) : resolve(workdir[stage]!, p));

  try {
    for (const { stage, op, args } of steps) {
      const wd = workdir[stage];
      switch (op) {
        case 'FROM':
          env[stage] = {};
          log(`\n== stage ${stage} (${args.split(/\s+/)[0]})`);
          break;
        case 'WORKDIR':
          workdir[stage] = inContainer(stage, args);
          mkdirSync(workdir[stage]!, { recursive: true });
          break;
        case 'ENV':
          for (const m of args.matchAll(/(\w+)=("[^"]*"|\S+)/g)) env[stage]![m[1]!] = m[2]!.replace(/^"|"$/g, '');
          break;
        case 'COPY': {
          const parts = args.split(/\s+/);
          const from = parts[0]!.startsWith('--from=') ? parts.shift()!.slice('--from='.length) : null;
          const dest = parts.pop()!;
          // From the build context: only what .dockerignore lets `docker build` send. A source it
          // leaves out whole fails the build there ("not found"), so it fails here; files it
          // leaves out of a folder are missing from the image, so they are here too.
          const leftOut = from ? [] : leftOutOfContext(ROOT, parts, ignore);
          const left = new Set(leftOut);
          const missing = parts.filter((src) => left.has(contextPath(src)));
          if (missing.length > 0) throw new Error(`COPY ${args}: ${missing.join(', ')} is not in the build context (.dockerignore leaves it out, or it does not exist): docker build would fail here`);
          for (const src of parts) {
            const source = from ? inContainer(from, src) : join(ROOT, src);
            const target = dest.endsWith('/') || parts.length > 1 ? join(inContainer(stage, dest), src.split('/').pop()!) : inContainer(stage, dest);
            cpSync(source, target, { recursive: true, filter: (p) => from !== null || !left.has(relative(ROOT, p).split(sep).join('/')) });
          }
          log(`COPY ${args}${leftOut.length > 0 ? `  (without ${leftOut.length} file(s) .dockerignore leaves out, e.g. ${leftOut.slice(0, 3).join(', ')})` : ''}`);
          break;
        }
        case 'RUN': {
          if (CONTAINER_ONLY.test(args)) {
            log(`skip RUN ${args.slice(0, 80)}  (inside the image only: system packages, /data, users)`);
            break;
          }
          log(`RUN ${args}`);
          const r = spawnSync('bash', ['-c', args], { cwd: wd, stdio: 'inherit', env: { ...process.env, ...env[stage] } });
          if (r.status !== 0) throw new Error(`RUN failed (${r.status}): ${args}`);
          break;
        }
        case 'ENTRYPOINT':
          entrypoint = JSON.parse(args) as string[];
          break;
        case 'CMD':
          cmd = JSON.parse(args) as string[];
          break;
        case 'HEALTHCHECK': {
          const m = /CMD\s+(\[.*\])\s*$/.exec(args);
          if (!m) throw new Error('HEALTHCHECK must use the exec form: CMD ["..."]');
          healthcheck = JSON.parse(m[1]!) as string[];
          break;
        }
        case 'USER':
        case 'VOLUME':
        case 'EXPOSE':
        case 'STOPSIGNAL':
          log(`note ${op} ${args}`);
          break;
        default:
          throw new Error(`instruction ${op} is not replayed by this script: extend it or simplify the Dockerfile`);
      }
    }

    const runtime = steps.at(-1)!.stage;
    const app = workdir[runtime]!;
    // pinned-node is a link (to tools/pinned-node) and .bin/node one to its platform build: a
    // dangling link counts too, so lstat rather than exists.
    for (const dev of ['typescript', 'vitest', 'tsx', 'pinned-node', '.bin/node']) {
      if (lstatSync(join(app, 'node_modules', dev), { throwIfNoEntry: false })) throw new Error(`dev dependency ${dev} is in the runtime image: prune failed`);
    }
    log(`\nruntime has production dependencies only (no typescript, vitest, tsx, nor the npm scripts' Node.js)`);
    // better-sqlite3 needs only its compiled module for this platform at run time (prebuilds/); its
    // SQLite and C++ sources and the other platforms' modules are 25 MB.
    const sqlite = join(app, 'node_modules', 'better-sqlite3');
    const modules = existsSync(join(sqlite, 'prebuilds')) ? readdirSync(join(sqlite, 'prebuilds')) : [];
    const leftovers = ['deps', 'src', 'build']
      .flatMap((d) => (existsSync(join(sqlite, d)) ? readdirSync(join(sqlite, d), { recursive: true, withFileTypes: true }) : []))
      .filter((e) => e.isFile())
      .map((e) => relative(sqlite, join(e.parentPath, e.name)));
    if (modules.length !== 1) throw new Error(`better-sqlite3 holds ${modules.length} compiled modules in the runtime image (${modules.join(', ') || 'none'}), not the one for its platform`);
    if (leftovers.length > 0) throw new Error(`better-sqlite3's sources are in the runtime image (${leftovers.length} files, e.g. ${leftovers.slice(0, 3).join(', ')})`);
    log(`runtime node_modules: ${(duBytes(join(app, 'node_modules')) / 1e6).toFixed(1)} MB; better-sqlite3 holds its compiled module for this platform (${modules[0]}), not its sources`);

    // What `fly secrets set` / `docker run -e` provide; /data is mapped to the temp folder.
    // PORT and the image's METRICS_PORT are 0 here: the receiver takes free ports as it listens
    // and names them in its 'receiver listening' line. A port chosen here and given up before
    // the child (a second or more to start on a busy machine) listens could be taken meanwhile
    // by anything on the machine (the kernel hands it out again for outgoing connections); the
    // child then failed to start and /readyz was waited for, or answered by another process.
    const withMetricsPort = Boolean(env[runtime]!.METRICS_PORT);
    const secret = `whsec_${randomBytes(24).toString('base64')}`;
    const runEnv: Record<string, string> = {
      PATH: process.env.PATH ?? '',
      ...env[runtime],
      DATABASE_PATH: (env[runtime]!.DATABASE_PATH ?? '/data/receiver.db').replace(/^\/data/, dataDir),
      PORT: '0',
      ...(withMetricsPort ? { METRICS_PORT: '0' } : {}),
      HOST: '127.0.0.1',
      WEBHOOK_SECRET: secret,
      HIRING_API_URL: 'http://127.0.0.1:9',
      HIRING_API_KEY: 'sk-dryrun.key',
    };
    // RUN_AS names the image's user; where this machine has no such user, the replay runs as the
    // current one, as it skips the image's other user steps.
    const runAs = runEnv.RUN_AS;
    if (runAs && !readFileSync('/etc/passwd', 'utf8').split('\n').some((l) => l.split(':')[0] === runAs)) {
      delete runEnv.RUN_AS;
      log(`note RUN_AS=${runAs}: no such user here; the replay runs as the current user`);
    }
    const argv = [...entrypoint, ...cmd];
    log(`start ${argv.join(' ')}  (in ${app})`);
    const child = spawn(argv[0]!, argv.slice(1), { cwd: app, env: runEnv, stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((res) => child.on('exit', (code) => res(code)));
    const listening = await listeningLine(() => out, child, 20_000);
    const port = listening.port;
    const metricsPort = withMetricsPort ? (listening.metricsPort ?? null) : null;
    if (withMetricsPort && metricsPort === null) throw new Error(`'receiver listening' names no metricsPort: ${JSON.stringify(listening)}`);
    // The HEALTHCHECK command and the CLI below read PORT as they would in the image.
    runEnv.PORT = String(port);
    if (metricsPort !== null) runEnv.METRICS_PORT = String(metricsPort);
    log(`listening on ${port}${metricsPort === null ? '' : `, /metrics on ${metricsPort}`}`);
    const base = `http://127.0.0.1:${port}`;

    const ready = await waitFor(`${base}/readyz`, 20_000);
    log(`GET /readyz → ${ready.status} ${JSON.stringify(await ready.json())}`);

    if (metricsPort !== null) {
      // /metrics on its own port, not on the webhook port `docker run -p 8080:8080` publishes.
      const onPublic = (await fetch(`${base}/metrics`)).status;
      const onOwn = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
      if (onPublic !== 404) throw new Error(`GET /metrics on the webhook port answered ${onPublic}, not 404`);
      if (onOwn.status !== 200 || !(await onOwn.text()).includes('receiver_deliveries_received_total')) throw new Error(`GET /metrics on METRICS_PORT answered ${onOwn.status}`);
      log(`GET /metrics → 404 on the webhook port, 200 on METRICS_PORT`);
    }

    const hc = spawnSync(healthcheck[0]!, healthcheck.slice(1), { cwd: app, env: runEnv });
    if (hc.status !== 0) throw new Error(`HEALTHCHECK command exited ${hc.status}`);
    log('HEALTHCHECK → exit 0');

    const body = JSON.stringify({ id: `evt_${randomUUID()}`, created_at: new Date().toISOString(), webhook_id: 'wh_dry', event_type: 'application.created', payload: { application: { id: randomUUID(), external_id: null } } });
    const msgId = `msg_${randomUUID()}`;
    const ts = Math.floor(Date.now() / 1000);
    const sig = createHmac('sha256', Buffer.from(secret.slice(6), 'base64')).update(`${msgId}.${ts}.${body}`).digest('base64');
    const res = await fetch(`${base}/webhooks`, { method: 'POST', body, headers: { 'webhook-id': msgId, 'webhook-timestamp': String(ts), 'webhook-signature': `v1,${sig}` } });
    const answer = await res.text();
    log(`POST /webhooks (signed) → ${res.status} ${answer}`);
    if (res.status !== 200) throw new Error('signed event not accepted');

    child.kill('SIGTERM');
    const code = await Promise.race([exited, new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 15_000))]);
    if (code !== 0) throw new Error(`server did not exit 0 on SIGTERM (got ${String(code)})`);
    if (!out.includes('receiver stopped')) throw new Error('no "receiver stopped" log line after SIGTERM');
    log('SIGTERM → drained, exit 0');

    // The CLI inside the image: `docker run IMAGE status --json` is ENTRYPOINT + these arguments.
    const cli = spawnSync(entrypoint[0]!, [...entrypoint.slice(1), 'status', '--json'], { cwd: app, env: runEnv, encoding: 'utf8' });
    if (cli.status !== 0) throw new Error(`CLI status exited ${cli.status}: ${cli.stderr}`);
    if (!cli.stdout.includes('application.created')) throw new Error(`CLI status does not show the stored event: ${cli.stdout.slice(0, 300)}`);
    log('CLI status --json → exit 0, shows the stored event');
    log('\ndocker dry run: OK');
  } finally {
    if (!keep) rmSync(tmp, { recursive: true, force: true });
    else log(`kept ${tmp}`);
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((err: unknown) => {
    process.stderr.write(`docker dry run FAILED: ${(err as Error).message}\n`);
    process.exit(1);
  });
}
