import { PermanentError } from '../hiring/errors.js';
import type { SinkMessage } from './types.js';

/**
 * Characters JSON leaves raw in strings that line splitters other than `\n` take for line
 * ends: NEL (U+0085), LINE SEPARATOR (U+2028), PARAGRAPH SEPARATOR (U+2029). Python's
 * `str.splitlines()` splits on all three, so a candidate name holding one cut a file or stdout
 * sink's line in two, neither of which parsed. Escaped, the line parses to the same value.
 */
const LINE_BREAKS_JSON_LEAVES_RAW = /[\u0085\u2028\u2029]/g;
const escapeLineBreak = (c: string) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;

/**
 * The message as JSON, on one line whatever splits it. A payload nested thousands of levels deep
 * (signed by a holder of the secret; JSON.parse takes it, JSON.stringify runs out of stack)
 * can never be written: a dead letter at once that says so, not 25 retries,
 * and in a file sink's batch it fails alone.
 */
export function serializeMessage(message: SinkMessage): string {
  let json: string;
  try {
    json = JSON.stringify(message);
  } catch (err) {
    throw new PermanentError(`the message cannot be written as JSON (${(err as Error).message}): its payload nests too deeply`);
  }
  // Outside strings JSON.stringify writes no whitespace, so each of these is inside a string.
  return json.replace(LINE_BREAKS_JSON_LEAVES_RAW, escapeLineBreak);
}
