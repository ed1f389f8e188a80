import type { Writable } from 'node:stream';
import { RetryableError } from '../../hiring/errors.js';
import { InterruptedByStopError } from '../interrupted.js';
import { serializeMessage } from '../serializeMessage.js';
import type { Sink, SinkKind, SinkMessage } from '../types.js';

/**
 * NDJSON lines on standard output, for container logs and piping. With this sink configured the
 * receiver's own logs go to standard error (createApp), so stdout holds messages only.
 */
export function createStdoutSink(stream: Writable, shutdown?: AbortSignal): Sink {
  // A reader that goes away (`serve | head -n 1`, a closed pipe) makes the stream emit 'error'
  // (EPIPE), which with no listener ends the whole process, ingest included. Here it fails this
  // sink's deliveries instead: each is retried and recorded, then dead-lettered, like any sink
  // that is down.
  let closed: Error | null = null;
  stream.on('error', (err) => (closed ??= err));
  return {
    async deliver(message: SinkMessage) {
      if (closed) throw new RetryableError(`stdout is closed (${(closed as { code?: string }).code ?? closed.message})`);
      const line = `${serializeMessage(message)}\n`;
      // A reader that stops reading (a full pipe, not a closed one) never completes the write: at
      // shutdown, once SHUTDOWN_GRACE_MS has passed, it is cut like an http request, so the
      // receiver exits in time. The delivery is retried after the restart (the line may then
      // appear twice: consumers dedupe on the message id).
      await new Promise<void>((resolve, reject) => {
        const interrupted = () => reject(new InterruptedByStopError());
        if (shutdown?.aborted) return interrupted();
        shutdown?.addEventListener('abort', interrupted, { once: true });
        stream.write(line, (err) => {
          shutdown?.removeEventListener('abort', interrupted);
          if (err) reject(new RetryableError(`stdout write failed: ${err.message}`));
          else resolve();
        });
      });
      return {};
    },
  };
}

export const stdoutSinkKind: SinkKind<Record<string, never>, Record<string, never>> = {
  fields: {},
  defaultConcurrency: 1,
  resolve: () => ({}),
  target: () => 'stdout',
  create: (_name, _options, deps) => createStdoutSink(deps.stdout, deps.shutdown),
};
