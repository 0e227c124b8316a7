/**
 * After a seek, the frames a sequential decode from the start of the stream shows: the recovery
 * ladder judges each attempt and says where to start the next (the rule:
 * fixtures/vectors/recovery-ladder.json; native: crates/vidsheet-core/src/video/recover.rs
 * `Ladder`). Beside it, what a render's groups share of the open-GOP proof: OpenGops, the claim,
 * and a proof pair's meeting.
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
  /** The parts of the render still to choose their proof pair (see paired). */
  private unpaired: number;
  private allPaired: Promise<void>;
  private pairedAll = () => {};

  /**
   * @param parts the parts of the render that each may choose a proof pair: a group claims the
   * proof alone only once every part has, since a pair proves with no decode of its own.
   */
  constructor(parts = 0) {
    this.unpaired = parts;
    this.allPaired = new Promise((resolve) => {
      this.pairedAll = resolve;
    });
    if (parts <= 0) this.pairedAll();
  }

  /** A part has chosen its proof pair, or has none (called once per part, failed ones too). */
  paired(): void {
    if (--this.unpaired === 0) this.pairedAll();
  }

  /** The claim for a group that proves alone, once every part has chosen its pair; else null. */
  async claimAlone(): Promise<Claim | null> {
    await this.allPaired;
    return this.claimNow();
  }

  /** An entry like the one proven clean: accepted without a second decode. */
  get proven(): boolean {
    return this.state === 'proven';
  }

  /** The verdict is still to come: a decode that may prove keeps its pictures' digests. */
  get open(): boolean {
    return this.state === 'unknown' || this.state === 'proving';
  }

  /** Resolves once no group holds the claim (the verdict is in, or the claim was given up). */
  async settled(): Promise<void> {
    while (this.state === 'proving') await this.verdict;
  }

  /**
   * For an entry of the kind: while another group holds the claim, waits for its verdict; then
   * claims the proof when this entry can give it (`canProve`). null when the verdict is in or the
   * entry cannot prove.
   */
  async claim(canProve: boolean): Promise<Claim | null> {
    await this.settled();
    return canProve ? this.claimNow() : null;
  }

  /** The claim, when no group holds it and no verdict is in; else null. */
  claimNow(): Claim | null {
    if (this.state !== 'unknown') return null;
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

/** The two sides of a proof pair (src/core/open-gop.ts proofPair). */
export type PairSide = 'earlier' | 'first';

/**
 * Where the own decodes of two groups that prove the stream's entries between them meet: each
 * side offers its decode (null: it has none to give, it failed); the second offer judges the two
 * and settles the claim the pair holds.
 */
export class ProofPair<T> {
  private readonly offers = new Map<PairSide, T | null>();

  constructor(
    private readonly claim: Claim,
    private readonly judge: (earlier: T, first: T) => boolean | null,
  ) {}

  offer(side: PairSide, decode: T | null): void {
    if (this.offers.has(side)) return;
    this.offers.set(side, decode);
    const earlier = this.offers.get('earlier');
    const first = this.offers.get('first');
    if (earlier === undefined || first === undefined) return;
    this.claim.settle(earlier === null || first === null ? null : this.judge(earlier, first));
  }
}
