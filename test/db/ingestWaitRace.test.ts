import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { afterAll, describe, expect, it, vi } from 'vitest';

// Runs a second opener between the first opener's fstat (which saw the new file empty) and its
// initialisation of the file: what two processes starting together on one database can do.
const between: { once?: () => void } = {};
vi.mock('node:fs', async (original) => {
  const fs = await original<typeof import('node:fs')>();
  return {
    ...fs,
    fstatSync: ((...args: Parameters<typeof fs.fstatSync>) => {
      const stats = fs.fstatSync(...args);
      const run = between.once;
      between.once = undefined;
      run?.();
      return stats;
    }) as typeof fs.fstatSync,
  };
});

const dir = mkdtempSync(join(tmpdir(), 'ingest-wait-race-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('the ingest-wait file created by two processes at once', () => {
  it('the later initialisation does not clear a "waiting" the other wrote meanwhile', async () => {
    const { openIngestWaitSignal } = await import('../../src/db/ingestWaitSignal.js');
    const path = join(dir, 'r.db');
    new BetterSqlite3(path).close();
    let serve: ReturnType<typeof openIngestWaitSignal> | undefined;
    between.once = () => {
      serve = openIngestWaitSignal(path, 50);
      serve.waiting(1_000_000);
    };
    const work = openIngestWaitSignal(path, 50);
    try {
      expect(serve!.isWaiting(1_000_010)).toBe(true);
      expect(work.isWaiting(1_000_010)).toBe(true);
    } finally {
      serve?.close();
      work.close();
    }
  });
});
