/**
 * The bytes of request bodies the receiver holds at once, over all connections: read so far, or
 * read and not yet answered. A body must be read before its signature can be checked, so without
 * a bound anyone could make the process hold `MAX_BODY_BYTES` per connection they open: 400
 * connections each sending 1 MiB and stalling took the receiver from 103 to 509 MB of RSS (the
 * Fly.io machine of `fly.toml` has 512 MB), and the memory stayed taken after they closed. With
 * the bound, a request whose next chunk does not fit is answered 503 (`receiver_busy`) and its
 * connection closed; the service's deliveries (a few KB each) retry.
 */
export class BodyBudget {
  private held = 0;

  constructor(readonly limit: number) {
    if (!(limit > 0)) throw new RangeError(`limit must be positive, got ${limit}`);
  }

  /** Bytes held now. */
  get inFlight(): number {
    return this.held;
  }

  /** One request's share: `take` what it reads, `release` all of it once, when it is answered or gone. */
  holder(): BodyHold {
    let mine = 0;
    let released = false;
    return {
      limit: this.limit,
      take: (bytes: number): boolean => {
        // After release (the handler is done, and readNodeBody no longer listens): nothing to hold for.
        if (released) return true;
        if (this.held + bytes > this.limit) return false;
        this.held += bytes;
        mine += bytes;
        return true;
      },
      release: (): void => {
        if (released) return;
        released = true;
        this.held -= mine;
        mine = 0;
      },
    };
  }
}

export interface BodyHold {
  /** The budget's bound, in bytes (for the refusal's message). */
  readonly limit: number;
  /** Holds `bytes` more of the request's body; false when they do not fit in the budget (nothing taken). */
  take(bytes: number): boolean;
  /** Gives back all this request held; later calls do nothing. */
  release(): void;
}
