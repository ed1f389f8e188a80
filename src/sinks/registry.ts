import type { z } from 'zod';
import { fileSinkKind } from './kinds/file.js';
import { httpSinkKind } from './kinds/http.js';
import { stdoutSinkKind } from './kinds/stdout.js';
import type { SinkKind } from './types.js';

/**
 * Every sink kind, by the `type` of its config entry. Adding a kind: a file in
 * kinds/ exporting a SinkKind, and one line here.
 */
export const SINK_KINDS = {
  http: httpSinkKind,
  file: fileSinkKind,
  stdout: stdoutSinkKind,
} as const satisfies Record<string, SinkKind<z.ZodRawShape, unknown>>;

export type SinkType = keyof typeof SINK_KINDS;

export const sinkKindOf = (type: SinkType): SinkKind<z.ZodRawShape, unknown> => SINK_KINDS[type];
