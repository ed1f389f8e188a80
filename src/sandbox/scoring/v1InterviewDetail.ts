import { iso } from '../clock.js';
import type { Random } from '../fakeData.js';
import { newId } from '../ids.js';
import type { ApplicationRecord, CriterionDefinition, InterviewOutcome, JobRecord } from '../types.js';
import type { InterviewResult } from './interviewResult.js';

/**
 * Spec 2.3: the v1 interview call detail with every required field and nested object. Decimals are
 * strings with the stated precision; transcript indices stay within the transcript; criterion scores
 * stay within their score system (binary 0-1, out_of_5 0-5, percentage 0-100).
 */

const dec = (n: number, places: number): string => n.toFixed(places);

interface Turn {
  role: 'agent' | 'user';
  content: string;
}

const SCRIPT: { question: string; answer: string }[] = [
  { question: 'Can you tell me about your most recent job?', answer: 'I worked two years at a supermarket, mostly on the tills and helping customers find products.' },
  { question: 'How do you handle an upset customer?', answer: 'I listen first, apologise, and then find someone who can fix the problem if I cannot.' },
  { question: 'Do you have the right to work here, and can you work weekends?', answer: 'Yes, I have the right to work, and weekends are fine for me.' },
];

function transcript(turns: Turn[], durationSec: number): Record<string, unknown>[] {
  const slot = durationSec / turns.length;
  return turns.map((turn, index) => {
    const start = index * slot;
    const end = start + slot * 0.9;
    const words = turn.content.split(/\s+/).filter((w) => w !== '');
    const step = (end - start) / words.length;
    return {
      id: newId(),
      role: turn.role,
      content: turn.content,
      start_sec: dec(start, 3),
      end_sec: dec(end, 3),
      index,
      words: words.map((word, i) => ({ word, start: Math.round((start + i * step) * 1000) / 1000, end: Math.round((start + (i + 1) * step) * 1000) / 1000 })),
    };
  });
}

interface ScoredCriterion {
  definition: CriterionDefinition;
  scoreSystem: 'binary' | 'out_of_5' | 'percentage';
  score: number | null;
}

function scoredCriteria(job: JobRecord, result: InterviewResult | null, random: Random): ScoredCriterion[] {
  const fromResult = job.criteria.map((definition): ScoredCriterion => {
    const r = result?.criteria_results.find((c) => c.criterion_id === definition.id);
    const scoreSystem = definition.kind === 'qualification' ? 'binary' : 'out_of_5';
    const score = r === undefined || r.outcome === 'not_assessed' ? null : definition.kind === 'qualification' ? (r.passed ? 1 : 0) : r.score;
    return { definition, scoreSystem, score };
  });
  // Legacy flows also grade language on a percentage scale: exercises the third score system.
  const language: ScoredCriterion = {
    definition: { id: newId(), name: 'English proficiency', description: 'Fluency and clarity in English.', kind: 'competency', required: false },
    scoreSystem: 'percentage',
    score: result?.status === 'completed' ? random.int(55, 98) : null,
  };
  return job.engine === 'legacy' ? [...fromResult, language] : fromResult;
}

function criteriaScore(c: ScoredCriterion, sequence: number, items: Record<string, unknown>[]): Record<string, unknown> {
  const userItems = items.filter((t) => t['role'] === 'user');
  const item = userItems[sequence % Math.max(1, userItems.length)];
  const knockout = c.definition.kind === 'qualification' && c.definition.required;
  const weight = 1;
  const category = c.scoreSystem === 'percentage' ? 'language_proficiency' : c.definition.kind === 'qualification' ? 'general' : 'soft_skills';
  const highlights =
    c.score === null || item === undefined
      ? []
      : [{
          id: newId(),
          reason_summary: `Evidence for ${c.definition.name.toLowerCase()}`,
          reason_explanation: `The candidate's answer speaks directly to ${c.definition.name.toLowerCase()}.`,
          highlight: String(item['content']),
          highlight_time: dec(Number(item['start_sec']), 3),
          sentiment: c.score === 0 ? 'negative' : 'positive',
          transcript_item_id: item['id'],
        }];
  return {
    id: newId(),
    criteria: {
      id: c.definition.id,
      category,
      criteria: c.definition.name,
      description: c.definition.description,
      score_system: c.scoreSystem,
      weight: dec(weight, 2),
      sequence_number: sequence + 1,
      is_knockout: knockout,
      knockout_threshold: knockout ? 1 : null,
    },
    score: c.score,
    weight: dec(weight, 2),
    weighted_score: c.score === null ? null : dec(c.score * weight, 2),
    reasoning: c.score === null ? 'Not assessed: insufficient evidence.' : `Scored ${c.score} on the ${c.scoreSystem} scale.`,
    highlights,
    is_knockout: knockout,
  };
}

export interface V1InterviewInput {
  job: JobRecord;
  application: ApplicationRecord;
  status: InterviewOutcome;
  /** null when no conversation happened (opt-out before the call), or its scoring failed. */
  result: InterviewResult | null;
  /** The call took place (transcript, recording) but scoring failed: nothing the scoring writes. */
  scoringFailed?: boolean;
  completedAt: number;
  lastActivityNote: string | null;
  random: Random;
}

