// When the IPVS proxier counts its draining real servers' connections: shortly after a sync, then
// every DRAIN_CHECK_INTERVAL_MS while some drain, each count in the sync queue.

/**
 * How long after a sync the connections of the real servers left draining are counted (for the
 * next plan, which deletes the drained ones). A sync ends with its writes: counting a server it
 * has just set to weight 0 tells nothing yet, and on a busy CPU that read would stand between
 * the change and whatever runs next. Syncs in a burst share one count.
 */
export const DRAIN_READ_DELAY_MS = 200;

/**
 * While real servers drain, how often their connections are counted again (one dump per virtual
 * server that drains, never the whole table) and the drained ones deleted: a real server goes
 * within about this long of its last connection, not at the next sync.
 */
export const DRAIN_CHECK_INTERVAL_MS = 1000;

/** The timer and the count in flight; `count` does the work (refreshDraining, then the deletes). */
export class DrainSchedule {
  /** The timer of the count that is due, until it fires. */
  private timer: ReturnType<typeof setTimeout> | null = null;
  /** The count in flight (queued or running), if any. */
  private inFlight: Promise<void> | null = null;
  private stopped = false;

  constructor(
    private readonly o: {
      /** Whether any real server drains. */
      draining: () => boolean;
      /** Runs `fn` in the sync queue. */
      serial: (fn: () => Promise<void>) => Promise<void>;
      count: () => Promise<void>;
    },
  ) {}

  /**
   * Counts `delayMs` from now, unless a count is already due (syncs in a burst share one). Each
   * count, while some servers still drain, asks for the next one DRAIN_CHECK_INTERVAL_MS later.
   */
  soon(delayMs = DRAIN_READ_DELAY_MS): void {
    if (this.timer || this.inFlight || !this.o.draining() || this.stopped) return;
    // Unref'd: a draining server never keeps --once's process alive; stop() clears it.
    this.timer = setTimeout(() => {
      this.timer = null;
      this.inFlight = this.o.serial(() => this.o.count()).finally(() => {
        this.inFlight = null;
        this.soon(DRAIN_CHECK_INTERVAL_MS);
      });
    }, delayMs);
    this.timer.unref?.();
  }

  /** Resolves once the count that has started (if any) is done. */
  async counted(): Promise<void> {
    await this.inFlight;
  }

  /** No count after this one. */
  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}
