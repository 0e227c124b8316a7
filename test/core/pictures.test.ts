/**
 * The picture signal's parts (src/core/pictures.ts) that the shared vectors reach only through
 * whole runs (fixtures/vectors/zoom-hints.json): the decoded pictures as the engines hand them
 * over (repeats, any order), which frames a gap's measures read, and the score's bands.
 */
import { describe, expect, it } from 'vitest';
import {
  combinedScore,
  departure,
  diff,
  pictureGap,
  pictureScores,
  picturesOf,
  THUMB_BYTES,
} from '../../src/core/pictures.js';

const flat = (v: number) => new Uint8Array(THUMB_BYTES).fill(v);
/** A log of pictures at `times` (seconds), each a flat thumbnail at its level. */
function log(frames: Array<[number, number]>) {
  const thumbs = new Uint8Array(frames.length * THUMB_BYTES);
  frames.forEach(([, level], i) => {
    thumbs.fill(level, i * THUMB_BYTES, (i + 1) * THUMB_BYTES);
  });
  return { pictures: Float64Array.from(frames.map(([t]) => t)), thumbs };
}

describe('picturesOf', () => {
  it('keeps each picture once, in time order, and takes the frame step from the closest two', () => {
    const p = picturesOf(
      log([
        [0.4, 40],
        [0.0, 10],
        [0.4, 40],
        [0.08, 20],
        [Number.NaN, 99],
        [0.12, 30],
      ]),
    );
    expect(p.times).toEqual([0, 0.08, 0.12, 0.4]);
    expect(p.thumbs.map((t) => t[0])).toEqual([10, 20, 30, 40]);
    expect(p.step).toBeCloseTo(0.04, 9);
  });
});

describe('pictureGap', () => {
  // 25 fps: cells' frames at 1 s and 2 s, level 100; a white frame at 1.48 s.
  const frames = (skip: (t: number) => boolean) =>
    Array.from({ length: 76 }, (_, i) => i / 25)
      .filter((t) => !skip(t))
      .map((t): [number, number] => [t, Math.abs(t - 1.48) < 1e-9 ? 255 : 100]);

  it('reads only the pictures strictly between the two cells, and none is no measure', () => {
    const p = picturesOf(log(frames((t) => t > 1 && t < 2)));
    expect(pictureGap(p, 1, 2)).toBeNull();
    expect(pictureGap(picturesOf(log(frames(() => false))), 0.2, 1)?.step).toBe(0);
  });

  it('a frame unlike both neighbours is a flash when they are right next to it, within 2.5 steps', () => {
    const all = pictureGap(picturesOf(log(frames(() => false))), 1, 2);
    expect(all).toEqual({ departure: 155, flash: 155, step: 155 });
    // Every other frame skipped (B-frames): its neighbours 2 steps away still count (the frame
    // step comes from the one pair decoded next to each other, 49 and 50).
    const at = (t: number) => Math.round(t * 25);
    const everyOther = frames((t) => at(t) % 2 === 0 && at(t) !== 50);
    expect(pictureGap(picturesOf(log(everyOther)), 1, 2)?.flash).toBe(155);
    // Neighbours 1 and 3 steps away: no flash; it still departs from the two cells.
    const sparse = frames((t) => at(t) % 4 !== 0 && ![25, 37, 50].includes(at(t)));
    expect(pictureGap(picturesOf(log(sparse)), 1, 2)).toEqual({ departure: 155, flash: 0, step: 155 });
  });

  it('without both cells (a window edge) a frame departs only from its neighbours', () => {
    const p = picturesOf(log(frames((t) => t === 1 || t === 2)));
    expect(pictureGap(p, 0.999, 2.001)?.flash).toBe(155);
  });
});

describe('scores', () => {
  it('measures flat and patched thumbnails as the module says', () => {
    expect(diff(flat(60), flat(200))).toBe(140);
    expect(departure(flat(235), flat(60), flat(62))).toBeCloseTo(171, 9);
    expect(departure(flat(130), flat(60), flat(200))).toBe(0);
  });

  it('ranks any departure above every gap without one', () => {
    const still = { departure: 0, flash: 0, step: 1 };
    const [, , , quiet, cut, flash] = pictureScores([
      still,
      still,
      still,
      still,
      { departure: 0.5, flash: 0, step: 80 },
      { departure: 255, flash: 255, step: 255 },
    ]);
    expect(quiet).toEqual({ departs: false, departure: 0, step: 0 });
    expect(cut?.departs).toBe(false);
    expect(cut?.step).toBe(1);
    expect(flash).toEqual({ departs: true, departure: 1, step: 1 });
    // A cut seen by every other signal too stays below 0.5; a weak departure is above it.
    expect(combinedScore(1, cut ?? null)).toBe(0.5);
    expect(combinedScore(0, { departs: true, departure: 0, step: 0 })).toBe(0.5);
    expect(combinedScore(0.2, { departs: true, departure: 0.33, step: 0 })).toBeGreaterThan(0.5);
    // Among departures the picture's size comes first: a white flash alone above a small object
    // that every other signal saw too; a keyframe departure alone counts as half strength.
    expect(combinedScore(0, flash ?? null)).toBe(1);
    expect(combinedScore(1, { departs: true, departure: 0.3, step: 1 })).toBeCloseTo(0.755, 9);
    expect(combinedScore(0.9, null, true)).toBeCloseTo(0.5 + 0.5 * (1 - 0.5 * (1 - 0.27)), 9);
    expect(combinedScore(0.9, null)).toBe(0.45);
  });
});
