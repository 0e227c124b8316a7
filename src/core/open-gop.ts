/**
 * Open GOPs, proven once per stream: whether one decode entered at a keyframe that is not a true
 * random-access point (an H.264 open GOP's recovery point) proves every such entry of the stream
 * clean. One rule for both engines (the native one's is crates/vidsheet-core/src/video/recover.rs
 * `proves`), checked by the shared vectors in fixtures/vectors/open-gop-proof.json.
 *
 * Entering H.264 at a keyframe that is not an IDR always looks like trouble: the decoder invents
 * the reference pictures before it and fails to forget pictures the encoder drops there. Whether
 * later pictures really reference across that keyframe (a false sync sample) only a second decode
 * from further back tells, which for a legitimate open GOP costs a whole GOP per target. So the
 * first such entry of a stream is verified by the recovery ladder, and when that verification
 * proves it clean, later entries whose only trouble is that kind are accepted without one.
 *
 * The proof: decoded from the keyframe and from a start at least the reference reach earlier,
 * every picture shown from the keyframe to the chosen frame came out the same, over at least the
 * reference reach. Past the reach the pictures invented at the keyframe are out of the decoder's
 * reference window, so that entry is clean for every later frame; an encoder that references
 * across some keyframes does so within the reach of one of them, and a stream whose keyframes are
 * closer together than the reach (a false sync sample every second) is never proven.
 *
 * Native always enters. The fallback's alternative, decoding from the last true random-access
 * point (in x264's open-GOP output the stream's first frame), is exact without any proof and cheap
 * near that point, while each entry costs a process of its own and the proof a GOP more: it enters
 * only where that saves a large factor (entersOpenGops), i.e. targets many GOPs past the point.
 */

/** One decode towards a target (or a group of targets), as the proof reads it. */
export interface EntryDecode {
  /** Where decoding began (any unit `reach` is in; a later start is larger). */
  start: number;
  /** The keyframe decoding entered at; null when there is none. */
  key: number | null;
  /** Everything the decode found wrong is what entering at that keyframe produces. */
  entry: boolean;
  /** The chosen frame (of a group, the last) and a digest of its picture(s); null: unknown. */
  frame: number;
  print: string | null;
  /** Digests of the pictures shown, by time, where they were kept. */
  prints: ReadonlyArray<readonly [number, string]>;
}

/**
 * Whether `earlier`, a later decode for the same target(s) that started further back, proves
 * `first`'s entry clean: `first` found nothing but what entering at its keyframe produces and
 * chose a frame at least `reach` after that keyframe; `earlier` started at least `reach` before
 * it, chose the very same picture, and every picture both showed from the keyframe to the chosen
 * frame is the same (pictures only one decode showed are non-reference ones it skipped: nothing
 * depends on them). null when the two cannot tell; false when they disprove it.
 */
export function provesEntry(first: EntryDecode, earlier: EntryDecode, reach: number): boolean | null {
  const key = first.key;
  if (key === null || !first.entry || first.frame - key < reach || first.start - earlier.start < reach) {
    return null;
  }
  const theirs = new Map(earlier.prints);
  const compared = first.prints.flatMap(([t, print]) => {
    const other = t >= key && t <= first.frame ? theirs.get(t) : undefined;
    return other === undefined ? [] : [other === print];
  });
  return (
    first.print !== null &&
    first.frame === earlier.frame &&
    first.print === earlier.print &&
    compared.length > 0 &&
    compared.every((same) => same)
  );
}

/**
 * Entering open GOPs costs: the seconds of stream each decode run decodes, weighted by the share of
 * its frames the decoder really decodes (frames decoded, the bulk of a render's time), laid out on
 * the cores the runs share. A run of targets opening at a keyframe `key`, its last target `last`,
 * as the groups would be if every keyframe were a start.
 */
export interface GopGroup {
  key: number;
  last: number;
  /** The keyframe is not a true random-access point (an open GOP's recovery point). */
  entry: boolean;
  /** The keyframe before `key` (null: none, the stream's start is the next start further back). */
  previous: number | null;
  /** The last true random-access point at or before `key` (null: none, the stream's start). */
  randomAccess: number | null;
  /**
   * The share of the frames a decode to this group's targets decodes: 1, or, where every target is
   * a reference picture (the decoder then skips the others, `-skip_frame noref`), the stream's
   * share of reference pictures.
   */
  decoded: number;
}

/**
 * Entering must save at least this factor: an entry that cannot be proven costs the ladder's
 * decodes from further back on top.
 */
export const ENTER_MARGIN = 1.25;

/**
 * What one more decode run costs beyond its frames (a process started, its seek, its filter graph,
 * its log read), in pixels decoded: measured on the fallback, entering every GOP of a 2-minute
 * 640x360 30 fps clip (14 more runs) cost about 0.16 s of CPU a run, what decoding 90 megapixels
 * costs (1.4 s of 1080p30, 13 s of 640x360 at 30 fps). So short, small clips stay on one run.
 */
export const RUN_PIXELS = 90e6;

/**
 * The seconds of stream one more run costs, for a stream of `pixelsPerSecond` (width x height x
 * frame rate); 0 when that is unknown.
 */
export function runSeconds(pixelsPerSecond: number | null): number {
  return pixelsPerSecond && pixelsPerSecond > 0 ? RUN_PIXELS / pixelsPerSecond : 0;
}

