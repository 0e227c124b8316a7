/**
 * The proof of a stream's open-GOP entries, as the fallback makes it (the rule, provesEntry:
 * fixtures/vectors/open-gop-proof.json; where proving pays: src/core/open-gop.ts). A group's
 * EntryProof holds that bookkeeping, so its ladder loop (extract.ts) stays plain: whether it
 * claimed the proof, how far its decodes keep their pictures' digests, its side of a render's
 * proof pair, and the verdict each attempt gives.
 */
import { debuglog } from 'node:util';
import { AHEAD_MARGIN, type EntryDecode, proofPair, provesAhead, provesEntry } from '../../core/open-gop.js';
import type { Aside } from '../process.js';
import { type Decoding, extractOnce, type Run } from './decode.js';
import type { VideoDetails } from './media.js';
import { lastAtOrBefore, type Packets, seconds } from './packets.js';
import { type Claim, type OpenGops, type PairSide, ProofPair } from './recovery.js';

const debug = debuglog('vidsheet');

/** A group's side of the render's proof pair (proofPairOf). */
export interface PairRole {
  side: PairSide;
  from: bigint;
  end: bigint;
  meeting: ProofPair<Run>;
}

/** What a group's proof needs of its request, beside the decode itself. */
export interface ProofRequest extends Decoding {
  /**
   * The keyframes (listed ones) that nal.ts shows to be sync samples in name only: an open GOP's
   * recovery point, or a false sync sample.
   */
  entries: ReadonlySet<bigint>;
  /** Shared by the groups of one render: whether the stream's open-GOP entries are proven clean. */
  openGops: OpenGops;
  /**
   * This group is a side of the render's proof pair (src/core/open-gop.ts proofPair): its first
   * decode goes on to `end` keeping its pictures' digests, and is handed to `meeting`.
   */
  pair?: PairRole;
  /** Sets the group's core aside while it waits for the open-GOP verdict (process.ts limiter). */
  aside?: Aside;
}

/**
 * One group's part in proving the stream's open-GOP entries. A group opening at an entry claims
 * the proof when no other group holds it and it can prove (entries are told apart only when one
 * thread decodes, see troubleWatch), and no pair of this render's groups proves it with their own
 * decodes (`pair`). The groups that find the claim held decode meanwhile, keeping their pictures'
 * digests so they can still prove, and wait for the verdict only to judge their decode.
 */
export class EntryProof {
  /** The claim on the proof while this group holds it. */
  private claim: Claim | null;
  /** The claiming group's first attempt, when it entered as an entry does. */
  private first: EntryDecode | undefined;
  /** Whether this group's side of a proof pair has been handed over. */
  private offered = false;
  private readonly aside: Aside;
  /** The proof is made ahead (src/core/open-gop.ts provesAhead), to `aheadEnd`. */
  private readonly ahead: boolean;
  private readonly aheadEnd: bigint;
  /** How far the decodes that may prove go, keeping their pictures' digests; null: none may. */
  private readonly proveTo: bigint | null;
  /**
   * The earlier side of a pair keeps only the digests its pair compares, from the first side's
   * keyframe on: that decode cannot prove its own entry.
   */
  private readonly printsFrom: bigint | undefined;

  /**
   * The group's proof: `key` is the index into req.keyframes of the keyframe opening the group,
   * `opening` that keyframe where the first run starts at it, `firstPts` and `lastPts` its targets'.
   */
  static async open(
    req: ProofRequest,
    key: number,
    opening: bigint | undefined,
    firstPts: bigint,
    lastPts: bigint,
  ): Promise<EntryProof> {
    const aside = req.aside ?? (<U>(wait: Promise<U>) => wait);
    const entering = opening !== undefined && req.entries.has(opening);
    const claim = entering && !req.pair && req.threads === 1 ? await aside(req.openGops.claimAlone()) : null;
    debug(
      'group at %ss: %s',
      seconds(firstPts, req.d).toFixed(3),
      claim ? 'claims the open-GOP proof' : 'starts',
    );
    return new EntryProof(req, key, opening, entering, lastPts, aside, claim);
  }

