// The connectIDs (or dial randoms) a stream closed moments ago. When the target and the frontend
// close at the same time, the hub's CLOSE_REQ (or a last DATA) crosses our CLOSE_RSP: a packet for
// an id in this set is that ordinary race, not a misbehaving server, and is counted apart from
// packets for ids the stream never had. Bounded in count and age, so memory stays flat.
export class RecentlyClosed {
  /** id -> when it closed; a Map iterates in insertion order, oldest first. */
  private readonly closedAt = new Map<string, number>();

  constructor(
    private readonly capacity = 4096,
    private readonly windowMs = 30_000,
    private readonly now: () => number = () => performance.now(),
  ) {}

  add(id: string): void {
    this.closedAt.delete(id);
    this.closedAt.set(id, this.now());
    this.trim();
  }

  has(id: string): boolean {
    this.trim();
    return this.closedAt.has(id);
  }

  private trim(): void {
    const cutoff = this.now() - this.windowMs;
    for (const [id, at] of this.closedAt) {
      if (this.closedAt.size <= this.capacity && at >= cutoff) return;
      this.closedAt.delete(id);
    }
  }
}
