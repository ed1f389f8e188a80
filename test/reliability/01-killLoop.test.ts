import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { freePort } from '../helpers/childServer.js';
import { newSecret } from '../helpers/signing.js';
import { count, sinkFileIds, stuckJobs, withDb } from './helpers/db.js';
import { deliver, makeClient, makeEvent, type EventKind } from './helpers/events.js';
import { startHiringStub } from './helpers/hiringStub.js';
import { startReceiverProcess, stopReceiverProcess, type ReceiverProcess } from './helpers/receiverProcess.js';
import { registerSecret, registerSensitive, reportFigures, seededRandom, sleep, suiteSeed, workspace } from './helpers/run.js';

// Sized for the 2-core CI machine: 1,500 events over about 15 s, 4 kills.
const EVENTS = 1500;
const STREAM_MS = 15_000;
const KILLS = 4;
const SENDERS = 16;
/** Jobs claimed by a killed process come back when their lease (60 s in src/main.ts) expires. */
const SETTLE_DEADLINE_MS = 90_000;
const TEST_TIMEOUT_MS = 150_000;

const { dir, cleanups } = workspace('reliability-kill-');

function kindOf(i: number): EventKind {
  return i % 5 === 0 ? 'interview.completed' : i % 5 === 1 ? 'application.status_changed' : 'application.created';
}

