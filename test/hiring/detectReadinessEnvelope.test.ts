import { describe, expect, it } from 'vitest';
import { detectReadinessEnvelope } from '../../src/hiring/detectReadinessEnvelope.js';

describe('detectReadinessEnvelope', () => {
  it('recognises the processing envelope', () => {
    expect(detectReadinessEnvelope({ status: 'processing', reason: null, result: null })).toEqual({
      status: 'processing',
      reason: null,
    });
  });

  it.each(['interview_not_available', 'scoring_failed', 'no_result', 'some_future_reason'])(
    'recognises the unavailable envelope with reason %s',
    (reason) => {
      expect(detectReadinessEnvelope({ status: 'unavailable', reason, result: null })).toEqual({
        status: 'unavailable',
        reason,
      });
    },
  );

  it('tolerates a missing or non-string reason and extra fields', () => {
    expect(detectReadinessEnvelope({ status: 'unavailable', result: null })).toEqual({
      status: 'unavailable',
      reason: null,
    });
    expect(detectReadinessEnvelope({ status: 'processing', reason: 42, result: null, eta: 'soon' })).toEqual({
      status: 'processing',
      reason: null,
    });
  });

  it.each(['completed', 'failed', 'unreachable', 'opted_out'])(
    'does not mistake a result with status %s for an envelope',
    (status) => {
      expect(detectReadinessEnvelope({ status, overall_score: null, is_eligible: false })).toBeNull();
      // Even with `result: null`, these statuses are not readiness states.
      expect(detectReadinessEnvelope({ status, result: null })).toBeNull();
    },
  );

  it('names a readiness status the spec does not list, in the envelope\'s shape, instead of taking it for a result', () => {
    expect(detectReadinessEnvelope({ status: 'queued', reason: 'waiting_for_cv', result: null })).toEqual({ status: 'unrecognized', sent: 'queued', reason: 'waiting_for_cv' });
    expect(detectReadinessEnvelope({ status: 'Processing', result: null })).toEqual({ status: 'unrecognized', sent: 'Processing', reason: null });
    // Without `result: null`, or without a status, it is not the envelope's shape.
    expect(detectReadinessEnvelope({ status: 'queued', overall_score: 3 })).toBeNull();
    expect(detectReadinessEnvelope({ status: 7, result: null })).toBeNull();
    expect(detectReadinessEnvelope({ status: '', result: null })).toBeNull();
  });

  it('takes a body with result: null, a status the spec does not list and a result\'s fields for a result, not an envelope', () => {
    // Spec 2.10: the interview's outcomes "include" those listed; CV evaluation and insights fields
    // are not shown. A result may well hold `result: null` (6.4's interview block has a `result`).
    expect(detectReadinessEnvelope({ id: 'i1', status: 'cancelled', completed_at: '2026-01-01T00:00:00Z', overall_score: null, is_eligible: false, result: null })).toBeNull();
    expect(detectReadinessEnvelope({ application_id: 'a1', status: 'evaluated', overall_score: 3.5, result: null })).toBeNull();
    expect(detectReadinessEnvelope({ status: 'done', hiring_recommendation: 'yes', result: null })).toBeNull();
    // The envelope's own fields, and others, still make the unrecognized envelope.
    expect(detectReadinessEnvelope({ status: 'queued', reason: 'x', result: null, eta: 'soon' })?.status).toBe('unrecognized');
  });

  it('needs the result key present and null', () => {
    expect(detectReadinessEnvelope({ status: 'queued' })).toBeNull();
    expect(detectReadinessEnvelope({ status: 'queued', result: undefined })).toBeNull();
    expect(detectReadinessEnvelope({ status: 'processing', result: {} })).toBeNull();
    expect(detectReadinessEnvelope({ status: 'unavailable', result: { overall_score: 2 } })).toBeNull();
    expect(detectReadinessEnvelope({ status: 'processing', result: 0 })).toBeNull();
    expect(detectReadinessEnvelope({ status: 'processing', result: '' })).toBeNull();
  });

  it('is case-sensitive about status', () => {
    expect(detectReadinessEnvelope({ status: 'Processing', result: null })?.status).toBe('unrecognized');
    expect(detectReadinessEnvelope({ status: 'UNAVAILABLE', result: null })?.status).toBe('unrecognized');
  });

  it.each([null, undefined, 'processing', 1, true, [], [{ status: 'processing', result: null }]])(
    'returns null for the non-object %j',
    (body) => {
      expect(detectReadinessEnvelope(body)).toBeNull();
    },
  );

  it('recognises the envelope of spec 3.6 with its null fields left out, when it holds no field of a result', () => {
    expect(detectReadinessEnvelope({ status: 'processing' })).toEqual({ status: 'processing', reason: null });
    expect(detectReadinessEnvelope({ status: 'unavailable', reason: 'scoring_failed' })).toEqual({ status: 'unavailable', reason: 'scoring_failed' });
    // A field of a result makes it a result, as with result: null and an unlisted status.
    expect(detectReadinessEnvelope({ status: 'processing', overall_score: 3 })).toBeNull();
    expect(detectReadinessEnvelope({ status: 'unavailable', id: 'r1' })).toBeNull();
    // Other statuses without the result key are not the envelope's shape.
    expect(detectReadinessEnvelope({ status: 'completed' })).toBeNull();
  });

  it('ignores an inherited result key', () => {
    const body = Object.create({ result: null }) as Record<string, unknown>;
    body['status'] = 'queued';
    expect(detectReadinessEnvelope(body)).toBeNull();
  });
});
