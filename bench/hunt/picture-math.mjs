/**
 * The picture signal modelled offline, by frame index (bench/hunt/picture-oracle.mjs): which
 * frames an engine would decode, and per gap between two cells what their thumbnails say. The
 * arithmetic (thumbnails, `diff`, `departure`, the scores) is the engines' own rule's,
 * src/core/pictures.ts, where each measure is described; `brief` (frames) adds a comparison the
 * rule does not make: each frame against the decoded frames that far before and after it.
 */
import { departure, diff } from '../../dist/core/pictures.js';

export {
  combinedScore,
  departure,
  diff,
  median,
  PICTURE,
  pictureScores,
  THUMB,
} from '../../dist/core/pictures.js';

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