/**
 * How long runs of these costs take on `cores` single-threaded decoders: a run is not split, so
 * never less than the longest run, nor than their sum shared by the cores.
 */
function spread(runs: number[], cores: number): number {
  const sum = runs.reduce((a, b) => a + b, 0);
  return Math.max(sum / Math.max(1, cores), ...runs, 0);
}

/**
 * Whether decoding starts at open-GOP entries (then the first entry is proven, see provesEntry)
 * rather than only at true random-access points, where the decode from those takes much longer
 * than the entries' own decodes plus the proof. Each run costs its span in seconds of stream times
 * the share of frames it decodes (GopGroup.decoded), plus `run` seconds (see runSeconds):
 * - from the last true random-access point: per such point one run to its last target, skipping
 *   non-reference pictures only where every group it serves does; the runs share the cores;
 * - entering: one run per group from its keyframe. The first entry's two decodes (its own, and the
 *   proof's from the keyframe before or the stream's `start`) both go on to at least `reach` past
 *   the keyframe, decoding every frame, one after the other while the other entries wait for the
 *   verdict; the remaining runs then share the cores. (An upper bound: where two groups' own
 *   decodes prove it, proofPair, the proof adds no run and nothing waits.)
 */
export function entersOpenGops(
  groups: readonly GopGroup[],
  { reach, start, run, cores }: { reach: number; start: number; run: number; cores: number },
): boolean {
  const first = groups.find((g) => g.entry);
  if (!first) return false;
  const fromRandomAccess = new Map<number, { last: number; decoded: number }>();
  for (const g of groups) {
    const ra = g.randomAccess ?? start;
    const seen = fromRandomAccess.get(ra) ?? { last: ra, decoded: 0 };
    fromRandomAccess.set(ra, {
      last: Math.max(seen.last, g.last),
      decoded: Math.max(seen.decoded, g.decoded),
    });
  }
  const today = spread(
    [...fromRandomAccess].map(([ra, { last, decoded }]) => (last - ra) * decoded + run),
    cores,
  );
  const through = Math.max(first.last, first.key + reach);
  const proof = through - first.key + run + (through - (first.previous ?? start)) + run;
  const rest = groups.filter((g) => g !== first).map((g) => (g.last - g.key) * g.decoded + run);
  return today >= ENTER_MARGIN * (proof + spread(rest, cores));
}

/**
 * How far past the reach a proof made ahead goes (seconds), so that a picture both its decodes
 * show lies at least the reach past the keyframe (pictures come every few frames in either).
 */
export const AHEAD_MARGIN = 0.25;

/**
 * Where the first entry's proof is cheaper: behind, a second decode from the keyframe before
 * (`previous`, or the stream's start) through the entry's own decode's end (its last target, at
 * least the reach past `key`); or ahead, the entry's own decode carried on to the reach (and
 * AHEAD_MARGIN) past `next`, the keyframe after its targets, met by a decode from `next` over that
 * span: the two started at least the reach apart, so they prove `next`'s entry, and with it the
 * stream's, with no decode from further back. Ahead only where `next` is an entry at least the
 * reach after `key`.
 */
export function provesAhead({
  key,
  last,
  next,
  previous,
  reach,
}: {
  key: number;
  last: number;
  /** The next keyframe when it is an entry, else null. */
  next: number | null;
  previous: number;
  reach: number;
}): boolean {
  if (next === null || next - key < reach) return false;
  const own = Math.max(last, key + reach);
  const end = next + reach + AHEAD_MARGIN;
  return end - own + (end - next) < own - previous;
}

/** A group as proofPair weighs it (seconds): the keyframe it opens at and its last target. */
export interface OpeningGroup {
  key: number;
  last: number;
  /** The keyframe is not a true random-access point (an open GOP's recovery point). */
  entry: boolean;
  /** The keyframe before `key`, or the stream's start where there is none. */
  previous: number;
}

/**
 * Two groups of a render whose own decodes prove the stream's entries between them, with no
 * decode of their own (unlike provesAhead and the proof behind, which add one while the other
 * entries wait): `first` opens at an entry, `earlier` at a keyframe at least the reach before it.
 * `earlier`'s decode is carried on to `end` (the reach and AHEAD_MARGIN past `first`'s keyframe),
 * `first`'s goes at least there, both keeping their pictures' digests: what provesEntry compares,
 * as provesAhead's two decodes. Of such pairs the one that decodes least past its targets (indices
 * into `groups`), where that is less than `first` proving behind would decode (from the keyframe
 * before it, as the ladder's next attempt; else the pair would cost the other groups more than the
 * wait it spares them); null where there is none.
 */
export function proofPair(
  groups: readonly OpeningGroup[],
  reach: number,
): { earlier: number; first: number; end: number } | null {
  let best: { earlier: number; first: number; end: number; cost: number } | null = null;
  for (const [f, first] of groups.entries()) {
    if (!first.entry) continue;
    const end = first.key + reach + AHEAD_MARGIN;
    for (const [e, earlier] of groups.entries()) {
      if (first.key - earlier.key < reach || earlier.last >= first.key) continue;
      const cost = end - earlier.last + Math.max(0, end - first.last);
      const behind = Math.max(first.last, first.key + reach) - first.previous;
      if (cost < behind && (!best || cost < best.cost)) best = { earlier: e, first: f, end, cost };
    }
  }
  return best && { earlier: best.earlier, first: best.first, end: best.end };
}
