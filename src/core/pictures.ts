/**
 * The `picture` signal (DESIGN §10): what the frames an engine decodes anyway show between two
 * cells, compared on a tiny luma thumbnail of each (`PacketLog.pictures`/`thumbs`, see
 * ./packet-log.ts). Packet sizes cannot tell a flash from a cut: a white frame is the cheapest
 * picture there is, and with B-frames nothing refers to it. Its picture can.
 *
 * Differences are mean absolute differences in luma levels (0..255), per thumbnail pixel:
 * - `step`: how much a decoded frame differs from the decoded frame before it (a cut, a lasting
 *   change, motion); a gap's is its largest.
 * - `departure` of a frame f between two ends a and b: how much f differs from the nearer end
 *   beyond how much the ends differ from each other, `max(0, min(|f-a|, |f-b|) - |a-b|)`,
 *   averaged. A one-frame flash between two alike frames scores its whole contrast, an object that
 *   comes and goes its contrast times its share of the picture; a cut, motion or a fade between
 *   the ends scores about nothing (the frame is near one end, or the ends differ as much). A gap's
 *   departure is the largest of its decoded frames' against the gap's two cells where the frames
 *   departing in a row last at most BRIEF_SECONDS (a whole shot between two cuts departs too, but
 *   is no surprise), and of each decoded frame against the decoded frames right next to it (a
 *   flash inside a gap that also holds a cut).
 * A gap departs when its departure is well above the run's median gap, as `bitrate` is judged (a
 * noisy or busy clip raises its own bar); how strongly, by its size in levels (a white flash over
 * a dim scene before a small object). Prototyped and ranked against every frame's thumbnail in
 * bench/hunt/picture-oracle.mjs.
 */

/** Thumbnail size: area means of the luma plane over a 32x18 grid, one byte each, row by row. */
export const THUMB = { w: 32, h: 18 } as const;
export const THUMB_BYTES = THUMB.w * THUMB.h;
/**
 * Pictures a render hands over at most (58 MB of thumbnails): an hour of 30 fps video decoded
 * whole is 108,000. Past it the rest of the run has no `picture` signal, so a stream of a million
 * tiny frames (a hostile upload) costs no more memory than a long film. The native engine's twin
 * is crates/vidsheet-core/src/video/thumbs.rs MAX_PICTURES.
 */
export const MAX_PICTURES = 100_000;

/**
 * The rule's constants, measured on the real haystacks (bench/hunt/picture-oracle.mjs):
 * a departure counts at DEPARTURE_MIN levels and DEPARTURE_RATIO times the run's median gap
 * departure, its strength growing on a log scale from DEPARTURE_MIN to full at DEPARTURE_FULL
 * levels; a frame unlike both its neighbours by FLASH_MIN levels is a flash, and departs; a step
 * counts as `bitrate` does, from STEP_RATIO times the median gap's largest step, full at
 * STEP_FULL. The floors keep a still clip's grain (a median of ~0) from making every flicker a
 * departure. BRIEF_SECONDS: how long frames may depart in a row and still be a short departure
 * (what a model looks for: a flash, something that comes and goes; a shot between two cuts lasts
 * seconds).
 */
export const PICTURE = {
  DEPARTURE_MIN: 1.5,
  DEPARTURE_RATIO: 4,
  DEPARTURE_FULL: 255,
  FLASH_MIN: 20,
  BRIEF_SECONDS: 1,
  STEP_RATIO: 2.5,
  STEP_FULL: 16,
  DEPARTURE_FLOOR: 0.05,
  STEP_FLOOR: 0.5,
} as const;

/**
 * Neighbours are "right next to" a frame when each is at most this many frame steps from it: the
 * native engine skips the non-reference pictures around a decoded one (B-frames, every other
 * picture), so a decoded frame's neighbours are often two steps away.
 */
const NEXT_TO_STEPS = 2.5;
/** Steps a gap needs, besides its two largest, to judge what is usual in it. */
const LOCAL_STEPS = 4;

/** Mean absolute difference of two thumbnails. */
export function diff(a: Uint8Array, b: Uint8Array): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += Math.abs((a[i] as number) - (b[i] as number));
  return s / a.length;
}

