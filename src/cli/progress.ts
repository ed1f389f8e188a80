import { SingleBar } from 'cli-progress';
import { configProblems } from './cliConfig.js';
import type { CliIo } from './io.js';
import { onInterrupt, type StopRequest } from './onInterrupt.js';

/**
 * Progress of a long operator command (backup, prune, dead-letters retry/discard, replay,
 * migrate) on stderr, so an operator can tell a working command from a hung one: on a terminal
 * one line rewritten in place (`\r`) at most every `ttyEveryMs`, cleared at the end, so stdout's
 * final line stands alone; elsewhere nothing, unless asked for (`--progress`: plain lines, at
 * most one every `plainEveryMs`, for the logs of cron jobs). Stdout is never touched.
 */
export interface Progress {
  /**
   * The current state as one line (built only when it is shown). `phase`: a new stage (checking,
   * syncing) that replaces the last one, shown at once rather than when the throttle allows.
   */
  report(line: () => string, opts?: { phase?: boolean }): void;
  /** Clears the terminal's line; safe to call more than once, and on failure. */
  end(): void;
}

export interface ProgressOptions {
  /** stderr is a terminal: the line is rewritten in place. */
  tty: boolean;
  /** `--progress`: plain lines also when stderr is not a terminal. */
  forced: boolean;
  write: (text: string) => void;
  /** Milliseconds on a clock that never goes back (performance.now, not Date.now). */
  now: () => number;
  /** The terminal's width: a longer line wraps, and `\r` then rewrites only its last row. */
  columns?: () => number | undefined;
  ttyEveryMs?: number;
  plainEveryMs?: number;
}

export const TTY_EVERY_MS = 200;
export const PLAIN_EVERY_MS = 2000;

export const noProgress: Progress = { report: () => {}, end: () => {} };

/** A line cut to the terminal's width (less one: a full row moves some terminals to the next). */
const fit = (line: string, columns: number | undefined): string => (columns !== undefined && columns > 1 && line.length >= columns ? `${line.slice(0, columns - 2)}…` : line);

export function makeProgress(o: ProgressOptions): Progress {
  if (!o.tty && !o.forced) return noProgress;
  const every = o.tty ? (o.ttyEveryMs ?? TTY_EVERY_MS) : (o.plainEveryMs ?? PLAIN_EVERY_MS);
  let last = -Infinity;
  let shown = false;
  return {
    report(line, opts) {
      const now = o.now();
      if (!opts?.phase && now - last < every) return;
      last = now;
      shown = true;
      // \x1b[K: the rest of a longer line written before is erased.
      o.write(o.tty ? `\r${fit(line(), o.columns?.())}\x1b[K` : `${line()}\n`);
    },
    end() {
      if (o.tty && shown) o.write('\r\x1b[K');
      shown = false;
    },
  };
}

/**
 * The progress of a command run with `io`: `forced` is its `--progress`; `tty: false` when the
 * line must not be rewritten in place on a terminal either (stdout lists lines there meanwhile).
 * CLI_PROGRESS_INTERVAL_MS sets the spacing of the plain lines (2000 ms by default; 0 shows every
 * step: tests use it instead of waiting).
 */
export function progressFor(io: CliIo, forced: boolean | undefined, o: { tty?: boolean; now?: () => number } = {}): Progress {
  // Empty is unset, as for the server's variables (`CLI_PROGRESS_INTERVAL_MS=` left blank in an env file).
  const raw = io.env['CLI_PROGRESS_INTERVAL_MS'] || undefined;
  if (raw !== undefined && !/^\d{1,9}$/.test(raw)) throw configProblems([`CLI_PROGRESS_INTERVAL_MS: expected milliseconds (0 or more), got ${JSON.stringify(raw)}`]);
  const plainEveryMs = raw === undefined ? PLAIN_EVERY_MS : Number(raw);
  const columns = () => (io.stderr as { columns?: number }).columns;
  // A monotonic clock: on the wall clock, stepped back an hour (NTP, a VM resumed), no line came for an hour.
  const monotonic = () => performance.now();
  return makeProgress({ tty: io.isTTY && o.tty !== false, forced: forced === true, write: (t) => void io.stderr.write(t), now: o.now ?? monotonic, plainEveryMs, columns });
}

/** 1234567 as "1,234,567". */
export const count = (n: number): string => n.toLocaleString('en-US');

/** "1,234 of 52,000 pages (2%)". */
export const ofTotal = (done: number, total: number, unit: string): string =>
  `${count(done)} of ${count(total)} ${unit} (${total > 0 ? Math.floor((done / total) * 100) : 100}%)`;

/** A bar on a terminal (cli-progress), from `start` until `stop`. */
export interface Bar {
  update(value: number): void;
  /** Gives the terminal back; safe to call more than once. */
  stop(): void;
}

/**
 * A cli-progress bar on the terminal `stream` that gives the terminal back however the command
 * ends. The bar hides the cursor and turns line wrapping off while it runs, and only its stop()
 * restores them: a command ended by an error before it, or by Ctrl-C or SIGTERM (which stop no
 * bar), left the shell's prompt on the bar's line with no cursor and no wrapping until `reset`.
 * The caller stops it in a `finally`; a signal stops it here, and then ends the process by that
 * signal, as it did without a bar (exit status 130 for Ctrl-C). A command that stops itself at the
 * first signal (`interrupt`, stopOnInterrupt) stops its bar in its `finally` as it ends; the bar is
 * stopped here only when a second signal ends the process at once.
 */
export function startBar(stream: NodeJS.WritableStream, format: string, total: number, interrupt?: StopRequest): Bar {
  const bar = new SingleBar({ stream, format, hideCursor: true });
  const offSignals = interrupt ? interrupt.atOnce(() => bar.stop()) : onInterrupt(() => bar.stop());
  const stop = () => {
    offSignals();
    bar.stop();
  };
  bar.start(total, 0);
  return { update: (value) => bar.update(value), stop };
}
