/** What the ingest side's routes read and the rest of the receiver sets: one object, shared. */
export interface IngestState {
  /** Set when a stop begins: the deliveries answered from then on close their connection. */
  draining: boolean;
  /** The last ingest transaction that failed for want of storage, until one commits (for /readyz). */
  storageFailure: { code: string; atMs: number } | null;
}
