/**
 * The plan of one part of a render (a run of its target times): the packets its frames are
 * chosen from, where decoding may start, the groups one process each decodes, and whether those
 * enter the stream's open GOPs (cost.ts) and which two of them prove the entries (entry-proof.ts).
 */
import { type Costs, paysToEnter, referenceShare } from './cost.js';
import { type PairRole, proofPairOf } from './entry-proof.js';
import { groupFrames, packetsFor } from './groups.js';
import type { VideoDetails } from './media.js';
import { pictureHints } from './nal.js';
import type { StreamLists } from './packet-log.js';
import { frameAt, lastAtOrBefore, type Packets } from './packets.js';
import type { OpenGops } from './recovery.js';

export interface PartPlan {
  packets: Packets;
  /** Where decoding may start (ascending pts): the true random-access points, or every keyframe when entering. */
  keyframes: bigint[];
  /** The keyframes that are sync samples in name only, when decoding enters at them; else empty. */
  entries: Set<bigint>;
  /** Each target time's frame: an index into packets.pts (-1: none). */
  frameIndex: Map<number, number>;
  /** The targets (ascending indices into packets.pts) in groups, one decoding process each. */
  groups: number[][];
  /** Whether each target is a reference picture (undefined: not told). */
  isReference: Map<number, boolean | undefined>;
  /** Decoding threads per process (0: every core). */
  threads: number;
  /** The render's proof pair, when two of this part's groups prove the entries. */
  pair: { sides: Map<number, PairRole> } | null;
}

/** Plans the parts of one render. */
export class PartPlanner {
  /** The stream's share of reference pictures (the open-GOP cost rule's weight), read once. */
  private shareOnce: Promise<number> | undefined;
  private readonly costs: Costs;

  constructor(
    private readonly path: string,
    private readonly d: VideoDetails,
    private readonly lists: StreamLists,
    private readonly signal: AbortSignal,
    private readonly render: { pixelRate: number | null; cores: number; parts: number; openGops: OpenGops },
  ) {
    this.costs = {
      path,
      d,
      pixelRate: render.pixelRate,
      cores: render.cores,
      share: (list) => (this.shareOnce ??= referenceShare(path, d, list)),
    };
  }

  async plan(times: number[]): Promise<PartPlan> {
    const { path, d, lists } = this;
    let packets = await packetsFor(path, d, times, () => lists.whole(), this.signal);
    lists.read(packets);
    let entries = await this.entriesOf(packets);
    let keyframes = usableKeyframes(packets, entries);
    // The whole stream's list, when the part's own does not serve.
    const listWhole = async () => {
      packets = await lists.whole();
      lists.read(packets);
      entries = await this.entriesOf(packets);
      keyframes = usableKeyframes(packets, entries);
    };
    // A target after a sync sample in name only is decoded from an earlier true random-access
    // point; when none is listed before it, the whole stream's keyframes are needed.
    const framesOf = (list: Packets) =>
      new Map(times.map((t) => [t, list.pts.length ? frameAt(list.pts, d, t) : -1]));
    const needsEarlier = (list: Packets, usable: bigint[]) =>
      [...framesOf(list).values()].some((f) => {
        const pts = list.pts[f];
        if (pts === undefined) return false;
        const listed = list.keyframes[lastAtOrBefore(list.keyframes, (k) => k <= pts)];
        return listed !== undefined && !usable.includes(listed) && !usable.some((k) => k <= pts);
      });
    if (!lists.isWhole(packets) && needsEarlier(packets, keyframes)) await listWhole();
    // Far from a true random-access point (a long open-GOP clip), decoding enters at the
    // entries instead, the first one proven (src/core/open-gop.ts). Only H.264's entries are told
    // from other trouble (decode-log.ts troubleWatch): elsewhere each entry would cost a second
    // decode. The rule is first asked of the listed packets, guessing the proof's start as close
    // as it may be; only when that says yes is the whole stream listed (the keyframes the proof
    // and the ladder go back to) and the rule asked again, exactly.
    const targetsIn = (list: Packets) =>
      [...new Set(framesOf(list).values())].filter((f) => f >= 0).sort((a, b) => a - b);
    const enters = (list: Packets, guess: boolean) =>
      paysToEnter(this.costs, list, targetsIn(list), entries, guess);
    let entering = false;
    // Bench-only (bench/open-gop.mjs): never enter, to measure what entering saves.
    const mayEnter = process.env.VIDSHEET_BENCH_NO_OPEN_GOP !== '1';
    if (
      mayEnter &&
      d.timestamps &&
      d.nal?.codec === 'h264' &&
      entries.size > 0 &&
      (await enters(packets, true))
    ) {
      if (!lists.isWhole(packets)) await listWhole();
      entering = await enters(packets, false);
    }
    if (entering) keyframes = packets.keyframes;
    else entries = new Set();
    const frameIndex = framesOf(packets);
    const wanted = targetsIn(packets);
    // Without timestamps every run decodes from the start: one run for every target.
    const groups = d.timestamps ? groupFrames(wanted, packets, keyframes) : wanted.length ? [wanted] : [];
    // May the decoder skip the non-reference pictures before a group's targets?
    const hints = await pictureHints(
      path,
      d,
      packets,
      wanted.map((f) => packets.pts[f] as bigint),
    );
    const isReference = new Map(wanted.map((f, i) => [f, hints[i]?.reference]));
    // Several groups run one per core, each single-threaded; a lone group gets every thread.
    const threads = groups.length > 1 || this.render.parts > 1 ? 1 : 0;
    // Entering, two groups may prove the stream's entries with their own decodes, running
    // alongside the others (src/core/open-gop.ts proofPair).
    const pair =
      entering && threads === 1
        ? proofPairOf(groups, packets, keyframes, entries, d, this.render.openGops)
        : null;
    return { packets, keyframes, entries, frameIndex, groups, isReference, threads, pair };
  }

  /**
   * The listed keyframes nal.ts shows to be sync samples in name only: entries (an open GOP's
   * recovery point, or a false sync sample), which only a second decode can judge.
   */
  private async entriesOf(packets: Packets): Promise<Set<bigint>> {
    const hints = await pictureHints(this.path, this.d, packets, packets.keyframes);
    return new Set(packets.keyframes.filter((_, i) => hints[i]?.randomAccess === false));
  }
}

/** The keyframes decoding may start at: the true random-access points. */
const usableKeyframes = (packets: Packets, entries: Set<bigint>) =>
  packets.keyframes.filter((k) => !entries.has(k));
