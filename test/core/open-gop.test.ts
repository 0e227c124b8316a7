/**
 * The open-GOP cost rule (src/core/open-gop.ts entersOpenGops): when the fallback enters open GOPs
 * at their recovery-point keyframes rather than decoding from the last true random-access point.
 * Expected answers are the decode spans worked out by hand for each case (seconds of stream).
 */
import { describe, expect, it } from 'vitest';
import { ENTER_MARGIN, entersOpenGops, type GopGroup } from '../../src/core/open-gop.js';

/** A GOP of 8.233 s (x264 -g 247 at 30 fps, the benchmark clips), keyframe n at n * GOP. */
const GOP = 247 / 30;
const key = (n: number) => n * GOP;
/** A group in GOP n of an open-GOP stream whose only IDR is the first frame. */
const open = (n: number, last: number): GopGroup => ({
  key: key(n),
  last,
  entry: n > 0,
  previous: n > 0 ? key(n - 1) : null,
  randomAccess: 0,
});

describe('entersOpenGops', () => {
  const reach = 1.77;

  it('never enters a stream without entries', () => {
    const closed = [25, 26].map((n) => ({ ...open(n, key(n) + 4), entry: false, randomAccess: key(n) }));
    expect(entersOpenGops(closed, reach, 0)).toBe(false);
  });

  it('enters the 10-second window 200 s into a long clip', () => {
    // From the IDR at 0: 210.5 s. Entering: 7.9 + 4.67 s, plus the proof from keyframe 23
    // (the group in GOP 24 ends 7.9 s past its keyframe, past the reach): 16.1 s.
    const groups = [open(24, 205.5), open(25, 210.5)];
    expect(entersOpenGops(groups, reach, 0)).toBe(true);
  });

  it('keeps decoding from the start near the start of a short clip', () => {
    // From the IDR: 9 s. Entering GOP 1: 0.77 s plus its verification from 0: 9 s.
    expect(entersOpenGops([open(0, 3), open(1, 9)], reach, 0)).toBe(false);
  });

  it('is decided by the margin: from the start exactly ENTER_MARGIN times the entering cost enters', () => {
    // Entering: (k5 + 4 - k5) + proof (k5 + 4 - k4) = 4 + GOP + 4; from the start: k5 + 4.
    const enter = 4 + GOP + 4;
    const at = (last: number): GopGroup[] => [{ ...open(5, last), key: last - 4, previous: last - 4 - GOP }];
    const exact = ENTER_MARGIN * enter;
    expect(entersOpenGops(at(exact), reach, 0)).toBe(true);
    expect(entersOpenGops(at(exact - 0.01), reach, 0)).toBe(false);
  });

  it('counts one proof when an entry can prove, a verification per entry when none can', () => {
    // Six groups each 1 s past their keyframe (inside the reach): nothing proves, each entry is
    // verified from the keyframe before: 6 x 1 s + 6 x (GOP + 1) s = 61.4 s; from the IDR: 124.5 s.
    const near = [10, 11, 12, 13, 14, 15].map((n) => open(n, key(n) + 1));
    expect(entersOpenGops(near, reach, 0)).toBe(true);
    // The same groups 3 s past their keyframes: one proof, 6 x 3 + (GOP + 3) = 29.2 s.
    const far = [10, 11, 12, 13, 14, 15].map((n) => open(n, key(n) + 3));
    expect(entersOpenGops(far, reach, 0)).toBe(true);
    // A stream whose IDR is its start, 57 s before k15: from it 58 s (near) and 60 s (far), less
    // than 2 x 61.4 but at least 2 x 29.2: only the groups that can prove pay.
    const start = key(15) - 57;
    const fromStart = (groups: GopGroup[]) => groups.map((g) => ({ ...g, randomAccess: null }));
    expect(entersOpenGops(fromStart(near), reach, start)).toBe(false);
    expect(entersOpenGops(fromStart(far), reach, start)).toBe(true);
  });

  it('counts a decode from a shared random-access point once, to its last target', () => {
    // Two IDRs (0 and k20), groups after each: from them 3.5 + (k40 + 2 - k20) s, not the sum
    // of every group's distance. Entering costs 3 x 2 + proof (k40 + 2 - k39).
    const groups: GopGroup[] = [
      { ...open(0, 3.5) },
      { ...open(30, key(30) + 2), randomAccess: key(20) },
      { ...open(40, key(40) + 2), randomAccess: key(20) },
    ];
    const today = 3.5 + (key(40) + 2 - key(20));
    const enter = 3.5 + 2 + 2 + (GOP + 2);
    expect(today >= ENTER_MARGIN * enter).toBe(true);
    expect(entersOpenGops(groups, reach, 0)).toBe(true);
    // Moved close to their IDR, the same shape no longer pays.
    const close = groups.map((g, i) => (i === 0 ? g : { ...g, randomAccess: g.key - GOP }));
    expect(entersOpenGops(close, reach, 0)).toBe(false);
  });

  it('verifies an entry with no keyframe before it from the stream start', () => {
    // A stream starting at 100 s whose first listed keyframe is an entry: verification spans from 100.
    const g: GopGroup = { key: 110, last: 113, entry: true, previous: null, randomAccess: null };
    // From the start: 13 s; entering 3 + (113 - 100) = 16 s.
    expect(entersOpenGops([g], reach, 100)).toBe(false);
  });
});
