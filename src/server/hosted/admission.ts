/**
 * Admission to the job queue (DESIGN §5): one running job plus `VIDSHEET_QUEUE_LENGTH` waiting,
 * shared by every surface. A job takes its place when its video is complete on disk (upload
 * received, fetch done), never while bytes are still arriving, so a slow sender holds no place; it
 * gives the place back when it ends. A request that arrives while the queue is full is refused
 * before its body or fetch (`isFull`); one whose video completes when it is full is refused then.
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

  /** No place is free now: a new request is refused before its body is read or its fetch starts. */
  get isFull(): boolean {
    return this.inFlight >= this.capacity;
  }

  get size(): number {
    return this.inFlight;
  }
}
