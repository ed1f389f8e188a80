import type { Writable } from 'node:stream';
import { RetryableError } from '../../hiring/errors.js';
import type { Sink, SinkKind, SinkMessage } from '../types.js';

/**
 * NDJSON lines on standard output, for container logs and piping. The
 * receiver's own logs also go to stdout as JSON lines: tell them apart by
 * `event_type` (messages) versus `level`/`msg` (logs), or set LOG_LEVEL=silent.
 */
export function createStdoutSink(stream: Writable): Sink {
  return {
    async deliver(message: SinkMessage) {
      await new Promise<void>((resolve, reject) => {
        stream.write(`${JSON.stringify(message)}\n`, (err) => (err ? reject(new RetryableError(`stdout write failed: ${err.message}`)) : resolve()));
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
  create: (_name, _options, deps) => createStdoutSink(deps.stdout),
};
