/** What a gate holds back from a claim (jobs of gated kinds only). */
export interface HeldSources {
  /** Sources none of whose jobs may be claimed now. */
  blocked: string[];
  /** Paused sources whose probe is due: held as well, but one of their jobs is claimed to try them again. */
  probes: string[];
  /**
   * Sources an operator said are back since the gate was last asked (`sinks send-now`): the
   * worker's own holds of them (a Retry-After's wait, the outage breaker's) end now.
   */
  released?: string[];
}

export interface SourceGate {
  /**
   * Sources whose jobs must not be claimed now (paused after a 401/403 or a 3xx), and those due a
   * probe. `alsoBlocked` (throttled ones) are blocked anyway: their probe, if due, is kept for a
   * claim that can use it.
   */
  blockedSources(now: number, alsoBlocked?: readonly string[]): Promise<HeldSources>;
  /**
   * Record a refused key (or a redirected API URL); the job is put back without burning an attempt.
   * Returns whether this call paused the source (false: paused already), so one line says so.
   */
  pause(source: string, status: number, detail: string): Promise<boolean>;
  /** A job of the source succeeded against the API: the key works. */
  resume(source: string): Promise<void>;
  /** The probe's job sent no request (untested): the source's probe is due again at once. */
  probeAgain?(source: string): Promise<void>;
}

/** Whether the gate applies to jobs of `kind`: one of `gatedKinds` (WorkerOptions.gatedKinds), or any kind when that is absent. */
export const gatesKind = (gatedKinds: readonly string[] | undefined, kind: string): boolean => (gatedKinds ? gatedKinds.includes(kind) : true);
