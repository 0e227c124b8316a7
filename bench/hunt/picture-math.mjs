/**
 * The picture signal's arithmetic (pure), prototyped offline for DESIGN §10's `"picture"` (issue 41):
 * tiny luma thumbnails of the frames an engine decodes, and per gap between two cells how far the
 * picture departs from both ends and how large its largest step is.
 *
 * Thumbnails are THUMB.w x THUMB.h bytes of luma (area-averaged), one per frame, in presentation
 * order. Differences are mean absolute differences in luma levels (0..255).
 *
 * - `step`: how much a decoded frame differs from the decoded frame before it (a cut, a lasting
 *   change, motion).
 * - `departure` of a frame f between two ends a and b: per thumbnail pixel, how much f differs
 *   from the nearer end beyond how much the ends differ from each other, `max(0, min(|f-a|, |f-b|)
 *   - |a-b|)`, averaged. A one-frame flash between two alike neighbours scores its whole contrast;
 *   an object that comes and goes scores its contrast times its share of the picture; a cut, motion
 *   or a fade between the ends scores about nothing (the middle frame is near one end or the ends
 *   differ as much).
 * A gap's departure is the largest of its decoded frames' against the gap's two cells (always
 * decoded), and of each decoded frame against its decoded neighbours (a flash inside a gap that
 * also holds a cut); with `brief` (frames), also against the decoded frames that far before and
 * after it (an object that comes and goes within the gap, whose ends differ anyway).
 */

export const THUMB = { w: 32, h: 18 };

/**
 * Mean absolute difference of two thumbnails (byte arrays of one length: luma alone, or luma then
 * the two 16x9 chroma planes).
 */
export function diff(a, b) {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += Math.abs(a[i] - b[i]);
  return s / a.length;
}

/** The departure of `f` from the ends `a` and `b` (see the module comment). */
export function departure(f, a, b) {
  let s = 0;
  for (let i = 0; i < f.length; i++) {
    const near = Math.min(Math.abs(f[i] - a[i]), Math.abs(f[i] - b[i]));
    const ends = Math.abs(a[i] - b[i]);
    if (near > ends) s += near - ends;
  }
  return s / f.length;
}

/**
 * Per gap between consecutive cells: `{ departure, flash, step, decoded }` from the decoded frames
 * strictly between the two cells' frames (and the second cell's frame for `step`).
 * `thumb(i)`: frame i's thumbnail; `decoded`: ascending frame indices the engine decoded (the
 * cells' frames among them); `cells`: ascending frame index of each cell. Gap k lies between
 * cells k-1 and k (k = 1..cells.length-1).
 */
export function gapMeasures(thumb, decoded, cells, { brief = 0 } = {}) {
  const has = brief ? new Set(decoded) : null;
  const out = [];
  let j = 0;
  for (let k = 1; k < cells.length; k++) {
    const [lo, hi] = [cells[k - 1], cells[k]];
    while (j < decoded.length && decoded[j] <= lo) j++;
    const inside = [];
    for (let m = j; m < decoded.length && decoded[m] < hi; m++) inside.push(decoded[m]);
    const chain = [lo, ...inside, hi];
    const a = thumb(lo);
    const b = thumb(hi);
    let dep = 0;
    let flash = 0;
    let step = 0;
    for (let m = 1; m < chain.length; m++) {
      const f = thumb(chain[m]);
      step = Math.max(step, diff(f, thumb(chain[m - 1])));
      if (m < chain.length - 1) {
        dep = Math.max(dep, departure(f, a, b));
        // A flash: unlike both decoded neighbours, when they are the frames right next to it.
        if (chain[m + 1] - chain[m - 1] === 2)
          flash = Math.max(flash, departure(f, thumb(chain[m - 1]), thumb(chain[m + 1])));
        // A brief event: unlike the decoded frames `brief` frames before and after it.
        const [x, y] = [chain[m] - brief, chain[m] + brief];
        if (has?.has(x) && has.has(y)) dep = Math.max(dep, departure(f, thumb(x), thumb(y)));
      }
    }
    out.push({ departure: Math.max(dep, flash), flash, step, decoded: inside.length, frames: hi - lo - 1 });
  }
  return out;
}

/** Median of a list (0 for an empty one). */
export function median(values) {
  if (!values.length) return 0;
  const s = [...values].sort((x, y) => x - y);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

/**
 * The picture part of a gap's score, 0..1, and whether it is a departure (a short excursion from
 * the run's normal) or a step (a cut). A departure counts when it is at least DEPARTURE_MIN levels
 * and DEPARTURE_RATIO times the run's median gap departure, reaching 1 at DEPARTURE_FULL times;
 * a step counts as `bitrate` does (STEP_RATIO times the median gap's largest step).
 */
export const PICTURE = {
  DEPARTURE_MIN: 1.5,
  DEPARTURE_RATIO: 4,
  DEPARTURE_FULL: 64,
  FLASH_MIN: 20,
  STEP_RATIO: 2.5,
  STEP_FULL: 16,
};

/**
 * `flashes`: a frame unlike both its adjacent neighbours by FLASH_MIN levels; it ranks first (the
 * departure's strength becomes 1).
 */
export function pictureScores(measures, p = PICTURE) {
  const baseDep = Math.max(0.05, median(measures.map((m) => m.departure)));
  const baseStep = Math.max(0.5, median(measures.map((m) => m.step)));
  return measures.map((m) => {
    const dr = m.departure / baseDep;
    const flashes = (m.flash ?? 0) >= p.FLASH_MIN;
    const departs = flashes || (m.departure >= p.DEPARTURE_MIN && dr >= p.DEPARTURE_RATIO);
    const sr = m.step / baseStep;
    return {
      departs,
      flashes,
      departure: flashes ? 1 : departs ? Math.min(1, Math.log(dr) / Math.log(p.DEPARTURE_FULL)) : 0,
      step: sr >= p.STEP_RATIO ? Math.min(1, Math.log(sr) / Math.log(p.STEP_FULL)) : 0,
    };
  });
}

/**
 * One gap's combined score (0..1) from today's packet score and the picture's parts: a departure
 * ranks above every gap without one (0.5 + half its strength and of the rest), everything else
 * below 0.5 by today's score combined with the step (a cut seen in the picture).
 */
export function combinedScore(today, picture) {
  const rest = 1 - (1 - today) * (1 - picture.step);
  return picture.departs ? 0.5 + 0.5 * (1 - (1 - picture.departure) * (1 - rest)) : 0.5 * rest;
}
