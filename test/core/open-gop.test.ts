/**
 * The open-GOP cost rule (src/core/open-gop.ts entersOpenGops): when the fallback enters open GOPs
 * at their recovery-point keyframes rather than decoding from the last true random-access point;
 * and where the first entry's proof is made (provesAhead, proofPair).
 * Expected answers are the decode spans worked out by hand for each case (seconds of stream).
 */
import { describe, expect, it } from 'vitest';
import {
  AHEAD_MARGIN,
  ENTER_MARGIN,
  entersOpenGops,
  type GopGroup,
  type OpeningGroup,
  proofPair,
  provesAhead,
  RUN_PIXELS,
  runSeconds,
} from '../../src/core/open-gop.js';

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
  decoded: 1,
});

describe('entersOpenGops', () => {
  const reach = 1.77;

  it('never enters a stream without entries', () => {
    const closed = [25, 26].map((n) => ({ ...open(n, key(n) + 4), entry: false, randomAccess: key(n) }));
    expect(entersOpenGops(closed, { reach, start: 0, run: 0, cores: 1 })).toBe(false);
  });

  it('enters the 10-second window 200 s into a long clip', () => {
    // From the IDR at 0: 210.5 s. Entering: 7.9 + 4.67 s, plus the proof from keyframe 23 to the
    // first group's last target (7.9 s past its keyframe, past the reach): 16.1 s.
    const groups = [open(24, 205.5), open(25, 210.5)];
    expect(entersOpenGops(groups, { reach, start: 0, run: 0, cores: 1 })).toBe(true);
  });

  it('keeps decoding from the start near the start of a short clip', () => {
    // From the IDR: 9 s. Entering: 3 + 0.77 s, plus the proof through 1.77 s past k1: 1 + 10 s.
    expect(entersOpenGops([open(0, 3), open(1, 9)], { reach, start: 0, run: 0, cores: 1 })).toBe(false);
  });

  it('is decided by the margin: from the start exactly ENTER_MARGIN times the entering cost enters', () => {
    // Entering: (k5 + 4 - k5) + proof (k5 + 4 - k4) = 4 + GOP + 4; from the start: k5 + 4.
    const enter = 4 + GOP + 4;
    const at = (last: number): GopGroup[] => [{ ...open(5, last), key: last - 4, previous: last - 4 - GOP }];
    const exact = ENTER_MARGIN * enter;
    expect(entersOpenGops(at(exact), { reach, start: 0, run: 0, cores: 1 })).toBe(true);
    expect(entersOpenGops(at(exact - 0.01), { reach, start: 0, run: 0, cores: 1 })).toBe(false);
  });

  it('proves on the first entry, its decodes going on to the reach past its keyframe', () => {
    // Six groups each 1 s past their keyframe (inside the reach): the first entry's decode goes on
    // to 1.77 s past it (0.77 s more) and the proof's from the keyframe before through that
    // point (GOP + 1.77 s); the others enter trusted. 6 x 1 + 0.77 + GOP + 1.77 s.
    const near = [10, 11, 12, 13, 14, 15].map((n) => open(n, key(n) + 1));
    const enter = 6 + (reach - 1) + GOP + reach;
    // A stream whose IDR is its start, before k15 + 1 by ENTER_MARGIN x enter (or 0.01 s less).
    const fromStart = near.map((g) => ({ ...g, randomAccess: null }));
    const start = (span: number) => key(15) + 1 - span;
    expect(entersOpenGops(fromStart, { reach, start: start(ENTER_MARGIN * enter), run: 0, cores: 1 })).toBe(
      true,
    );
    expect(
      entersOpenGops(fromStart, { reach, start: start(ENTER_MARGIN * enter - 0.01), run: 0, cores: 1 }),
    ).toBe(false);
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
    expect(entersOpenGops(groups, { reach, start: 0, run: 0, cores: 1 })).toBe(true);
    // With an IDR a second before each entry (3.5 + 3 + 3 s from them), entering no longer pays.
    const close = groups.map((g, i) => (i === 0 ? g : { ...g, randomAccess: g.key - 1 }));
    expect(entersOpenGops(close, { reach, start: 0, run: 0, cores: 1 })).toBe(false);
  });

  it('verifies an entry with no keyframe before it from the stream start', () => {
    // A stream starting at 100 s whose first listed keyframe is an entry: verification spans from 100.
    const g: GopGroup = { key: 110, last: 113, entry: true, previous: null, randomAccess: null, decoded: 1 };
    // From the start: 13 s; entering 3 s, the proof from the start 13 s.
    expect(entersOpenGops([g], { reach, start: 100, run: 0, cores: 1 })).toBe(false);
  });

  it('counts each run at its cost in pixels: a small clip stays on one run where a large one enters', () => {
    expect(runSeconds(1920 * 1080 * 30)).toBeCloseTo(RUN_PIXELS / 62_208_000, 9);
    expect(runSeconds(null)).toBe(0);
    expect(runSeconds(0)).toBe(0);
    // Seven targets 4 s past their keyframes in GOPs 4, 6, ... 16, the IDR at 0: from it 135.7 s
    // in one run; entering 7 x 4 s in seven runs, the proof GOP + 4 s in one more.
    const groups = [4, 6, 8, 10, 12, 14, 16].map((n) => open(n, key(n) + 4));
    const today = key(16) + 4;
    const enter = 7 * 4 + GOP + 4;
    const at = (run: number) => entersOpenGops(groups, { reach, start: 0, run, cores: 1 });
    expect(at(0)).toBe(true);
    // The run cost at which both sides are equal by the margin: (today + r) = M (enter + 8 r).
    const even = (today - ENTER_MARGIN * enter) / (8 * ENTER_MARGIN - 1);
    expect(at(even - 0.01)).toBe(true);
    expect(at(even + 0.01)).toBe(false);
    // 1080p at 30 fps enters; 640x360 at 30 fps does not.
    expect(at(runSeconds(1920 * 1080 * 30))).toBe(true);
    expect(at(runSeconds(640 * 360 * 30))).toBe(false);
  });

  it('counts the frames decoded: a group skipping non-reference pictures decodes their share', () => {
    // Entries k5 (4 s in) and k6 (6 s in); the stream's IDR is its start. Entering: the proof
    // path decodes every frame (4 + (k5 + 4 - k4) s), the k6 group 6 s x its share.
    const at = (shares: [number, number], start: number) => {
      const [a, b] = [open(5, key(5) + 4), open(6, key(6) + 6)].map((g, i) => ({
        ...g,
        randomAccess: null,
        decoded: shares[i] as number,
      }));
      return entersOpenGops([a as GopGroup, b as GopGroup], { reach, start, run: 0, cores: 1 });
    };
    // Both groups skip (half the pictures are references): from the start one run skips too,
    // (k6 + 6 - start) x 0.5; entering 8 + GOP + 3.
    const half = key(6) + 6 - 2 * ENTER_MARGIN * (8 + GOP + 3);
    expect(at([0.5, 0.5], half)).toBe(true);
    expect(at([0.5, 0.5], half + 0.01)).toBe(false);
    // Only the k6 group skips: the run from the start serves k5 too and decodes every frame.
    const whole = key(6) + 6 - ENTER_MARGIN * (8 + GOP + 3);
    expect(at([1, 0.5], whole)).toBe(true);
    expect(at([1, 0.5], whole + 0.01)).toBe(false);
  });

  it('shares the cores between runs, never less than the longest run', () => {
    // Ten groups 6 s past keyframes k1..k10, the IDR at the start. From it: one run of
    // k10 + 6 - start whatever the cores. Entering: the proof path 6 + (k1 + 6 - k0) s, then nine
    // runs of 6 s: 54 s on one core, 27 s on two, 6 s (the longest) on a hundred.
    const groups = Array.from({ length: 10 }, (_, i) => ({
      ...open(i + 1, key(i + 1) + 6),
      randomAccess: null,
    }));
    const proof = 6 + key(1) + 6;
    const edge = (rest: number) => key(10) + 6 - ENTER_MARGIN * (proof + rest);
    for (const [cores, rest] of [
      [1, 54],
      [2, 27],
      [100, 6],
    ] as const) {
      expect(entersOpenGops(groups, { reach, start: edge(rest), run: 0, cores })).toBe(true);
      expect(entersOpenGops(groups, { reach, start: edge(rest) + 0.01, run: 0, cores })).toBe(false);
    }
    // Four random-access points, each 10 s before an entry with a target 6 s in: from them four
    // runs of 16 s, 64 s on one core, 16 s on four. Entering: 6 + 14 s of proof, then three runs
    // of 6 s (18 s on one core, 6 s on four). One core: 64 >= 1.25 x 38; four: 16 < 1.25 x 26.
    const spread = [0, 1, 2, 3].map(
      (i): GopGroup => ({
        key: 100 * i + 10,
        last: 100 * i + 16,
        entry: true,
        previous: 100 * i + 2,
        randomAccess: 100 * i,
        decoded: 1,
      }),
    );
    expect(entersOpenGops(spread, { reach, start: 0, run: 0, cores: 1 })).toBe(true);
    expect(entersOpenGops(spread, { reach, start: 0, run: 0, cores: 4 })).toBe(false);
  });
});