function callOutput(input: V1InterviewInput, durationSec: number): Record<string, unknown> {
  const { job, result, completedAt, random } = input;
  const scored = input.status === 'completed';
  const talked = scored || input.scoringFailed === true;
  const turns: Turn[] = talked
    ? [{ role: 'agent', content: `Hello, this is Alex calling about the ${job.title} role. Is now a good time?` }, { role: 'user', content: 'Yes, sure.' }, ...SCRIPT.flatMap((s): Turn[] => [{ role: 'agent', content: s.question }, { role: 'user', content: s.answer }])]
    : [];
  const items = transcript(turns, durationSec);
  // Question scores, summaries and criterion scores are what scoring writes (spec 2.3).
  const questions = scored
    ? SCRIPT.map((s, i) => ({
        id: newId(),
        question: s.question,
        answer: s.answer,
        score: random.int(2, 5),
        score_reasoning: 'Specific and relevant answer.',
        is_knockout: i === SCRIPT.length - 1,
        is_knocked_out: i === SCRIPT.length - 1 && result !== null && !result.is_eligible,
        knockout_reasoning: i === SCRIPT.length - 1 ? 'Checks right to work and weekend availability.' : null,
        sequence_number: i + 1,
        interview_flow_question_id: newId(),
        transcript_indices: [2 + 2 * i, 3 + 2 * i],
      }))
    : [];
  const score = result?.overall_score ?? null;
  return {
    id: newId(),
    language: job.language === 'de-DE' ? 'de-DE' : 'en-US',
    called_at: talked ? iso(completedAt - durationSec * 1000) : null,
    ended_at: talked ? iso(completedAt) : null,
    duration_minutes: talked ? Math.round((durationSec / 60) * 100) / 100 : null,
    recording_status: talked ? 'completed' : 'not_started',
    recording_video_url: null,
    recording_audio_url: talked ? `https://recordings.sandbox.invalid/${input.application.id}.mp3` : null,
    recording_duration_sec: talked ? dec(durationSec, 2) : null,
    summary: result?.summary ?? null,
    tagline_summary: scored ? 'Customer-focused, available weekends' : null,
    candidate_background: scored ? ['Two years in retail'] : null,
    candidate_motivation_and_interest: scored ? ['Wants a steadier schedule'] : null,
    candidate_logistical_considerations: scored ? ['Commutes by bus'] : null,
    candidate_tools_and_skills: scored ? ['Point-of-sale systems'] : null,
    candidate_questions: scored ? ['When would I start?'] : null,
    follow_up_questions: scored ? ['Confirm the earliest start date'] : null,
    strengths: scored ? ['Clear communicator', 'Calm under pressure'] : null,
    weaknesses: scored ? ['Little warehouse experience', 'Prefers fixed shifts'] : null,
    red_flags: scored ? (result?.red_flags ?? []) : null,
    overall_score: score === null ? null : dec(score, 2),
    overall_score_explanation: score === null ? null : 'Average of the competency scores.',
    questions,
    criteria_scores: scored ? scoredCriteria(job, result, random).map((c, i) => criteriaScore(c, i, items)) : [],
    transcript: items,
  };
}

const PHASE: Record<InterviewOutcome, string> = { completed: 'completed', unreachable: 'exhausted', failed: 'failed', opted_out: 'opted_out' };

export function buildV1InterviewDetail(input: V1InterviewInput): Record<string, unknown> {
  const { job, application, status, result, completedAt } = input;
  const durationSec = (result?.duration_seconds ?? 0) > 0 ? (result?.duration_seconds ?? 0) : input.random.int(420, 900);
  const createdAt = Date.parse(application.created_at);
  const knockedOut = status === 'completed' && result !== null && !result.is_eligible;
  return {
    id: newId(),
    status,
    pipeline_phase: knockedOut ? 'knocked_out' : PHASE[status],
    job_application_id: application.id,
    scheduled_at: iso(createdAt),
    scheduled_duration_minutes: 15,
    booking_source: 'self_service',
    cancelled_at: null,
    last_activity_note: input.lastActivityNote,
    created_at: iso(createdAt),
    updated_at: iso(completedAt),
    candidate: {
      id: application.candidate.id,
      first_name: application.candidate.first_name,
      last_name: application.candidate.last_name,
      email: application.candidate.email,
      created_at: application.candidate.created_at,
    },
    interview_flow: {
      id: job.interview_config_id,
      job_posting_id: job.id,
      job_posting_title: job.title,
      interview_mode: 'phone',
      intro: 'Hi, thanks for taking the time to talk with us today.',
      outro: 'Thank you, we will be in touch soon.',
      language: job.language === 'de-DE' ? 'de-DE' : 'en-US',
      retries_limit: 3,
      default_call_delay: '00:30:00',
    },
    attempt_number: status === 'unreachable' ? 4 : 1,
    interviewer_name: 'Alex',
    output: status === 'opted_out' && result === null ? null : callOutput(input, durationSec),
  };
}
