/**
 * The times the fallback's listing predicts where the decoder does not show frames at their pts
 * (src/engine/ffmpeg/listing.ts), against the times FFmpeg's decoder (5.1) stamps them with.
 *
 * `withPts`, packets that carry only a dts: the packets of FATE
 * `mpeg2video/coolitnow-partial` (a DVD VOB: its I and P pictures mostly have no PES timestamp,
 * its B pictures do), listed by `ffprobe -show_entries packet=pts,dts,duration`, and its frames'
 * `best_effort_timestamp` from `ffprobe -show_frames` (FFmpeg 5.1), both copied here once.
 */
import { describe, expect, it } from 'vitest';
import { type Row, timeByDecoder, withPts } from '../../src/engine/ffmpeg/listing.js';

/** [pts, dts, duration] per video packet, decode order (null: none). */
const PACKETS: Array<[number | null, number, number]> = [
  [null, 12516504, 1501],
  [null, 12519507, 3003],
  [12521008, 12521008, 3003],
  [12524011, 12524011, 3003],
  [null, 12527014, 3003],
  [12530017, 12530017, 3003],
  [12533020, 12533020, 3003],
  [null, 12536023, 3003],
  [12539026, 12539026, 3003],
  [12542029, 12542029, 3003],
  [12549537, 12546534, 3003],
  [null, 12549537, 3003],
  [12552540, 12552540, 3003],
  [12555543, 12555543, 3003],
  [null, 12558546, 3003],
  [12561549, 12561549, 3003],
  [12564552, 12564552, 3003],
  [null, 12567555, 3003],
  [12570558, 12570558, 3003],
  [12573561, 12573561, 3003],
  [12579567, 12576564, 3003],
  [null, 12579567, 3003],
  [12582570, 12582570, 3003],
  [12585573, 12585573, 3003],
  [null, 12588576, 3003],
  [12591579, 12591579, 3003],
  [12594582, 12594582, 3003],
];
/** Every frame the decoder puts out, in order: from the first keyframe (the 11th packet) on. */
const STAMPS = [
  12549537, 12552540, 12555543, 12558546, 12561549, 12564552, 12567555, 12570558, 12573561, 12576564,
  12579567, 12582570, 12585573, 12588576, 12591579, 12594582,
  // The last P picture comes out when the decoder is flushed, with no packet to stamp it
  // (best_effort_timestamp N/A): the native engine's stamp, one frame step after the latest.
  12597585,
];
/** has_b_frames: the decoder holds one frame back; 29.97 fps in 90 kHz. */
const STREAM = {
  reorderDelay: 1,
  timeBase: [1n, 90_000n] as [bigint, bigint],
  rates: { avg: [30_000, 1001] as [number, number], real: [30_000, 1001] as [number, number] },
};

const rows = (): Row[] =>
  PACKETS.map(([pts, dts, duration]) => ({
    pts: pts === null ? undefined : BigInt(pts),
    dts: BigInt(dts),
    duration: BigInt(duration),
    key: false,
  }));

describe('withPts: packets with only a dts', () => {
  it('times every frame the decoder puts out as the decoder stamps it', () => {
    const timed = withPts(rows(), STREAM);
    expect(timed).toHaveLength(PACKETS.length);
    const fromKey = timed.slice(10).map((r) => Number(r.pts));
    expect([...fromKey].sort((a, b) => a - b)).toEqual(STAMPS);
    // And a time each, distinct: no frame is lost to a shared time.
    expect(new Set(timed.map((r) => r.pts)).size).toBe(PACKETS.length);
  });

  it('keeps the known pts as they are', () => {
    const timed = withPts(rows(), STREAM);
    PACKETS.forEach(([pts], i) => {
      if (pts !== null) expect(timed[i]?.pts).toBe(BigInt(pts));
    });
  });

  it('leaves the untimed packets out when no timeline fits', () => {
    const broken = rows();
    // A known pts that no decode time explains.
    (broken[12] as Row).pts = 12552541n;
    const timed = withPts(broken, STREAM);
    expect(timed.every((r) => r.pts !== undefined)).toBe(true);
    expect(timed).toHaveLength(PACKETS.filter(([pts]) => pts !== null).length);
  });
});

/**
 * `timeByDecoder`, pts below dts: the first video packets of the corpus's
 * mimetype-mov.negative-cts.flv (H.264 with B-frames in FLV whose composition offsets are
 * negative; time base 1 ms, 29.97 fps, so durations round to 33 while decode times step 33 or 34),
 * and its frames' best_effort_timestamp, both copied once from ffprobe.
 */
const NEGATIVE_CTS: Array<[number, number, number]> = [
  [-67, 0, 33],
  [-132, 34, 33],
  [0, 67, 33],
  [100, 100, 33],
  [101, 134, 33],
  [0, 167, 33],
  [133, 200, 33],
  [234, 234, 33],
  [234, 267, 33],
  [133, 300, 33],
  [268, 334, 33],
  [367, 367, 33],
  [366, 400, 33],
  [268, 434, 33],
  [400, 467, 33],
  [500, 500, 33],
  [501, 534, 33],
  [500, 567, 33],
  [433, 600, 33],
  [568, 634, 33],
  [667, 667, 33],
  [666, 700, 33],
  [568, 734, 33],
  [700, 767, 33],
];
/** From the second frame on (the first keeps its own pts: nothing is judged faulty yet). */
const NEGATIVE_CTS_STAMPS = [
  100, 134, 167, 200, 234, 267, 300, 334, 367, 400, 434, 467, 500, 534, 567, 600, 634, 667, 700, 734, 767,
];

describe('timeByDecoder: pts below dts', () => {
  it('times the frames at the decode times of the packets that put them out', () => {
    const rows: Row[] = NEGATIVE_CTS.map(([pts, dts, duration]) => ({
      pts: BigInt(pts),
      dts: BigInt(dts),
      duration: BigInt(duration),
      key: false,
    }));
    // has_b_frames 2; 29.97 fps in a 1 ms time base.
    timeByDecoder(rows, {
      reorderDelay: 2,
      timeBase: [1n, 1000n],
      rates: { avg: [30_000, 1001], real: [30_000, 1001] },
    });
    const times = rows.map((r) => Number(r.pts)).sort((a, b) => a - b);
    // The stamps the decoder gives while packets come (the last two frames come out later).
    expect(times.slice(1, NEGATIVE_CTS_STAMPS.length + 1)).toEqual(NEGATIVE_CTS_STAMPS);
    // The last two, one step apart after the latest decode time.
    expect(times.slice(-2)).toEqual([800, 833]);
  });
});