describe('provesAhead', () => {
  const reach = 1.77;
  const at = (n: number, last: number, next: number | null = key(n + 1)) =>
    provesAhead({ key: key(n), last, next, previous: key(n - 1), reach });

  it('proves ahead where carrying the decode past the next keyframe costs less than a GOP behind', () => {
    // The 10-s window's group of GOP 24, its last target at 205.5 s: ahead (k25 + 1.77 + 0.25 -
    // 205.5) + 2.02 = 4.37 s; behind 205.5 - k23 = 16.13 s.
    expect(at(24, 205.5)).toBe(true);
    // A target 3.2 s into GOP 24: ahead 7.04 + 2.02 s against 11.43 s behind.
    expect(at(24, key(24) + 3.2)).toBe(true);
  });

  it('is decided by the cost: even at reach + margin past the keyframe (GOPs of equal length)', () => {
    // Ahead (k + G + r + m - own) + r + m; behind own - (k - G): equal at own = k + r + m.
    const even = key(10) + reach + AHEAD_MARGIN;
    expect(at(10, even + 0.01)).toBe(true);
    expect(at(10, even - 0.01)).toBe(false);
    // A target 0.5 s in: the entry's own decode still goes on to the reach past its keyframe, so
    // with the keyframe before 9.5 s back, ahead (G + m) + (r + m) = 10.50 s < 1.77 + 9.5 s.
    const k = key(10);
    expect(provesAhead({ key: k, last: k + 0.5, next: k + GOP, previous: k - 9.5, reach })).toBe(true);
  });

  it('never ahead without a next entry, or one closer than the reach', () => {
    expect(at(24, 205.5, null)).toBe(false);
    expect(at(24, key(24) + 1.7, key(24) + 1.76)).toBe(false);
    // At the reach it may (ahead 2.02 + 2.02 s against GOP + 1.77 s behind).
    expect(at(24, key(24) + 1.76, key(24) + reach)).toBe(true);
  });
});

