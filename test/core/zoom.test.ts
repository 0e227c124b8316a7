/**
 * The zoom-hint rule (src/core/zoom.ts) against its shared vectors (fixtures/vectors/zoom-hints.json:
 * the rule in words, inputs, expected hints), and the frame-time rounding.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { AudioPeaks } from '../../src/core/audio.js';
import type { PacketLog } from '../../src/core/packet-log.js';
import { THUMB_BYTES } from '../../src/core/pictures.js';
import { MAX_HINTS, reportedFrameTime, zoomHints } from '../../src/core/zoom.js';

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
interface Pictures {
  fps: number;
  from: number;
  to: number;
  level: number;
  at?: Record<string, number>;
  patches?: Array<{ frames: [number, number]; share: number; level: number }>;
  decoded?: Array<[number, number]>;
}
interface Case {
  name: string;
  window: [number, number];
  decimals: number;
  /** The demuxer's name (absent: an MP4's). */
  container?: string;
  cells: Array<[string, number, number | null, number | null]>;
  stream: Stream;
  pictures?: Pictures;
  audio?: {
    clipPeak: number;
    startMs: number;
    peaks: { n: number; fill: number; at: Record<string, number> };
  };
  expect: Array<{ start: string; end: string; score: number; signals: string[] }>;
}

/** A vector's container unless it names one: a whole listing, as an MP4's (core/packet-log.ts packetSource). */
const MP4 = 'mov,mp4,m4a,3gp,3g2,mj2';

const vectors = JSON.parse(
  readFileSync(new URL('../../fixtures/vectors/zoom-hints.json', import.meta.url), 'utf8'),
) as { cases: Case[] };

/**
 * The packets a vector's `stream` describes (the expansion rule in the file's description): only
 * those within its spans are listed; in Matroska the index holds every keyframe, listed or not.
 */
function packetsOf(c: Case): PacketLog {
  const s = c.stream;
  const n = Math.round((s.to - s.from) * s.fps);
  const spans = (s.spans ?? [[null, null]]).map(([a, b]) => [
    a ?? Number.NEGATIVE_INFINITY,
    b ?? Number.POSITIVE_INFINITY,
  ]);
  const time = (i: number) => s.from + i / s.fps;
  const isKey = (i: number) => (s.keyEvery > 0 && i % s.keyEvery === 0) || (s.keys ?? []).includes(i);
  const all = Array.from({ length: n }, (_, i) => i);
  const listed = all.filter((i) =>
    spans.some(([a, b]) => time(i) >= (a as number) && time(i) <= (b as number)),
  );
  const cues = /\b(matroska|webm)\b/.test(c.container ?? MP4);
  return {
    times: Float64Array.from(listed.map(time)),
    sizes: Float64Array.from(listed.map((i) => s.sizes?.[String(i)] ?? s.size)),
    keys: Uint8Array.from(listed.map((i) => (isKey(i) ? 1 : 0))),
    indexKeys: Float64Array.from(cues ? all.filter(isKey).map(time) : []),
    spans: Float64Array.from(spans.flat()),
    cells: Float64Array.from(c.cells.map((cell) => cell[3] ?? Number.NaN)),
    ...picturesOf(c.pictures),
  };
}

/**
 * The decoded pictures a vector's `pictures` describes (the expansion rule in the file's
 * description): flat thumbnails at `level`, or at `at`'s level for the frames it names, with
 * `patches` (a share of the pixels at another level over a range of frames); only the `decoded`
 * frames (inclusive ranges, default all) are listed.
 */
function picturesOf(p: Pictures | undefined): Pick<PacketLog, 'pictures' | 'thumbs'> {
  if (!p) return { pictures: new Float64Array(0), thumbs: new Uint8Array(0) };
  const n = Math.round((p.to - p.from) * p.fps);
  const decoded = Array.from({ length: n }, (_, i) => i).filter(
    (i) => !p.decoded || p.decoded.some(([a, b]) => i >= a && i <= b),
  );
  const thumbs = new Uint8Array(decoded.length * THUMB_BYTES);
  decoded.forEach((i, k) => {
    const t = thumbs.subarray(k * THUMB_BYTES, (k + 1) * THUMB_BYTES);
    t.fill(p.at?.[String(i)] ?? p.level);
    for (const patch of p.patches ?? [])
      if (i >= patch.frames[0] && i <= patch.frames[1])
        t.fill(patch.level, 0, Math.round(patch.share * THUMB_BYTES));
  });
  return { pictures: Float64Array.from(decoded.map((i) => p.from + i / p.fps)), thumbs };
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
      container: c.container ?? MP4,
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
        container: MP4,
        packets,
      });
    expect(run(twice)).toEqual(run(once));
  });
});

