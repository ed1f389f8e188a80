import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/childServer.js';
import { tempDir } from '../helpers/receiver.js';

const { dir, cleanup } = tempDir('receiver-profile-summary-');
afterAll(cleanup);

describe('bench/profileSummary.ts', () => {
  it("counts the bundled packages' time (dist/vendor/<package>.js) under the package, as from node_modules", () => {
    const frame = (url: string, functionName: string) => ({ functionName, url, lineNumber: 0, columnNumber: 0, scriptId: '1' });
    const profile = {
      nodes: [
        { id: 1, callFrame: frame('', '(root)'), children: [2, 3, 4] },
        { id: 2, callFrame: frame('file:///app/dist/vendor/kysely.js', 'executeQuery') },
        { id: 3, callFrame: frame('file:///app/node_modules/zod/v4/core/parse.js', 'parse') },
        { id: 4, callFrame: frame('file:///app/dist/ingest/webhookRoute.js', 'handle') },
      ],
      startTime: 0,
      endTime: 1000,
      samples: [2, 2, 2, 3, 4],
      timeDeltas: [100, 100, 100, 100, 100],
    };
    const file = join(dir, 'run.cpuprofile');
    writeFileSync(file, JSON.stringify(profile));
    const r = spawnSync('npx', ['tsx', 'bench/profileSummary.ts', file], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
    expect(r.status, r.stderr).toBe(0);
    const byFile = r.stdout.split('self time by function:')[0]!;
    expect(byFile).toMatch(/60\.0%\s+kysely \(bundled\)\n/);
    expect(byFile).toMatch(/20\.0%\s+zod\n/);
    expect(byFile).toMatch(/20\.0%\s+dist\/ingest\/webhookRoute\.js\n/);
    expect(r.stdout).toContain('executeQuery kysely (bundled):1');
  });
});
