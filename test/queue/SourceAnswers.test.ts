import { describe, expect, it } from 'vitest';
import { SourceAnswers } from '../../src/queue/SourceAnswers.js';

describe('SourceAnswers: is a redirect the source\'s as a whole, or one read\'s?', () => {
  it("a read's first redirect waits, answered or not; its second with nothing answered between: the source", () => {
    const a = new SourceAnswers();
    a.startRun();
    expect(a.judge('s', 1)).toBe('wait');
    a.startRun();
    expect(a.judge('s', 1)).toBe('source');
    // Paused, and probed again: still the source while nothing is answered.
    a.startRun();
    expect(a.judge('s', 1)).toBe('source');
    a.answer('s', a.startRun());
    a.startRun();
    expect(a.judge('s', 8)).toBe('wait');
    a.startRun();
    expect(a.judge('s', 8)).toBe('source');
  });

  it('a read answered by a run started after the read was first redirected: that read alone', () => {
    const a = new SourceAnswers();
    a.startRun();
    expect(a.judge('s', 7)).toBe('wait');
    a.answer('s', a.startRun());
    a.startRun();
    expect(a.judge('s', 7)).toBe('alone');
    // Other sources are their own.
    a.startRun();
    expect(a.judge('t', 7)).toBe('wait');
    a.startRun();
    expect(a.judge('t', 7)).toBe('source');
  });

  it("another read's redirects, alone or not, never make a read's the source's", () => {
    const a = new SourceAnswers();
    a.startRun();
    a.startRun();
    // Two reads of one claim, side by side: both wait.
    expect(a.judge('s', 1)).toBe('wait');
    expect(a.judge('s', 2)).toBe('wait');
    a.answer('s', a.startRun());
    a.startRun();
    expect(a.judge('s', 1)).toBe('alone');
    a.startRun();
    expect(a.judge('s', 3)).toBe('wait');
    expect(a.judge('s', 2)).toBe('alone');
    a.answer('s', a.startRun());
    a.startRun();
    expect(a.judge('s', 3)).toBe('alone');
  });

  it('a read in flight when the host started redirecting (started before the redirect) says nothing of the new host', () => {
    const a = new SourceAnswers();
    a.answer('s', a.startRun());
    const inFlight = a.startRun();
    a.startRun();
    expect(a.judge('s', 7)).toBe('wait');
    a.answer('s', inFlight);
    a.startRun();
    expect(a.judge('s', 7)).toBe('source');
  });

  it('a read that went through in between starts again', () => {
    const a = new SourceAnswers();
    a.answer('s', a.startRun());
    a.startRun();
    expect(a.judge('s', 7)).toBe('wait');
    a.forget(7);
    a.startRun();
    expect(a.judge('s', 7)).toBe('wait');
  });
});
