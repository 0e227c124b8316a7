/**
 * Audio activity (DESIGN §4): the one place raw peaks become levels.
 *
 * Engines only measure: `Engine.audioPeaks` hands over the raw peak absolute amplitude of the mono
 * downmix per millisecond (placed by timestamps) and the peak of the whole clip. This module alone
 * normalises by that clip peak and reduces the 1 ms envelope, both for the report's `audio.samples`
 * (at most MAX_AUDIO_SAMPLES buckets of equal width, each the max of its bucket, so a 1 ms click or
 * a short tone burst survives) and for the band's pixel columns (the painting rule in
 * render-plan.ts), so the numbers a model reads and the bars it sees are one computation.
 */
import type { BandPlan, SheetPlan } from './render-plan.js';
import type { Window } from './window.js';

export const MAX_AUDIO_SAMPLES = 1000;

/** What an engine measured (`Engine.audioPeaks`): raw, not normalised. */
export interface AudioPeaks {
  /** False when the file has no decodable audio track. */
  present: boolean;
  /**
   * Peak absolute amplitude of the mono downmix over the whole clip (every sample at or after the
   * container start), whatever range was asked for: a windowed call keeps clip-peak levels.
   * 0 for a silent track or when not present.
   */
  clipPeak: number;
  /** Container-relative ms of `peaks[0]`. */
  startMs: number;
  /**
   * Peak absolute amplitude of the mono downmix (average of the channels, full band) per
   * millisecond: `peaks[i]` covers [startMs + i, startMs + i + 1) on the container clock, samples
   * placed by their timestamps (a gap in the audio stays a gap). Empty when not present.
   */
  peaks: Float32Array;
}

export interface AudioSample {
  /** Bucket start, absolute source seconds, millisecond precision. */
  time: number;
  /** Linear level relative to the clip peak, 0..1, three decimals. */
  level: number;
}

export interface AudioReport {
  present: boolean;
  normalization: 'clip_peak';
  window: { start: number; end: number };
  samples: AudioSample[];
}

/** A ms range, container-relative: [startMs, endMs). */
export interface MsRange {
  startMs: number;
  endMs: number;
}

const round3 = (x: number) => Math.round(x * 1000) / 1000;

/**
 * The bins [first, last) a band column covering [from, to) ms reads: every bin the range touches,
 * at least one (a column narrower than 1 ms still shows the bin it falls in).
 */
function binsOf(from: number, to: number): [number, number] {
  const first = Math.floor(from);
  return [first, Math.max(first + 1, Math.ceil(to))];
}

/**
 * The ms the engine must measure for a job: the report's window and every bin a band column
 * reads. Integers; never before the container start (nothing is placed there).
 */
export function peaksRange(window: MsRange, sheets: readonly SheetPlan[]): MsRange {
  let lo = Math.floor(window.startMs);
  let hi = Math.ceil(window.endMs);
  for (const band of sheets.map((s) => s.band)) {
    if (!band || band.message) continue;
    const [first, last] = binsOf(band.startMs, band.endMs);
    lo = Math.min(lo, first);
    hi = Math.max(hi, last);
  }
  lo = Math.max(0, lo);
  return { startMs: lo, endMs: Math.max(lo, hi) };
}

/** Clip-peak level (0..1) of the loudest bin in [from, to) ms; 0 outside the measured range. */
function levelOver(audio: AudioPeaks, from: number, to: number): number {
  if (!audio.present || !(audio.clipPeak > 0)) return 0;
  const lo = Math.max(from, audio.startMs) - audio.startMs;
  const hi = Math.min(to, audio.startMs + audio.peaks.length) - audio.startMs;
  let peak = 0;
  for (let i = lo; i < hi; i++) peak = Math.max(peak, audio.peaks[i] as number);
  return Math.min(1, peak / audio.clipPeak);
}

/** The report's `audio` object over `window`. */
export function audioReport(window: Window, audio: AudioPeaks): AudioReport {
  const length = window.endMs - window.startMs;
  const samples: AudioSample[] = [];
  if (audio.present) {
    const buckets = Math.min(MAX_AUDIO_SAMPLES, length);
    for (let j = 0; j < buckets; j++) {
      const from = Math.floor((j * length) / buckets);
      const to = Math.floor(((j + 1) * length) / buckets);
      const level = levelOver(audio, window.startMs + from, window.startMs + to);
      samples.push({ time: (window.startMs + from) / 1000, level: round3(level) });
    }
  }
  return {
    present: audio.present,
    normalization: 'clip_peak',
    window: { start: window.startMs / 1000, end: window.endMs / 1000 },
    samples,
  };
}

/**
 * A band's level per pixel column (the painting rule in render-plan.ts): column c covers
 * [startMs + c*span/w, startMs + (c+1)*span/w) and its level is the clip-peak level of the loudest
 * bin that range touches. Empty for a band that shows a message instead.
 */
export function bandLevels(band: Omit<BandPlan, 'levels'>, audio: AudioPeaks): number[] {
  if (band.message) return [];
  const { w } = band.rect;
  const span = band.endMs - band.startMs;
  const levels: number[] = [];
  for (let c = 0; c < w; c++) {
    const [first, last] = binsOf(band.startMs + (c * span) / w, band.startMs + ((c + 1) * span) / w);
    levels.push(levelOver(audio, first, last));
  }
  return levels;
}

/** The sheets with every band's column levels filled in, ready for an engine to paint. */
export function withBandLevels(sheets: readonly SheetPlan[], audio: AudioPeaks): SheetPlan[] {
  return sheets.map((sheet) =>
    sheet.band ? { ...sheet, band: { ...sheet.band, levels: bandLevels(sheet.band, audio) } } : sheet,
  );
}
