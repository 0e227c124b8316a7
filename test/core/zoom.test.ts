/**
 * The zoom-hint rule (src/core/zoom.ts) against its shared vectors (fixtures/vectors/zoom-hints.json:
 * the rule in words, inputs, expected hints), and the frame-time rounding.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { AudioPeaks } from '../../src/core/audio.js';
import { type PacketLog, reportedFrameTime, zoomHints } from '../../src/core/zoom.js';

interface Stream {
  fps: number;
  from: number;
  to: number;
  size: number;
  keyEvery: number;
  keys?: number[];
  sizes?: Record<string, number>;
  spans?: Array<[number | null, number | null]>;
}
interface Case {
  name: string;
  window: [number, number];
  decimals: number;
  cells: Array<[string, number, number | null, number | null]>;
  stream: Stream;
  audio?: {
    clipPeak: number;
    startMs: number;
    peaks: { n: number; fill: number; at: Record<string, number> };
  };
  expect: Array<{ start: string; end: string; score: number; signals: string[] }>;
}

const vectors = JSON.parse(
  readFileSync(new URL('../../fixtures/vectors/zoom-hints.json', import.meta.url), 'utf8'),
) as { cases: Case[] };

/** The packets a vector's `stream` describes (the expansion rule in the file's description). */
function packetsOf(c: Case): PacketLog {
  const s = c.stream;
  const n = Math.round((s.to - s.from) * s.fps);
  const index = Array.from({ length: n }, (_, i) => i);
  return {
    times: Float64Array.from(index.map((i) => s.from + i / s.fps)),
    sizes: Float64Array.from(index.map((i) => s.sizes?.[String(i)] ?? s.size)),
    keys: Uint8Array.from(
      index.map((i) => ((s.keyEvery > 0 && i % s.keyEvery === 0) || (s.keys ?? []).includes(i) ? 1 : 0)),
    ),
    spans: Float64Array.from(
      (s.spans ?? [[null, null]]).flatMap(([a, b]) => [
        a ?? Number.NEGATIVE_INFINITY,
        b ?? Number.POSITIVE_INFINITY,
      ]),
    ),
    cells: Float64Array.from(c.cells.map((cell) => cell[3] ?? Number.NaN)),
  };
}

function audioOf(c: Case): AudioPeaks | null {
  if (!c.audio) return null;
  const peaks = new Float32Array(c.audio.peaks.n).fill(c.audio.peaks.fill);
  for (const [k, v] of Object.entries(c.audio.peaks.at)) peaks[Number(k)] = v;
  return { present: true, clipPeak: c.audio.clipPeak, startMs: c.audio.startMs, peaks };
}

describe('zoom hints (zoom-hints.json)', () => {
  it.each(vectors.cases)('$name', (c) => {
    const hints = zoomHints({
      cells: c.cells.map(([label, timeMs, frameTime]) => ({ label, timeMs, frameTime })),
      window: { startMs: c.window[0], endMs: c.window[1] },
      decimals: c.decimals,
      packets: packetsOf(c),
      audio: audioOf(c),
    });
    expect(hints).toEqual(c.expect);
    for (const h of hints) expect(Object.keys(h)).toEqual(['start', 'end', 'score', 'signals']);
  });

  it('a packet read twice (a seek back) counts once', () => {
    const c = vectors.cases.find((v) => v.name.startsWith('one packet ten times')) as Case;
    const once = packetsOf(c);
    const twice: PacketLog = {
      ...once,
      times: Float64Array.from([...once.times, ...once.times]),
      sizes: Float64Array.from([...once.sizes, ...once.sizes]),
      keys: Uint8Array.from([...once.keys, ...once.keys]),
    };
    const run = (packets: PacketLog) =>
      zoomHints({
        cells: c.cells.map(([label, timeMs, frameTime]) => ({ label, timeMs, frameTime })),
        window: { startMs: c.window[0], endMs: c.window[1] },
        decimals: c.decimals,
        packets,
      });
    expect(run(twice)).toEqual(run(once));
  });
});

describe('frame_times values', () => {
  it('seconds with at most 3 decimals; null for no frame', () => {
    expect(reportedFrameTime(12.345678)).toBe(12.346);
    expect(reportedFrameTime(0.0334)).toBe(0.033);
    expect(reportedFrameTime(null)).toBeNull();
    expect(reportedFrameTime(Number.NaN)).toBeNull();
  });
});
