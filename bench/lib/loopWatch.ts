/**
 * The receiver's event loop during a fixed-rate row, from its own /metrics (prom-client's default
 * metrics): the longest delay of the loop (`nodejs_eventloop_lag_max_seconds`, from
 * `monitorEventLoopDelay`, which each scrape resets) and its garbage collector's pauses
 * (`nodejs_gc_duration_seconds`, cumulative). Scraped right before the load and right after it,
 * it tells a stall of the receiver's own loop (a long GC, a blocking fsync: the max delay is as
 * long as the stall) from one outside it (the host, the generator: the answers came late, the loop
 * did not stop).
 */
export interface LoopSnapshot {
  /** the longest delay of the event loop since the previous scrape, ms */
  lagMaxMs: number;
  /** GC pauses since the process started, all kinds together */
  gcPauses: number;
  /** of which longer than 10 ms, and longer than 100 ms */
  gcOver10ms: number;
  gcOver100ms: number;
}

/** What happened on the loop between two snapshots: the later one's max delay, the GC pauses in between. */
export interface LoopWatch {
  maxDelayMs: number;
  gcPauses: number;
  gcOver10ms: number;
  gcOver100ms: number;
}

/** Reads a snapshot from a Prometheus text exposition; null when it has no event loop delay (not prom-client's default metrics). */
export function parseLoopMetrics(text: string): LoopSnapshot | null {
  const lag = /^nodejs_eventloop_lag_max_seconds(?:\{[^}]*\})? (\S+)$/m.exec(text);
  if (!lag) return null;
  let gcPauses = 0;
  let upTo10ms = 0;
  let upTo100ms = 0;
  for (const m of text.matchAll(/^nodejs_gc_duration_seconds_(count|bucket)\{([^}]*)\} (\S+)$/gm)) {
    const n = Number(m[3]);
    if (m[1] === 'count') gcPauses += n;
    else if (/(^|,)le="0\.01"/.test(m[2]!)) upTo10ms += n;
    else if (/(^|,)le="0\.1"/.test(m[2]!)) upTo100ms += n;
  }
  return { lagMaxMs: Number(lag[1]) * 1000, gcPauses, gcOver10ms: gcPauses - upTo10ms, gcOver100ms: gcPauses - upTo100ms };
}

export function loopBetween(before: LoopSnapshot, after: LoopSnapshot): LoopWatch {
  return {
    maxDelayMs: Math.round(after.lagMaxMs * 10) / 10,
    gcPauses: after.gcPauses - before.gcPauses,
    gcOver10ms: after.gcOver10ms - before.gcOver10ms,
    gcOver100ms: after.gcOver100ms - before.gcOver100ms,
  };
}

/** A snapshot from the server at `url`; null if /metrics could not be read or has no loop delay. */
export async function scrapeLoop(url: string): Promise<LoopSnapshot | null> {
  try {
    return parseLoopMetrics(await (await fetch(`${url}/metrics`)).text());
  } catch {
    return null;
  }
}
