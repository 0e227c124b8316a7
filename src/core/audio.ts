/**
 * The `audio` object of local reports (spec: "Audio-activity object"; DESIGN §4).
 *
 * Engines hand over the clip-peak-normalised 1 ms envelope of the window; this reduces it to at
 * most MAX_AUDIO_SAMPLES buckets of equal width, each the max of its bucket, so a 1 ms click or a
 * short tone burst survives the reduction.
 */
import type { Window } from './window.js';

export const MAX_AUDIO_SAMPLES = 1000;

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

const round3 = (x: number) => Math.round(x * 1000) / 1000;

export function audioReport(window: Window, present: boolean, envelope: Float32Array): AudioReport {
  const length = window.endMs - window.startMs;
  const samples: AudioSample[] = [];
  if (present) {
    const buckets = Math.min(MAX_AUDIO_SAMPLES, length);
    for (let j = 0; j < buckets; j++) {
      const from = Math.floor((j * length) / buckets);
      const to = Math.floor(((j + 1) * length) / buckets);
      let level = 0;
      for (let k = from; k < to && k < envelope.length; k++) level = Math.max(level, envelope[k] as number);
      samples.push({ time: (window.startMs + from) / 1000, level: round3(Math.min(1, level)) });
    }
  }
  return {
    present,
    normalization: 'clip_peak',
    window: { start: window.startMs / 1000, end: window.endMs / 1000 },
    samples,
  };
}
