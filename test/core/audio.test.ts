/**
 * core/audio.ts: the one place raw peaks become levels (clip-peak normalisation, the report's
 * buckets, the band's pixel columns). Expected values are worked out by hand from DESIGN §4 and
 * the BandPlan rule in render-plan.ts.
 */
import { describe, expect, it } from 'vitest';
import {
  type AudioPeaks,
  audioReport,
  bandLevels,
  MAX_AUDIO_SAMPLES,
  peaksRange,
  withBandLevels,
} from '../../src/core/audio.js';
import type { BandPlan, SheetPlan } from '../../src/core/render-plan.js';

/** Raw peaks from `startMs` with the given (ms -> value) spikes over `length` ms. */
function peaks(
  startMs: number,
  length: number,
  spikes: Record<number, number>,
  clipPeak: number,
): AudioPeaks {
  const p = new Float32Array(length);
  for (const [ms, v] of Object.entries(spikes)) p[Number(ms) - startMs] = v;
  return { present: true, clipPeak, startMs, peaks: p };
}

const band = (startMs: number, endMs: number, w: number, message: BandPlan['message'] = null): BandPlan => ({
  rect: { x: 4, y: 4, w, h: 48 },
  startMs,
  endMs,
  ticksMs: [],
  message,
});

const sheet = (b: BandPlan | null): SheetPlan => ({
  path: '/x.jpg',
  width: 100,
  height: 100,
  cells: [],
  band: b,
});

describe('audioReport', () => {
  it('buckets the window by max, relative to the clip peak, at most 1000 buckets', () => {
    // 20 s window: 1000 buckets of 20 ms. A 1 ms spike at 5003 ms is bucket 250 (5000..5020).
    const a = peaks(0, 20_000, { 5003: 0.45, 12000: 0.9, 19999: 0.09 }, 0.9);
    const r = audioReport({ startMs: 0, endMs: 20_000 }, a);
    expect(r.present).toBe(true);
    expect(r.normalization).toBe('clip_peak');
    expect(r.window).toEqual({ start: 0, end: 20 });
    expect(r.samples).toHaveLength(MAX_AUDIO_SAMPLES);
    expect(r.samples[250]).toEqual({ time: 5, level: 0.5 });
    expect(r.samples[600]).toEqual({ time: 12, level: 1 });
    expect(r.samples[999]).toEqual({ time: 19.98, level: 0.1 });
    expect(r.samples.filter((s) => s.level > 0)).toHaveLength(3);
  });

  it('keeps clip-peak levels in a window that misses the peak, and rounds to 3 decimals', () => {
    // The clip peak (1.0) lies outside the window; the window's own max is 0.12345.
    const a = peaks(14_000, 2000, { 14700: 0.12345 }, 1.0);
    const r = audioReport({ startMs: 14_000, endMs: 16_000 }, a);
    expect(r.samples).toHaveLength(1000);
    expect(r.samples[0]?.time).toBe(14);
    expect(r.samples[350]).toEqual({ time: 14.7, level: 0.123 });
    expect(Math.max(...r.samples.map((s) => s.level))).toBe(0.123);
  });

  it('a window shorter than 1000 ms gives one bucket per ms', () => {
    const r = audioReport({ startMs: 100, endMs: 350 }, peaks(100, 250, { 101: 0.2 }, 0.4));
    expect(r.samples).toHaveLength(250);
    expect(r.samples[1]).toEqual({ time: 0.101, level: 0.5 });
  });

  it('silence gives zeros, and no audio gives no samples', () => {
    const silent = audioReport({ startMs: 0, endMs: 3000 }, peaks(0, 3000, {}, 0));
    expect(silent.samples).toHaveLength(1000);
    expect(silent.samples.every((s) => s.level === 0)).toBe(true);
    const none = audioReport(
      { startMs: 0, endMs: 3000 },
      { present: false, clipPeak: 0, startMs: 0, peaks: new Float32Array(0) },
    );
    expect(none).toEqual({
      present: false,
      normalization: 'clip_peak',
      window: { start: 0, end: 3 },
      samples: [],
    });
  });

  it('bins outside the measured range count as silence, levels never exceed 1', () => {
    // Measured 1000..2000 only; the window is 0..3000. A raw value above the clip peak clamps.
    const r = audioReport({ startMs: 0, endMs: 3000 }, peaks(1000, 1000, { 1500: 2 }, 1));
    expect(r.samples[500]).toEqual({ time: 1.5, level: 1 });
    expect(r.samples.filter((s) => s.level > 0)).toHaveLength(1);
  });
});

describe('bandLevels', () => {
  it('one level per column: the loudest bin the column touches', () => {
    // 10 columns over 100 ms: column c covers bins 10c .. 10c+10.
    const a = peaks(0, 100, { 25: 0.5, 71: 1 }, 1);
    expect(bandLevels(band(0, 100, 10), a)).toEqual([0, 0, 0.5, 0, 0, 0, 0, 1, 0, 0]);
  });

  it('a column narrower than 1 ms still reads the bin it falls in; a column straddling bins reads both', () => {
    // 4 columns over 2 ms: [0,0.5) [0.5,1) [1,1.5) [1.5,2) -> bins 0,0,1,1.
    expect(bandLevels(band(0, 2, 4), peaks(0, 2, { 1: 0.25 }, 1))).toEqual([0, 0, 0.25, 0.25]);
    // 3 columns over 10 ms: [0,3.33) [3.33,6.67) [6.67,10): bin 3 is touched by columns 0 and 1.
    expect(bandLevels(band(0, 10, 3), peaks(0, 10, { 3: 0.5 }, 1))).toEqual([0.5, 0.5, 0]);
  });

  it('normalises by the clip peak, not by the band', () => {
    expect(bandLevels(band(1000, 1010, 1), peaks(1000, 10, { 1004: 0.375 }, 0.75))).toEqual([0.5]);
  });

  it('a band that shows a message has no levels', () => {
    const message = {
      text: 'no audio',
      box: { x: 0, y: 0, w: 1, h: 1 },
      textX: 0,
      baselineY: 0,
      fontSize: 8,
    };
    expect(bandLevels(band(0, 100, 10, message), peaks(0, 100, { 5: 1 }, 1))).toEqual([]);
  });
});

describe('peaksRange and withBandLevels', () => {
  it('the range covers the window and every bin a band column reads', () => {
    const sheets = [sheet(band(0, 5000, 100)), sheet(band(5000, 10_000, 100)), sheet(null)];
    expect(peaksRange({ startMs: 0, endMs: 10_000 }, sheets)).toEqual({ startMs: 0, endMs: 10_000 });
    // A band reaching past the window (and a fractional end) widens it; never before 0.
    expect(peaksRange({ startMs: 10, endMs: 20 }, [sheet(band(-3, 20.5, 10))])).toEqual({
      startMs: 0,
      endMs: 21,
    });
  });

  it('fills each band with its levels and leaves the rest of the plan alone', () => {
    const sheets = [sheet(band(0, 100, 10)), sheet(null)];
    const filled = withBandLevels(sheets, peaks(0, 100, { 95: 0.5 }, 0.5));
    expect(filled[0]?.band?.levels).toEqual([0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    expect(filled[1]).toBe(sheets[1]);
    expect(sheets[0]?.band?.levels).toBeUndefined();
  });
});
