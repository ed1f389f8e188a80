import { PermanentError } from '../hiring/errors.js';
import type { SinkMessage } from './types.js';

/**
 * The message as JSON. A payload nested thousands of levels deep (signed by a
 * holder of the secret; JSON.parse takes it, JSON.stringify runs out of stack)
 * can never be written: a dead letter at once that says so, not 25 retries,
 * and in a file sink's batch it fails alone.
 */
export function serializeMessage(message: SinkMessage): string {
  try {
    return JSON.stringify(message);
  } catch (err) {
    throw new PermanentError(`the message cannot be written as JSON (${(err as Error).message}): its payload nests too deeply`);
  }
}
