/**
 * Admission to the job queue (DESIGN §5): one running job plus `VIDSHEET_QUEUE_LENGTH` waiting,
 * shared by every surface. A request takes its place on arrival (a hosted upload before its body
 * is read, a remote call before its fetch) and gives it back when it ends; a request that finds no
 * place is refused at once (`429 busy`, or the remote tool's retry message), never queued.
 */
export class Admission {
  private inFlight = 0;

  constructor(private readonly capacity: number) {}

  /** A release function when a place was free (call it exactly once), else undefined. */
  tryEnter(): (() => void) | undefined {
    if (this.inFlight >= this.capacity) return undefined;
    this.inFlight++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.inFlight--;
    };
  }

  get size(): number {
    return this.inFlight;
  }
}
