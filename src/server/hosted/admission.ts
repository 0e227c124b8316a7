/**
 * Admission to the job queue (DESIGN §5): one running job plus `VIDSHEET_QUEUE_LENGTH` waiting,
 * shared by every surface. A job takes its place when its video is complete on disk (upload
 * received, fetch done), never while bytes are still arriving, so a slow sender holds no place; it
 * gives the place back when it ends. A request that arrives while the queue is full is refused
 * before its body or fetch (`isFull`); one whose video completes when it is full is refused then.
 *
 * Free actors' jobs (DESIGN §5a: anonymous callers, accounts on the allowance) never take the last
 * place: one stays for paying jobs. Each free actor has one job at a time, but five addresses (or
 * five allowance accounts) could otherwise fill every place, and paying clients got `429` for as
 * long as free jobs kept coming (the fifth review). With a queue of one place, free jobs may take it.
 *
 * Paying jobs count only against each other: a place a free job holds is never a paying job's
 * refusal. With one place in all, a free job held it for the whole job deadline and every payer got
 * `429` meanwhile (the ninth review); now the payer is let in, runs first (jobs.ts `Turns`), and a
 * free job that has run its share yields the worker to it. So at most `capacity` paying jobs and
 * `freeCapacity` free ones are in flight (their files on disk with them).
 */
export class Admission {
  private inFlight = 0;
  private freeInFlight = 0;

  constructor(private readonly capacity: number) {}

  /** The places free actors' jobs may hold at once: all but one. */
  get freeCapacity(): number {
    return Math.max(1, this.capacity - 1);
  }

  /**
   * A release function when a place was free for this job (call it exactly once), else undefined.
   * `free`: the job is a free actor's.
   */
  tryEnter(free = false): (() => void) | undefined {
    if (this.isFull(free)) return undefined;
    this.inFlight++;
    if (free) this.freeInFlight++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.inFlight--;
      if (free) this.freeInFlight--;
    };
  }

  /** No place is free now for such a job: it is refused before its body is read or its fetch starts. */
  isFull(free = false): boolean {
    if (free) return this.inFlight >= this.capacity || this.freeInFlight >= this.freeCapacity;
    return this.inFlight - this.freeInFlight >= this.capacity;
  }

  get size(): number {
    return this.inFlight;
  }
}