  private constructor(
    private readonly req: ProofRequest,
    private readonly key: number,
    private readonly opening: bigint | undefined,
    private readonly entering: boolean,
    lastPts: bigint,
    aside: Aside,
    claim: Claim | null,
  ) {
    const { d } = req;
    const reach = d.referenceReach;
    this.aside = aside;
    this.claim = claim;
    // While proving, both decodes go on to the reach past the entry (the proof compares every
    // picture over it), however close after the entry the targets are.
    const [tbNum, tbDen] = d.timeBase;
    const ticks = (s: number) => BigInt(Math.ceil((s * Number(tbDen)) / Number(tbNum)));
    const reachEnd = opening === undefined ? lastPts : opening + ticks(reach) + 1n;
    // The keyframe after the group, where the proof may be made ahead: this group's decode
    // carried on past it, met by a short decode from it.
    const next = req.keyframes[key + 1];
    this.ahead =
      claim !== null &&
      opening !== undefined &&
      next !== undefined &&
      req.entries.has(next) &&
      provesAhead({
        key: seconds(opening, d),
        last: seconds(lastPts, d),
        next: seconds(next, d),
        previous: key > 0 ? seconds(req.keyframes[key - 1] as bigint, d) : d.startTime,
        reach,
      });
    this.aheadEnd = next === undefined ? lastPts : aheadOf(d, next);
    const later = (p: bigint) => (p > lastPts ? p : lastPts);
    this.proveTo = req.pair
      ? later(req.pair.end)
      : this.ahead
        ? this.aheadEnd
        : entering && req.threads === 1 && req.openGops.open
          ? later(reachEnd)
          : null;
    this.printsFrom = req.pair?.side === 'earlier' ? req.pair.from : undefined;
  }

  /**
   * The pictures attempt `attempt` keeps the digests of, for the proof: through `to` (null: none),
   * from `from` (undefined: from the first decoded).
   */
  prints(attempt: number): { to: bigint | null; from: bigint | undefined } {
    return {
      to: this.claim !== null || attempt === 0 ? this.proveTo : null,
      from: attempt === 0 ? this.printsFrom : undefined,
    };
  }

  /** This group claimed the proof and its first attempt entered as an entry does. */
  get entered(): boolean {
    return this.first !== undefined;
  }

  /**
   * Takes attempt `attempt`'s decode (`run`, judged as `decode`; `whole`: every target came out).
   * True when that decode is final: an entry like the one proven clean in this stream.
   */
  async judge(attempt: number, run: Run, decode: EntryDecode, whole: boolean): Promise<boolean> {
    const { req } = this;
    const claim = this.claim;
    if (claim && this.first) {
      // The attempt after the one that claimed the proof gives the verdict.
      const proven = provesEntry(this.first, decode, req.d.referenceReach);
      debug('open-GOP entries: %s', proven === null ? 'not told' : proven ? 'proven' : 'disproven');
      claim.settle(proven);
      this.claim = null;
    } else if (claim && attempt === 0) {
      if (decode.entry) {
        this.first = decode;
        // Ahead: a verdict (proven: this entry is one like it) ends the claim; none told leaves
        // it to the proof behind, the next attempt.
        const proven = this.ahead ? await proveAhead(req, this.key + 1, run, this.aheadEnd) : null;
        if (proven !== null) {
          debug('open-GOP entries: %s ahead', proven ? 'proven' : 'disproven');
          claim.settle(proven);
          this.claim = null;
          if (proven) return true;
        }
      } else {
        // Clean, or more trouble than an entry's: this group proves nothing.
        claim.settle(null);
        this.claim = null;
      }
    } else if (attempt === 0 && (this.entering || req.pair)) {
      // A side of a proof pair hands its decode over: the pair judges once both are in.
      req.pair?.meeting.offer(req.pair.side, whole && this.opening !== undefined ? run : null);
      this.offered = true;
      if (this.entering) {
        // The verdict decides this entry's decode; meanwhile its core serves other groups.
        await this.aside(req.openGops.settled());
        // An entry like the one proven clean in this stream (src/core/open-gop.ts).
        if (decode.entry && req.openGops.proven) return true;
        // No verdict (the claim was given up): this entry proves it, from further back.
        if (decode.entry && this.proveTo !== null && this.printsFrom === undefined) {
          this.claim = await this.aside(req.openGops.claim(req.threads === 1));
          if (this.claim) this.first = decode;
        }
      }
    }
    return false;
  }

  /**
   * Ends the group's part: a claim not settled (the run failed, or went to the start of the
   * stream) is given up, and so is a pair whose side never decoded.
   */
  close(): void {
    this.claim?.settle(null);
    if (!this.offered) this.req.pair?.meeting.offer(this.req.pair.side, null);
  }
}

/**
 * The proof made ahead (src/core/open-gop.ts provesAhead): `own`, the claiming group's decode
 * carried on to `end` with its pictures' digests, against a decode from keyframe `next` (an entry,
 * an index into req.keyframes) to `end`.
 */
async function proveAhead(req: Decoding, next: number, own: Run, end: bigint): Promise<boolean | null> {
  const { d, packets } = req;
  const target = lastAtOrBefore(packets.pts, (p) => p <= end);
  const r = await extractOnce({ ...req, group: [target] }, next, false, end, 1000);
  const key = req.keyframes[next] as bigint;
  return meet(d, { run: r, key }, { run: own, key: req.keyframes[next - 1] as bigint }, end);
}

