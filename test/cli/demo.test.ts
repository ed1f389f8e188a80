import { describe, expect, it } from 'vitest';
import { FIXTURE_TYPES } from '../../src/cli/fixtures.js';
import { cli } from './helpers.js';

describe('demo', () => {
  it('drives every event type through the sandbox and a receiver, and prints what arrived', async () => {
    const r = await cli(['demo', '--timeout', '25']);
    expect(r.code, r.stderr).toBe(0);
    const out = r.stdout;
    expect(out).toMatch(/Registered http:\/\/127\.0\.0\.1:\d+\/webhooks through POST \/api\/v2\/webhooks/);
    for (const type of FIXTURE_TYPES) expect(out).toMatch(new RegExp(`^\\S+\\s+${type.replace('.', '\\.')}\\s`, 'm'));
    expect(out).toContain(`7 event types seen: ${[...FIXTURE_TYPES].sort().join(', ')}`);
    // The duplicate delivery, the out-of-order pair (folded to the newest status), the legacy read, the ineligible candidate.
    expect(out).toMatch(/application\.created\s+demo-duplicate .*delivered 2 times, stored once/);
    expect(out).toMatch(/application\.status_changed\s+demo-duplicate .*out of order/);
    expect(out).toMatch(/^demo-duplicate\s+interviewed\s+no/m);
    expect(out).toMatch(/interview_v2\.completed\s+demo-legacy\s+ready \(score [\d.]+\)/);
    expect(out).toMatch(/interview\.completed\s+demo-ineligible\s+ready \(score [\d.]+\)\s+YES/);
    // Per event, as its message says: the application events before the ineligible result do not.
    expect(out).toMatch(/application\.created\s+demo-ineligible\s+-\s+no/);
    expect(out).toMatch(/^demo-ineligible\s+screened\s+YES\s+Right to work/m);
    expect(out).toMatch(/^demo-deleted\s+applied\s+no\s+yes$/m);
    expect(out).toMatch(/File sink: 19 messages in /);
    // Nothing secret: the registration's secret is configured, never shown.
    expect(out).not.toMatch(/whsec_/);
  });
});
