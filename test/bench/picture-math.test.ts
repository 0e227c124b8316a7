/**
 * The offline picture signal's arithmetic (bench/hunt/picture-math.mjs) and the real haystacks'
 * timeline (bench/hunt/real-haystack.mjs): pure, no video.
 */
import { describe, expect, it } from 'vitest';
import {
  combinedScore,
  departure,
  diff,
  gapMeasures,
  pictureScores,
  THUMB,
} from '../../bench/hunt/picture-math.mjs';
import { timeline } from '../../bench/hunt/real-haystack.mjs';
import { prng } from '../../fixtures/prng.mjs';

const PIXELS = THUMB.w * THUMB.h;
const flat = (v: number) => new Uint8Array(PIXELS).fill(v);
/** A thumbnail of `base` with the first `share` of its pixels set to `v`. */
const patch = (base: number, v: number, share: number) => {
  const t = flat(base);
  t.fill(v, 0, Math.round(share * PIXELS));
  return t;
};

describe('departure', () => {
  it('scores a flash between alike ends at its whole contrast, a cut at nothing', () => {
    expect(departure(flat(235), flat(60), flat(62))).toBeCloseTo(171, 0);
    expect(departure(flat(60), flat(60), flat(200))).toBe(0);
    expect(departure(flat(130), flat(60), flat(200))).toBe(0);
    expect(diff(flat(60), flat(200))).toBe(140);
  });
  it('scores an object that comes and goes by its share of the picture', () => {
    expect(departure(patch(100, 40, 0.1), flat(100), flat(100))).toBeCloseTo(6, 0);
  });
});

describe('gapMeasures and the scores', () => {
  // 100 frames of a flat 100, a flash at 33, a cut to 160 at 70; cells every 10 frames.
  const frames = Array.from({ length: 100 }, (_, i) => flat(i === 33 ? 235 : i < 70 ? 100 : 160));
  const thumb = (i: number) => frames[i] as Uint8Array;
  const cells = Array.from({ length: 10 }, (_, k) => k * 10);
  const all = Array.from({ length: 100 }, (_, i) => i);

  it('sees the flash when its frame is decoded, not when it is skipped', () => {
    const m = gapMeasures(thumb, all, cells);
    expect(m[3]?.departure).toBeCloseTo(135, 0);
    expect(m[6]?.departure).toBe(0);
    expect(m[6]?.step).toBe(60);
    const skipped = gapMeasures(
      thumb,
      all.filter((i) => i !== 33),
      cells,
    );
    expect(skipped[3]?.departure).toBe(0);
  });
  it('ranks the departure above the cut, and the cut above still gaps', () => {
    const pictures = pictureScores(gapMeasures(thumb, all, cells));
    const scores: number[] = pictures.map((p, i) => combinedScore(i === 6 ? 0.8 : 0, p));
    const order = scores.map((s, i) => [s, i] as const).sort((a, b) => b[0] - a[0]);
    expect(order[0]?.[1]).toBe(3);
    expect(order[1]?.[1]).toBe(6);
    expect(scores[0]).toBe(0);
  });
});

describe('timeline', () => {
  it('fills the total with pieces that fit their sources, neighbours from different sources', () => {
    const lengths = [2400, 900, 105, 600, 1800];
    const pieces = timeline(lengths, 54000);
    expect(pieces.reduce((s, p) => s + p.frames, 0)).toBe(54000);
    for (const [i, p] of pieces.entries()) {
      expect(p.from + p.frames).toBeLessThanOrEqual(lengths[p.source] as number);
      expect(p.frames).toBeLessThanOrEqual(20 * 30);
      if (i > 0) expect(p.source).not.toBe(pieces[i - 1]?.source);
    }
    expect(timeline(lengths, 54000)).toEqual(pieces);
  });
  it('draws the same numbers from the same seed', () => {
    const [a, b] = [prng(7), prng(7)];
    expect([a(), a()]).toEqual([b(), b()]);
  });
});