/** A decode that may prove: its run (with its pictures' digests) and the keyframe it started at. */
interface ProvingDecode {
  run: Run;
  key: bigint;
}

/**
 * Whether `earlier`, a decode started at least the reach before `first`'s entry, proves that entry
 * clean (src/core/open-gop.ts provesEntry), both decodes kept their pictures' digests through
 * `end`: each decode's chosen picture is the last one both show. null when they cannot tell.
 */
function meet(d: VideoDetails, first: ProvingDecode, earlier: ProvingDecode, end: bigint): boolean | null {
  const shared = [...first.run.prints.keys()].filter((p) => p <= end && earlier.run.prints.has(p));
  const chosen = shared.reduce<bigint | undefined>((a, p) => (a === undefined || p > a ? p : a), undefined);
  if (chosen === undefined) return null;
  const decode = ({ run, key }: ProvingDecode): EntryDecode => ({
    start: seconds(key, d),
    key: seconds(key, d),
    entry: run.entry,
    frame: seconds(chosen, d),
    print: run.prints.get(chosen) ?? null,
    prints: [...run.prints].map(([p, print]) => [seconds(p, d), print] as const),
  });
  return provesEntry(decode(first), decode(earlier), d.referenceReach);
}

/**
 * Two groups of a render that prove the stream's open-GOP entries with their own decodes (src/core/
 * open-gop.ts proofPair): `first` opening at entry keyframe `keys.first`, `earlier` at `keys.earlier`,
 * both decoding through the returned `end`. null when another group already holds the proof (or
 * its verdict is in).
 */
function proofMeeting(
  openGops: OpenGops,
  d: VideoDetails,
  keys: { earlier: bigint; first: bigint },
): { meeting: ProofPair<Run>; from: bigint; end: bigint } | null {
  const claim = openGops.claimNow();
  if (!claim) return null;
  const end = aheadOf(d, keys.first);
  const meeting = new ProofPair<Run>(claim, (earlier, first) => {
    const proven = meet(d, { run: first, key: keys.first }, { run: earlier, key: keys.earlier }, end);
    debug(
      'open-GOP entries: %s by a pair of groups',
      proven === null ? 'not told' : proven ? 'proven' : 'disproven',
    );
    return proven;
  });
  return { meeting, from: keys.first, end };
}

/**
 * Where decodes proving entry keyframe `key` ahead end: the reach and AHEAD_MARGIN past it (a
 * picture both decodes show then lies at least the reach past it).
 */
function aheadOf(d: VideoDetails, key: bigint): bigint {
  const [tbNum, tbDen] = d.timeBase;
  return key + BigInt(Math.ceil(((d.referenceReach + AHEAD_MARGIN) * Number(tbDen)) / Number(tbNum)));
}

/**
 * The render's proof pair (src/core/open-gop.ts proofPair) among `groups` (ascending indices into
 * packets.pts, each opening at the last of `keyframes` at or before its first target): each side's
 * role by group index, sharing one meeting. null without a pair, or when another part's groups
 * already hold the proof.
 */
export function proofPairOf(
  groups: number[][],
  packets: Packets,
  keyframes: bigint[],
  entries: Set<bigint>,
  d: VideoDetails,
  openGops: OpenGops,
): { sides: Map<number, PairRole> } | null {
  const opening = groups.map((group) => {
    const first = packets.pts[group[0] as number] as bigint;
    return keyframes[lastAtOrBefore(keyframes, (k) => k <= first)];
  });
  const weighed = groups.flatMap((group, g) => {
    const key = opening[g];
    if (key === undefined) return [];
    const last = packets.pts[group[group.length - 1] as number] as bigint;
    const before = keyframes[keyframes.indexOf(key) - 1];
    return [
      {
        g,
        key: seconds(key, d),
        last: seconds(last, d),
        entry: entries.has(key),
        previous: before === undefined ? d.startTime : seconds(before, d),
      },
    ];
  });
  const chosen = proofPair(weighed, d.referenceReach);
  if (!chosen) return null;
  const earlier = weighed[chosen.earlier] as (typeof weighed)[number];
  const first = weighed[chosen.first] as (typeof weighed)[number];
  const keys = { earlier: opening[earlier.g] as bigint, first: opening[first.g] as bigint };
  const made = proofMeeting(openGops, d, keys);
  if (!made) return null;
  return {
    sides: new Map([
      [earlier.g, { side: 'earlier', ...made }],
      [first.g, { side: 'first', ...made }],
    ]),
  };
}