describe('how many hints a run keeps (limit)', () => {
  const c = vectors.cases.find((v) => v.name.startsWith('at most 5')) as Case;
  const run = (limit?: number) =>
    zoomHints({
      cells: c.cells.map(([label, timeMs, frameTime]) => ({ label, timeMs, frameTime })),
      window: { startMs: c.window[0], endMs: c.window[1] },
      decimals: c.decimals,
      container: MP4,
      packets: packetsOf(c),
      ...(limit === undefined ? {} : { limit }),
    });

  it('is MAX_HINTS unless a benchmark asks to rank every gap with a signal', () => {
    const every = run(Number.MAX_SAFE_INTEGER);
    expect(run()).toHaveLength(MAX_HINTS);
    expect(every.length).toBeGreaterThan(MAX_HINTS);
    expect(every.slice(0, MAX_HINTS)).toEqual(run());
    expect(run(2)).toEqual(run().slice(0, 2));
  });
});

describe('where the packets come from, by container (packetSource)', () => {
  // 30 fps, 60 s; cells every 6 s at 3, 9, ..., 57; a keyframe every 250 frames (8.333 s) and one
  // at a cut, 20.5 s, which restarts the count. Packets listed only from each cell's keyframe to
  // the cell (what the native engine reads in Matroska), all 100 bytes but 2000-byte ones at 42 s
  // and 46 s.
  const fps = 30;
  const cut = 20.5;
  const keys: number[] = [];
  for (let t = 0; t < 60; t += 250 / fps) keys.push(t < cut ? t : Number.NaN);
  for (let t = cut; t < 60; t += 250 / fps) keys.push(t);
  const indexKeys = keys.filter(Number.isFinite);
  const cells = Array.from({ length: 10 }, (_, i) => 3 + 6 * i);
  const times: number[] = [];
  const spans: number[] = [];
  for (const c of cells) {
    const from = Math.max(...indexKeys.filter((k) => k <= c));
    spans.push(from, c + 0.1);
    for (let f = Math.round(from * fps); f <= Math.round((c + 0.1) * fps); f++) times.push(f / fps);
  }
  const log: PacketLog = {
    times: Float64Array.from(times),
    sizes: Float64Array.from(
      times.map((t) => (Math.abs(t - 42) < 1e-6 || Math.abs(t - 46) < 1e-6 ? 2000 : 100)),
    ),
    keys: Uint8Array.from(times.map((t) => (indexKeys.some((k) => Math.abs(k - t) < 1e-6) ? 1 : 0))),
    spans: Float64Array.from(spans),
    indexKeys: Float64Array.from(indexKeys),
    cells: Float64Array.from(cells),
    pictures: new Float64Array(0),
    thumbs: new Uint8Array(0),
  };
  const hints = (container: string) =>
    zoomHints({
      cells: cells.map((c) => ({ label: `0:${String(c).padStart(2, '0')}`, timeMs: c * 1000, frameTime: c })),
      window: { startMs: 0, endMs: 60_000 },
      decimals: 0,
      container,
      packets: log,
    });

  it('Matroska: the keyframe rhythm from the index (Cues), bytes only within one keyframe interval', () => {
    // The cut's keyframe is unexplained though no packet around it was read. 42 s lies in
    // 0:39..0:45, within one keyframe interval: measured. 46 s lies in 0:45..0:51, which holds the
    // keyframe at 45.5 s: the native engine reads from there, so it is not measured (the
    // fallback lists it, but must not count it either).
    expect(hints('matroska,webm')).toEqual([
      { start: '0:39', end: '0:45', score: 0.5, signals: ['bitrate'] },
      { start: '0:15', end: '0:21', score: 0.25, signals: ['keyframe'] },
    ]);
  });

  it('no index (Ogg, MPEG-TS): no packet signals at all', () => {
    expect(hints('ogg')).toEqual([]);
    expect(hints('mpegts')).toEqual([]);
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
