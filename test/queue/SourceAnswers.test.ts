import { describe, expect, it } from 'vitest';
import { SourceAnswers } from '../../src/queue/SourceAnswers.js';

describe('SourceAnswers: is a redirect the source\'s as a whole, or one read\'s?', () => {
  it('nothing answered since the start: the source', () => {
    const a = new SourceAnswers();
    a.startRun();
    expect(a.judge('s', 1)).toBe('source');
    a.startRun();
    expect(a.judge('s', 1)).toBe('source');
  });

  it('right after answers: the read waits; a second redirect with nothing answered between: the source', () => {
    const a = new SourceAnswers();
    a.answer('s', a.startRun());
    a.startRun();
    expect(a.judge('s', 7)).toBe('wait');
    a.startRun();
    expect(a.judge('s', 8)).toBe('source');
    a.startRun();
    expect(a.judge('s', 7)).toBe('source');
  });

  it('a read answered after the read was first redirected: that read alone', () => {
    const a = new SourceAnswers();
    a.answer('s', a.startRun());
    a.startRun();
    expect(a.judge('s', 7)).toBe('wait');
    a.answer('s', a.startRun());
    a.startRun();
    expect(a.judge('s', 7)).toBe('alone');
    // Other sources are their own.
    a.startRun();
    expect(a.judge('t', 7)).toBe('source');
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

  it('a read that went through in between starts its streak again', () => {
    const a = new SourceAnswers();
    a.answer('s', a.startRun());
    a.startRun();
    expect(a.judge('s', 7)).toBe('wait');
    a.forget(7);
    a.answer('s', a.startRun());
    a.startRun();
    expect(a.judge('s', 7)).toBe('wait');
  });
});
