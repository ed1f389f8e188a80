import { closeSync, openSync, readSync } from 'node:fs';

/** How many bytes of a file copyFormat reads: enough for a compressor's header and its first block. */
const SNIFFED = 64 * 1024;

/**
 * What a file holds by its first bytes, not its name: `gzip` (its magic, 1f 8b), `text` (UTF-8
 * without a NUL, as a sink's NDJSON is; an empty file too), or `other` (bytes no line of which can
 * be read: bzip2, xz, zstd, lzip, lzop, brotli, zip...). Named by their suffix only, a gzipped
 * copy called `events.ndjson.1.GZ` and an lzip one called `events.ndjson.1.lz` were read as plain
 * text: no line named the candidate, "0 lines taken out", exit 0, their lines kept.
 */
export function copyFormat(path: string): 'gzip' | 'text' | 'other' {
  const head = Buffer.alloc(SNIFFED);
  const fd = openSync(path, 'r');
  let n: number;
  try {
    n = readSync(fd, head, 0, SNIFFED, 0);
  } finally {
    closeSync(fd);
  }
  const bytes = head.subarray(0, n);
  if (n >= 2 && bytes[0] === 0x1f && bytes[1] === 0x8b) return 'gzip';
  if (bytes.includes(0)) return 'other';
  try {
    // stream: a character cut at the end of what was read is not an error.
    new TextDecoder('utf-8', { fatal: true }).decode(bytes, { stream: true });
    return 'text';
  } catch {
    return 'other';
  }
}