/** The departure of `f` from the ends `a` and `b` (see the module comment). */
export function departure(f: Uint8Array, a: Uint8Array, b: Uint8Array): number {
  let s = 0;
  for (let i = 0; i < f.length; i++) {
    const x = f[i] as number;
    const y = a[i] as number;
    const z = b[i] as number;
    const near = Math.min(Math.abs(x - y), Math.abs(x - z));
    const ends = Math.abs(y - z);
    if (near > ends) s += near - ends;
  }
  return s / f.length;
}

/** Median of a list (0 for an empty one). */
export function median(values: number[]): number {
  if (values.length === 0) return 0;
  const s = [...values].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
}

/** The decoded pictures, each once, in presentation order. */
export interface Pictures {
  times: number[];
  thumbs: Uint8Array[];
  /** The stream's frame step (s): the shortest distance between two decoded pictures. */
  step: number;
}

/**
 * The log's pictures, each once (a picture decoded twice, after a seek back or by two workers, has
 * one time and one picture), in time order.
 */
export function picturesOf(log: { pictures: Float64Array; thumbs: Uint8Array }): Pictures {
  const byTime = new Map<number, Uint8Array>();
  for (let i = 0; i < log.pictures.length; i++) {
    const t = log.pictures[i] as number;
    const thumb = log.thumbs.subarray(i * THUMB_BYTES, (i + 1) * THUMB_BYTES);
    if (Number.isFinite(t) && thumb.length === THUMB_BYTES && !byTime.has(t)) byTime.set(t, thumb);
  }
  const times = [...byTime.keys()].sort((a, b) => a - b);
  let step = Number.POSITIVE_INFINITY;
  for (let i = 1; i < times.length; i++) {
    const d = (times[i] as number) - (times[i - 1] as number);
    if (d > 1e-4) step = Math.min(step, d);
  }
  return { times, thumbs: times.map((t) => byTime.get(t) as Uint8Array), step };
}

/** What the decoded frames say of one gap (see the module comment). */
export interface PictureGap {
  departure: number;
  /** The largest departure of a frame from the frames right next to it (part of `departure`). */
  flash: number;
  step: number;
}

/**
 * One gap's measures: the decoded pictures strictly between the shown times `from` and `to` (the
 * two cells' frames; a window edge is no picture), against the pictures at those times where
 * decoded. null when no picture in it was decoded (DESIGN §10: no `picture` signal then).
 */
export function pictureGap(p: Pictures, from: number, to: number): PictureGap | null {
  const at = (t: number) => {
    const i = firstAfter(p.times, t - 1e-6);
    return i < p.times.length && Math.abs((p.times[i] as number) - t) <= 1e-6 ? i : -1;
  };
  const lo = firstAfter(p.times, from + 1e-6);
  const hi = firstAfter(p.times, to - 1e-6);
  if (hi <= lo) return null;
  const [a, b] = [at(from), at(to)];
  const chain = [...(a >= 0 ? [a] : []), ...range(lo, hi), ...(b >= 0 ? [b] : [])];
  const thumb = (i: number) => p.thumbs[i] as Uint8Array;
  const time = (i: number) => p.times[i] as number;
  const steps = chain.slice(1).map((f, m) => diff(thumb(f), thumb(chain[m] as number)));
  // The gap's own usual change from frame to frame, which a departure must stand out of: a
  // picture that changes wholly every frame (an audio visualiser, noise, flicker) departs from
  // everything and means nothing, and moving footage departs a little from both cells all along.
  // The two largest steps (a departure's way in and out) are not the usual; too few others say
  // nothing.
  const others = [...steps].sort((x, y) => x - y).slice(0, -2);
  const usual = Math.max(
    PICTURE.DEPARTURE_MIN,
    others.length >= LOCAL_STEPS ? PICTURE.DEPARTURE_RATIO * median(others) : 0,
  );
  let flash = 0;
  const reach = NEXT_TO_STEPS * p.step;
  for (let m = 1; m + 1 < chain.length; m++) {
    const [prev, f, next] = [chain[m - 1], chain[m], chain[m + 1]] as [number, number, number];
    if (f !== b && time(f) - time(prev) <= reach && time(next) - time(f) <= reach)
      flash = Math.max(flash, departure(thumb(f), thumb(prev), thumb(next)));
  }
  // Against the two cells: the largest departure of a brief run of frames departing by the usual.
  let dep = 0;
  if (a >= 0 && b >= 0) {
    let run = null as { from: number; peak: number } | null;
    for (let i = lo; i <= hi; i++) {
      const d = i < hi ? departure(thumb(i), thumb(a), thumb(b)) : 0;
      if (d >= usual) {
        run = { from: run?.from ?? time(i), peak: Math.max(run?.peak ?? 0, d) };
        continue;
      }
      if (run && time(i - 1) - run.from <= PICTURE.BRIEF_SECONDS) dep = Math.max(dep, run.peak);
      run = null;
    }
  }
  const flashed = flash >= usual ? flash : 0;
  return { departure: Math.max(dep, flashed), flash: flashed, step: Math.max(0, ...steps) };
}

