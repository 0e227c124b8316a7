/**
 * The recovery ladder: after a seek, the frames a sequential decode from the start of the stream
 * shows, or a cell unreadable only when a sequential decode cannot show it either. One definition
 * for both engines (the native one's is crates/vidsheet-core/src/video/recover.rs `Ladder`), checked
 * by the shared vectors in fixtures/vectors/recovery-ladder.json.
 *
 * Each attempt, a decode from one start point, is judged once its frames are chosen:
 * - accepted when nothing reached them (no trouble, no invented reference pictures);
 * - else, against every earlier attempt that started later by at least the reference reach (so
 *   that one lacked pictures this one had): accepted when both chose the very same pictures (they
 *   do not depend on where decoding started: a legitimate open GOP, or damage both decodes went
 *   through), or when nothing was invented and only packets that failed in that one failed again
 *   (damaged data, which a sequential decode meets too);
 * - else decoding starts again 2^(r-1) keyframes before the one the first attempt started from
 *   (r: the attempts judged so far); after 16 restarts, or with no keyframe that far back, from the
 *   start of the stream, which is final.
 */

/** Restarts further back tried before decoding from the start of the stream. */
const MAX_RESTARTS = 16;

export interface Attempt {
  /** Where decoding began (any unit `reach` is in; a later start is larger). */
  start: number;
  /**
   * Identities of the packets whose trouble can reach the chosen frames. An engine that cannot
   * tell which packet failed gives each attempt's trouble an identity of its own.
   */
  trouble: ReadonlyArray<string | number>;
  /** The decoder invented reference pictures the chosen frames may predict from. */
  invented: boolean;
  /** The chosen frame (or group of frames) and a digest of its pictures; null: unknown. */
  frame: number;
  print: string | null;
}

export type Verdict = 'accept' | 'rewind' | { back: number };

/** The ladder for one target (or one group of targets decoded together). */
export class Ladder {
  private readonly attempts: Attempt[] = [];

  /** @param reach how far back a picture may reference, in the unit of `Attempt.start` */
  constructor(private readonly reach: number) {}

  next(attempt: Attempt): Verdict {
    if (attempt.trouble.length === 0 && !attempt.invented) return 'accept';
    const settled = this.attempts.some((a) => {
      // Only a start further back than any reference reaches had the pictures `a` lacked.
      if (a.start - attempt.start < this.reach) return false;
      const converged = attempt.print !== null && a.frame === attempt.frame && a.print === attempt.print;
      const damaged =
        !attempt.invented &&
        attempt.trouble.length > 0 &&
        attempt.trouble.every((p) => a.trouble.includes(p));
      return converged || damaged;
    });
    if (settled) return 'accept';
    this.attempts.push(attempt);
    const restarts = this.attempts.length;
    return restarts > MAX_RESTARTS ? 'rewind' : { back: 2 ** (restarts - 1) };
  }
}

/** What is known of a stream's open-GOP entries (src/core/open-gop.ts). */
type Proof = 'unknown' | 'proving' | 'proven' | 'disproven';

/** A group's claim on proving the stream's open-GOP entries: settled once, or given up. */
export interface Claim {
  /** The verdict; null gives the claim up (the next entry that can prove may claim it). */
  settle(proven: boolean | null): void;
}

/**
 * A stream's open-GOP entries, shared by the groups of one render (the native engine's is
 * recover.rs `OpenGops`): one group verifies an entry at a time, so that groups meeting their first
 * entry together do not all pay for the proof.
 */
export class OpenGops {
  private state: Proof = 'unknown';
  private verdict: Promise<void> = Promise.resolve();

  /** An entry like the one proven clean: accepted without a second decode. */
  get proven(): boolean {
    return this.state === 'proven';
  }

  /** The verdict is still to come: a decode that may prove keeps its pictures' digests. */
  get open(): boolean {
    return this.state === 'unknown' || this.state === 'proving';
  }

  /**
   * For an entry of the kind: while another group holds the claim, waits for its verdict; then
   * claims the proof when this entry can give it (`canProve`). null when the verdict is in or the
   * entry cannot prove.
   */
  async claim(canProve: boolean): Promise<Claim | null> {
    while (this.state === 'proving') await this.verdict;
    if (this.state !== 'unknown' || !canProve) return null;
    this.state = 'proving';
    let release = () => {};
    this.verdict = new Promise((resolve) => {
      release = resolve;
    });
    let settled = false;
    return {
      settle: (proven) => {
        if (settled) return;
        settled = true;
        this.state = proven === null ? 'unknown' : proven ? 'proven' : 'disproven';
        release();
      },
    };
  }
}
