import { RetryableError } from '../hiring/errors.js';

/**
 * A delivery cut because the receiver was stopping and SHUTDOWN_GRACE_MS had passed: not the
 * sink's failure. Its job is put back without counting an attempt (deliveryHandler), so a stop
 * never makes a dead letter of a message on its last attempt.
 */
export class InterruptedByStopError extends RetryableError {
  constructor() {
    super('interrupted: the receiver was stopping (SHUTDOWN_GRACE_MS passed)');
  }
}