/** A gap's picture part: whether it departs, and each part's strength (0..1). */
export interface PictureScore {
  departs: boolean;
  departure: number;
  step: number;
}

/** The picture parts of a run's gaps (null where nothing was decoded), against its median gap. */
export function pictureScores(gaps: Array<PictureGap | null>): Array<PictureScore | null> {
  const measured = gaps.filter((g): g is PictureGap => g !== null);
  const baseDep = Math.max(PICTURE.DEPARTURE_FLOOR, median(measured.map((g) => g.departure)));
  const baseStep = Math.max(PICTURE.STEP_FLOOR, median(measured.map((g) => g.step)));
  const strength = (levels: number) =>
    Math.min(
      1,
      Math.log(levels / PICTURE.DEPARTURE_MIN) / Math.log(PICTURE.DEPARTURE_FULL / PICTURE.DEPARTURE_MIN),
    );
  return gaps.map((g) => {
    if (!g) return null;
    const dr = g.departure / baseDep;
    const departs =
      g.flash >= PICTURE.FLASH_MIN || (g.departure >= PICTURE.DEPARTURE_MIN && dr >= PICTURE.DEPARTURE_RATIO);
    const sr = g.step / baseStep;
    return {
      departs,
      departure: departs ? strength(g.departure) : 0,
      step: sr >= PICTURE.STEP_RATIO ? Math.min(1, Math.log(sr) / Math.log(PICTURE.STEP_FULL)) : 0,
    };
  });
}

/**
 * A gap's score (0..1) from its other signals' (`others`) and its picture part: a short departure
 * (the picture's, or the keyframes' with `departs`) ranks above every gap without one (DESIGN §10:
 * a flash, an object that comes and goes, above an ordinary cut), so departures score 0.5 and up,
 * everything else below 0.5. Among departures, how far the picture departs comes first: the other
 * signals only add REST_AMONG_DEPARTURES of theirs (a visualiser's busy cuts cost keyframes and
 * bytes, a white flash does not), and a departure seen only in the keyframes (its pictures not
 * decoded, or the pictures say nothing) counts as KEYFRAME_DEPARTURE.
 */
export function combinedScore(others: number, picture: PictureScore | null, departs = false): number {
  const rest = 1 - (1 - others) * (1 - (picture?.step ?? 0));
  if (!departs && !picture?.departs) return 0.5 * rest;
  const strength = Math.max(picture?.departure ?? 0, departs ? KEYFRAME_DEPARTURE : 0);
  return 0.5 + 0.5 * (1 - (1 - strength) * (1 - REST_AMONG_DEPARTURES * rest));
}

const REST_AMONG_DEPARTURES = 0.3;
const KEYFRAME_DEPARTURE = 0.5;

/** The first index whose value is above `t`, in an ascending list. */
function firstAfter(values: number[], t: number): number {
  let lo = 0;
  let hi = values.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if ((values[mid] as number) <= t) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

const range = (lo: number, hi: number) => Array.from({ length: hi - lo }, (_, i) => lo + i);
