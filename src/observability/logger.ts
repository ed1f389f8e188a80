import pino, { type DestinationStream, type Logger } from 'pino';

export type { Logger };

/**
 * JSON logs. We never pass secrets, signatures, API keys, bodies or candidate
 * data to the logger; the redaction list is a second line of defence for
 * objects that might carry them by accident.
 */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'hiring-webhook-receiver' },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: {
        paths: [
          'headers.authorization',
          'headers["webhook-signature"]',
          '*.headers.authorization',
          '*.headers["webhook-signature"]',
          'apiKey',
          '*.apiKey',
          'secret',
          '*.secret',
          'signingKeys',
          '*.signingKeys',
          'candidate',
          '*.candidate',
        ],
        censor: '[redacted]',
      },
    },
    destination,
  );
}
