import { redactCredentials } from '../util/redactCredentials.js';
/** What a command writes to and reads from; the entry file passes the process's own. */
export interface CliIo {
  readonly env: Readonly<Record<string, string | undefined>>;
  /** One line (or block) on stdout; a newline is added. */
  out(text: string): void;
  /** One line on stderr; a newline is added. */
  err(text: string): void;
  /** stderr is a terminal: progress bars go there; otherwise plain lines. */
  readonly isTTY: boolean;
  readonly stderr: NodeJS.WritableStream;
}

let stdoutFailed = false;
/** Whether writing the command's output failed otherwise than by its reader going away (EPIPE). */
export const outputFailed = (): boolean => stdoutFailed;

export function processIo(): CliIo {
  // `status | head -3`: once the reader is gone, the rest of the output has nowhere to go. The
  // command still does its work and exits with its own code, as shell tools do; without this
  // listener the EPIPE error would end the process with a stack trace.
  let outClosed = false;
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (!outClosed && err.code !== 'EPIPE') {
      // A full disk under `--json > out.json`: the output is lost, so the command did not succeed.
      process.stderr.write(`error: cannot write to stdout: ${err.message}\n`);
      stdoutFailed = true;
    }
    outClosed = true;
  });
  // `prune --progress 2>&1 | head -1`, a log reader that died: progress lines and warnings have
  // nowhere to go, and the command goes on (without a listener the first failed write ended it,
  // exit 1, midway). Nothing can be said about it: stderr is where it would be said.
  let errClosed = false;
  process.stderr.on('error', () => {
    errClosed = true;
  });
  return {
    env: process.env,
    out: (text) => {
      if (!outClosed) process.stdout.write(`${text}\n`);
    },
    err: (text) => {
      if (!errClosed) process.stderr.write(`${text}\n`);
    },
    isTTY: process.stderr.isTTY === true,
    stderr: process.stderr,
  };
}

/** `--json` output: stable two-space indentation, one document per command. */
export function printJson(io: CliIo, value: unknown): void {
  io.out(JSON.stringify(value, null, 2));
}

// Also the invisible ones an operator must see to understand a body: zero-width characters and the
// byte order mark (a body "not valid JSON" because of a leading BOM shows it).
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u200b-\u200f\u2028\u2029\u202a-\u202e\u2060-\u2069\ufeff]/g;
const escaped = (c: string) => {
  const code = c.charCodeAt(0);
  return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
};

/**
 * Text safe for a terminal: control characters (ANSI escapes, carriage
 * returns that overwrite a line) are shown as \xNN or \uNNNN; newlines and tabs kept.
 */
export function escapeText(s: string): string {
  return s.replace(CONTROL, escaped);
}

/**
 * A stored value (an event id or type, an error) on one line of plain output: every control
 * character shown as \xNN, newlines and tabs too. Signed deliveries may carry anything.
 */
export function oneLine(s: string): string {
  return escapeText(s).replace(/[\t\n]/g, escaped);
}

/**
 * `s` as one word of a command line to paste into a shell: in single quotes; with control
 * characters (a stored id may hold any), in bash's $'...' with them as \xNN (never raw on the
 * terminal).
 */
export function shellWord(s: string): string {
  if (oneLine(s) === s) return `'${s.replace(/'/g, `'\\''`)}'`;
  return `$'${s.replace(/[\\']/g, '\\$&').replace(CONTROL, utf8Bytes).replace(/[\t\n]/g, utf8Bytes)}'`;
}

/**
 * A character as its UTF-8 bytes, each \xNN, for bash's $'...': a byte there whatever the locale.
 * oneLine's \xNN is the code point (U+0085 became the byte 0x85, which is not UTF-8: node read it
 * as U+FFFD), and its \uNNNN is read as a character only in a UTF-8 locale (cron's, Docker's C
 * locale left "\u200B" as those six characters): either way the id given back was another one.
 */
const utf8Bytes = (c: string) => [...Buffer.from(c, 'utf8')].map((b) => `\\x${b.toString(16).padStart(2, '0')}`).join('');

/** A `list` command's answer: the rows as JSON (`--json`), a line saying there are none, or a table. */
export function printRows<T>(io: CliIo, json: boolean | undefined, rows: readonly T[], none: string, headers: readonly string[], cells: (row: T) => readonly unknown[]): void {
  if (json) printJson(io, rows);
  else if (rows.length === 0) io.out(none);
  else printTable(io, headers, rows.map(cells));
}

/**
 * A list command's rows, read with one more than its --limit: that extra row means more are
 * stored. `print` gets the rows up to the limit; then a line on stderr says there are more (stdout,
 * --json included, keeps only the rows), so a count taken from the list is not taken for all.
 */
export function printUpToLimit<T>(io: CliIo, rows: readonly T[], limit: number, what: string, print: (rows: readonly T[]) => void): void {
  print(rows.slice(0, limit));
  if (rows.length > limit) io.err(`warning: only the newest ${limit} ${what} are listed, and there are more: --limit <n> lists more (\`status\` counts them)`);
}

/** A plain aligned table; null and undefined print as "-"; values on one line each (oneLine). */
export function printTable(io: CliIo, headers: readonly string[], rows: readonly (readonly unknown[])[]): void {
  const cells = rows.map((r) => r.map((v) => (v === null || v === undefined ? '-' : oneLine(String(v)))));
  const widths = headers.map((h, i) => Math.max(h.length, ...cells.map((r) => (r[i] ?? '').length)));
  const line = (r: readonly string[]) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i] ?? 0))).join('  ').trimEnd();
  io.out(line(headers.map((h) => h.toUpperCase())));
  for (const r of cells) io.out(line(r));
}

/** "3 min", "2 h 5 min", "4 d": ages for people. */
/**
 * A stored `last_error` as the CLI shows it (table or --json): with every credential taken out.
 * Errors are redacted before they are stored, but rows written by earlier versions (before
 * redactCredentials, or by the one that cut the text before redacting it) may still hold a key.
 */
export function shownError<T extends string | null>(text: T): T {
  return (text === null ? null : redactCredentials(text)) as T;
}

export function formatAge(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h} h ${m % 60} min`;
  return `${Math.floor(h / 24)} d`;
}
