import { describe, expect, it } from 'vitest';
import { failedBeforeRequest, isDone, isUntested } from '../../src/queue/JobHandler.js';

describe("reading a handler's result", () => {
  it('done: nothing, or untested alone; a reschedule or an error is not', () => {
    expect(isDone(undefined)).toBe(true);
    expect(isDone({ untested: true })).toBe(true);
    expect(isDone({ rescheduleAt: 1 })).toBe(false);
    expect(isDone({ rescheduleAt: 1, untested: true })).toBe(false);
    expect(isDone({ error: new Error('x') })).toBe(false);
    expect(isDone({ error: null })).toBe(false);
  });

  it('untested: a result that says so, done or rescheduled, and a failure before any request; nothing else', () => {
    expect(isUntested({ untested: true })).toBe(true);
    expect(isUntested({ rescheduleAt: 1, untested: true })).toBe(true);
    expect(isUntested({ error: failedBeforeRequest(new Error('no id')) })).toBe(true);
    expect(isUntested(undefined)).toBe(false);
    expect(isUntested({ rescheduleAt: 1 })).toBe(false);
    expect(isUntested({ error: new Error('HTTP 500') })).toBe(false);
    expect(isUntested({ error: Object.assign(new Error('x'), { untested: 'yes' }) })).toBe(false);
    expect(isUntested({ error: null })).toBe(false);
    expect(isUntested({ error: 'a thrown string' })).toBe(false);
  });
});