describe('kill loop', () => {
  it(
    `SIGKILL ${KILLS}x at random moments under a stream of ${EVENTS} redelivered-until-2xx events: every acknowledged event stored once, processed, in the file sink; no job stuck`,
    { timeout: TEST_TIMEOUT_MS },
    async () => {
      const seed = suiteSeed();
      const random = seededRandom(seed);
      const secret = newSecret();
      const apiKey = `sk-rel${seed}.killLoopKey${Math.floor(random() * 1e9)}`;
      registerSecret(secret);
      registerSensitive('api_key', apiKey);
      const stub = await startHiringStub();
      cleanups.push(() => stub.close());
      const dbPath = join(dir, 'receiver.db');
      const sinkPath = join(dir, 'archive.ndjson');
      const configPath = join(dir, 'config.json');
      writeFileSync(configPath, JSON.stringify({ sinks: [{ name: 'archive', type: 'file', path: sinkPath }] }));
      const port = await freePort();
      const env = {
        WEBHOOK_SECRET: secret,
        HIRING_API_URL: stub.url,
        HIRING_API_KEY: apiKey,
        CONFIG_FILE: configPath,
        DATABASE_PATH: dbPath,
        PORT: String(port),
      };
      let generation = 0;
      let receiver: ReceiverProcess = await startReceiverProcess(`kill-loop-${generation}`, env);
      cleanups.push(() => stopReceiverProcess(receiver));
      const url = receiver.url;
      const started = Date.now();

      // The service's behaviour: same event id on every retry, a fresh webhook-id,
      // until a 2xx comes back. Bounded by a deadline, so the test always ends.
      const events = Array.from({ length: EVENTS }, (_, i) => makeEvent(kindOf(i), i, `kill${seed}`));
      const acked = new Set<string>();
      const figures = { deliveries: 0, non2xx: 0, networkErrors: 0, answeredAfterCommit: 0 };
      const agent = makeClient(SENDERS);
      cleanups.push(() => agent.destroy());
      const senderDeadline = started + STREAM_MS + 45_000;
      let next = 0;
      const interval = STREAM_MS / EVENTS;
      const sender = async () => {
        while (next < events.length) {
          const i = next++;
          const env = events[i]!;
          const due = started + i * interval;
          if (due > Date.now()) await sleep(due - Date.now());
          for (let attempt = 1; Date.now() < senderDeadline; attempt++) {
            figures.deliveries++;
            try {
              const a = await deliver(agent, url, secret, env, 10_000);
              if (a.status >= 200 && a.status < 300) {
                acked.add(env.id as string);
                if ((JSON.parse(a.body) as { outcome: string }).outcome === 'duplicate') figures.answeredAfterCommit++;
                break;
              }
              figures.non2xx++;
            } catch {
              figures.networkErrors++; // killed mid-request, or not listening yet: not acknowledged
            }
            await sleep(Math.min(25 * attempt, 400));
          }
        }
      };

      // Kill at a random moment in each of KILLS equal slots of the stream (so kills are
      // at least a restart apart), then restart on the same file at once.
      const slot = (STREAM_MS - 1000) / KILLS;
      const killAt = Array.from({ length: KILLS }, (_, k) => 800 + k * slot + random() * (slot - 1500));
      const killer = async () => {
        for (const t of killAt) {
          await sleep(Math.max(0, started + t - Date.now()));
          receiver.proc.kill('SIGKILL');
          const exit = await receiver.exited;
          expect(exit.signal).toBe('SIGKILL');
          generation++;
          receiver = await startReceiverProcess(`kill-loop-${generation}`, env);
        }
      };
      await Promise.all([killer(), ...Array.from({ length: SENDERS }, sender)]);
      const streamMs = Date.now() - started;

      // Let the last receiver work until everything acknowledged is settled and in the file (bounded).
      const ackedIds = [...acked];
      const settleStarted = Date.now();
      // Ends 15 s before the test's timeout at the latest, so a receiver that never settles fails
      // on the assertions below, with its figures, rather than as a bare vitest timeout.
      const settleBoundMs = Math.min(SETTLE_DEADLINE_MS, TEST_TIMEOUT_MS - (settleStarted - started) - 15_000);
      let state = { settled: 0, inFile: 0, open: 0 };
      for (;;) {
        const fileIds = new Set(sinkFileIds(sinkPath));
        state = withDb(dbPath, (db) => ({
          settled: count(db, "SELECT COUNT(*) FROM event_processing WHERE state = 'settled'"),
          inFile: ackedIds.filter((id) => fileIds.has(id)).length,
          open: count(db, "SELECT COUNT(*) FROM jobs WHERE state IN ('pending', 'running')"),
        }));
        if ((state.settled >= ackedIds.length && state.inFile === ackedIds.length && state.open === 0) || Date.now() - settleStarted > settleBoundMs) break;
        await sleep(500);
      }
      const settleMs = Date.now() - settleStarted;
      // The receiver has idled: nothing may be left running on an expired lease or pending in the past.
      const stuck = withDb(dbPath, (db) => stuckJobs(db, new Date().toISOString()));
      expect(await stopReceiverProcess(receiver)).toEqual({ code: 0, signal: null });

      const fileIds = sinkFileIds(sinkPath);
      const fileSet = new Set(fileIds);
      const check = withDb(dbPath, (db) => {
        const stored = db.prepare('SELECT id FROM events').pluck().all() as string[];
        const storedSet = new Set(stored);
        const settledSet = new Set(db.prepare("SELECT event_id FROM event_processing WHERE state = 'settled'").pluck().all() as string[]);
        const processJobs = db.prepare("SELECT event_id, state FROM jobs WHERE kind = 'process_event'").all() as { event_id: string; state: string }[];
        const delivered = new Set(db.prepare("SELECT event_id FROM deliveries WHERE sink = 'archive' AND state = 'delivered'").pluck().all() as string[]);
        return {
          stored,
          notStored: ackedIds.filter((id) => !storedSet.has(id)),
          notSettled: ackedIds.filter((id) => !settledSet.has(id)),
          notDeliveredRow: ackedIds.filter((id) => !delivered.has(id)),
          // New events need no job: one is made only for a fold that failed (a kill rolls a fold back, it does not fail it).
          processJobs: processJobs.length,
          processJobsNotDone: processJobs.filter((j) => j.state !== 'done').length,
          jobsNotDone: db.prepare("SELECT kind, state, COUNT(*) AS n FROM jobs WHERE state != 'done' GROUP BY kind, state").all(),
          integrity: db.pragma('integrity_check', { simple: true }),
        };
      });
      const notInFile = ackedIds.filter((id) => !fileSet.has(id));
      const lost = new Set([...check.notStored, ...check.notSettled, ...notInFile]).size;
      reportFigures('kill-loop', {
        seed,
        kills: KILLS,
        kill_at_ms: killAt.map(Math.round),
        events_sent: events.length,
        deliveries: figures.deliveries,
        non_2xx: figures.non2xx,
        network_errors: figures.networkErrors,
        acknowledged: acked.size,
        acked_as_duplicate: figures.answeredAfterCommit,
        // Of the acknowledged events (the suite total's unit); rows: every event row, acknowledged or not.
        stored: ackedIds.length - check.notStored.length,
        rows: check.stored.length,
        processed: ackedIds.length - check.notSettled.length,
        delivered: ackedIds.length - notInFile.length,
        sink_lines: fileIds.length,
        sink_duplicate_lines: fileIds.length - fileSet.size,
        lost,
        stream_ms: streamMs,
        settle_ms: settleMs,
        stuck,
      });

      expect(acked.size).toBe(events.length); // the sender got every event in before its deadline
      expect(check.integrity).toBe('ok');
      expect(check.notStored).toEqual([]);
      expect(check.stored.length).toBe(acked.size); // once: no row beyond the events sent
      expect(check.notSettled).toEqual([]);
      expect(check.processJobsNotDone).toBe(0);
      expect(check.jobsNotDone).toEqual([]);
      expect(check.notDeliveredRow).toEqual([]);
      expect(notInFile).toEqual([]);
      expect([...fileSet].every((id) => acked.has(id))).toBe(true);
      expect(stuck).toMatchObject({ runningExpired: 0, pendingDue: 0, dead: 0, eventsNotTaken: 0 });
      expect(lost).toBe(0);
      // Every interview was fetched from the stub (processing really happened through the API).
      expect(new Set(stub.calls.map((c) => c.path)).size).toBe(events.filter((e) => e.event_type === 'interview.completed').length);
    },
  );
});