describe('proofPair', () => {
  const reach = 1.77;
  /** A group opening at keyframe n of the benchmark clip (keyframe 0 the only IDR). */
  const group = (n: number, last: number): OpeningGroup => ({
    key: key(n),
    last,
    entry: n > 0,
    previous: n > 0 ? key(n - 1) : 0,
  });
  const end = (n: number) => key(n) + reach + AHEAD_MARGIN;

  it("pairs the 10-s window's groups whose decodes meet at the least cost", () => {
    // The benchmark's window (200.5..210.5 s) in two parts of the render: the first two targets
    // from keyframe 24 (197.6 s), the rest of GOP 24, and GOP 25 (205.83 s) to 210.4 s. The GOP-24
    // group ending at 205.8 s carries on 2.05 s to 207.85 s, where GOP 25's own decode already
    // goes; the one ending at 200.77 s would carry on 7.08 s.
    const groups = [group(24, 200.77), group(24, 205.8), group(25, 210.4)];
    const pair = proofPair(groups, reach);
    expect(pair?.earlier).toBe(1);
    expect(pair?.first).toBe(2);
    expect(pair?.end).toBeCloseTo(end(25), 9);
  });

  it('counts the decode `first` carries on to the end too', () => {
    // GOP 25's target 0.5 s in: it carries on to 207.85 s as well (2.05 + 1.52 s); GOP 26's
    // group (its keyframe 8.23 s after GOP 25's last target) would cost more.
    const groups = [group(24, 205.8), group(25, key(25) + 0.5), group(26, key(26) + 5)];
    expect(proofPair(groups, reach)).toEqual({ earlier: 0, first: 1, end: end(25) });
  });

  it('never pairs where proving behind decodes less: targets a minute apart', () => {
    // A 3x3 overview of the 10-minute clip: GOP 8 (65.9 s) and GOP 16 (131.7 s). Carrying GOP
    // 8's decode on to GOP 16 costs 63.9 s; GOP 16 proving behind from keyframe 15 costs 10.2 s.
    expect(proofPair([group(8, key(8) + 1), group(16, key(16) + 2)], reach)).toBeNull();
  });

  it('never pairs keyframes closer than the reach, nor a first group that is no entry', () => {
    const near = { key: 10, last: 10.2, entry: true, previous: 9 };
    expect(proofPair([{ key: 9, last: 9.5, entry: true, previous: 0 }, near], reach)).toBeNull();
    // From the IDR at 0 to a keyframe that is itself an IDR: nothing to prove.
    expect(proofPair([group(0, 7), { ...group(1, key(1) + 3), entry: false }], reach)).toBeNull();
    // The IDR's group may be the earlier side.
    expect(proofPair([group(0, 7), group(1, key(1) + 3)], reach)).toEqual({
      earlier: 0,
      first: 1,
      end: end(1),
    });
  });
});
