/**
 * The `picture` signal's material (src/core/pictures.ts), per engine, against a sequential decode
 * by the ffmpeg CLI (every frame area-scaled to the thumbnail, to gray): each picture an engine
 * hands over is a frame of the stream, shown at its time, and its thumbnail is that frame's
 * (within 2 levels on average: the native engine averages a spread of samples, the fallback every
 * pixel); the cells' own frames are among them, and so are frames between cells (what it decoded
 * on the way). Then the signal on the event clips (test/helpers/events.ts): where an engine decoded
 * the one-frame flash, that gap is the first hint, with `picture`.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { MAX_PICTURES, THUMB, THUMB_BYTES } from '../../src/core/pictures.js';
import { thumbStats } from '../../src/engine/ffmpeg/thumbs.js';
import type { Engine, RenderResult } from '../../src/engine/types.js';
import { runJob } from '../../src/job.js';
import { ENGINES } from '../helpers/cli.js';
import { engineNamed } from '../helpers/engines.js';
import { EVENTS, type EventEncoding, eventClip } from '../helpers/events.js';
import { BITEXACT, cached, FFMPEG, run } from '../helpers/fixtures.js';
import { frameTimes } from '../helpers/oracle.js';

const execFileP = promisify(execFile);
const roots: string[] = [];
afterAll(() => {
  for (const dir of roots) rmSync(dir, { recursive: true, force: true });
});

/** A 3x3 run on `engine` (the whole clip, or a window in ms), with what its render handed over. */
async function overview(clip: string, engine: string, window: { startMs?: number; endMs?: number } = {}) {
  const inner = engineNamed(engine);
  let result: RenderResult | undefined;
  const watched: Engine = {
    ...inner,
    render: async (...args) => {
      result = await inner.render(...args);
      return result;
    },
  };
  const outDir = mkdtempSync(join(tmpdir(), 'vidsheet-pictures-'));
  roots.push(outDir);
  const outcome = await runJob(
    { input: clip, density: '3x3', outDir, ...window },
    { engine: watched, audio: false },
  );
  return { outcome, packets: (result as RenderResult).packets };
}

/** Every frame's thumbnail from a sequential decode, in presentation order. */
async function sequentialThumbs(clip: string): Promise<Buffer> {
  const { stdout } = await execFileP(
    'ffmpeg',
    [
      ...['-v', 'error', '-nostdin', '-i', clip, '-map', '0:v:0'],
      ...['-vf', `scale=${THUMB.w}:${THUMB.h}:flags=area,format=gray`, '-fps_mode', 'passthrough'],
      ...['-f', 'rawvideo', 'pipe:1'],
    ],
    { encoding: 'buffer', maxBuffer: 1 << 28 },
  );
  return stdout;
}

/** Every frame's thumbnail from a sequential decode, in presentation order, with its time. */
async function sequential(clip: string) {
  const stdout = await sequentialThumbs(clip);
  const { times } = await frameTimes(clip);
  expect(stdout.length).toBe(times.length * THUMB_BYTES);
  return { times, thumb: (i: number) => stdout.subarray(i * THUMB_BYTES, (i + 1) * THUMB_BYTES) };
}

const meanDiff = (a: Uint8Array, b: Uint8Array) =>
  a.reduce((s, v, i) => s + Math.abs(v - (b[i] as number)), 0) / a.length;
const key = (h: { start: string; end: string }) => `${h.start}..${h.end}`;
const ENCODINGS: EventEncoding[] = ['h264-scenecut', 'h264-fixed-gop', 'hevc'];
const FLASH = EVENTS.find((e) => e.kind === 'flash') as (typeof EVENTS)[number];
/** Per encoding and engine: whether the flash's frame was decoded (printed, and checked below). */
const flashDecoded: string[] = [];

/**
 * A 3x3 run's pictures on `engine` against the sequential decode: each a frame of the stream,
 * its thumbnail that frame's within 2 levels; the cells' frames among them, and frames between.
 */
async function picturesAreFrames(clip: string, engine: string) {
  const dropped = thumbStats.dropped;
  const [{ outcome, packets }, oracle] = await Promise.all([overview(clip, engine), sequential(clip)]);
  // The fallback's times are the decoder's, and every run's tiles fitted them (none was dropped).
  expect(thumbStats.dropped).toBe(dropped);
  const { pictures, thumbs } = packets;
  expect(thumbs.length).toBe(pictures.length * THUMB_BYTES);
  const frameOf = (t: number) => oracle.times.findIndex((x) => Math.abs(x - t) < 5e-4);
  const seen = new Set<number>();
  let worst = 0;
  for (let i = 0; i < pictures.length; i++) {
    const f = frameOf(pictures[i] as number);
    expect(f, `picture at ${pictures[i]} s`).toBeGreaterThanOrEqual(0);
    seen.add(f);
    const d = meanDiff(thumbs.subarray(i * THUMB_BYTES, (i + 1) * THUMB_BYTES), oracle.thumb(f));
    worst = Math.max(worst, d);
  }
  expect(worst).toBeLessThanOrEqual(2);
  const cells = outcome.frameTimes.flat().map((t) => frameOf(t as number));
  for (const f of cells) expect(seen.has(f)).toBe(true);
  expect(seen.size).toBeGreaterThan(new Set(cells).size * 5);
  return { outcome, decoded: (seconds: number) => seen.has(frameOf(seconds)) };
}

describe.each(ENCODINGS)('the event clip, %s', (encoding) => {
  it.each(ENGINES)(
    '[%s] every picture is a frame of the stream, its thumbnail that frame’s',
    async (engine) => {
      const { outcome, decoded } = await picturesAreFrames(await eventClip(encoding), engine);
      flashDecoded.push(`${encoding} ${engine}: ${decoded(FLASH.seconds) ? 'decoded' : 'not decoded'}`);
      if (decoded(FLASH.seconds)) {
        const first = outcome.zoomHints[0];
        expect(first && key(first)).toBe(key(FLASH.gap));
        expect(first?.signals).toContain('picture');
        expect(first?.score).toBeGreaterThanOrEqual(0.5);
      }
    },
  );
});

describe('an RGB stream (H.264 4:4:4 RGB, decoded as planar G, B, R)', () => {
  // A screen recorder's lossless RGB: the luma is computed from the three planes, as swscale
  // makes gray of them (BT.601, full range).
  const rgb = async () => {
    const source = await eventClip('h264-scenecut');
    return cached('events-rgb', 'mp4', { source, v: 1 }, (out) =>
      run('ffmpeg', [
        ...FFMPEG,
        ...['-i', source, '-map', '0:v', '-c:v', 'libx264rgb', '-preset', 'ultrafast', '-crf', '10'],
        ...['-pix_fmt', 'bgr0', ...BITEXACT, out],
      ]),
    );
  };
  it.each(ENGINES)(
    '[%s] every picture is a frame of the stream, its thumbnail that frame’s',
    async (engine) => {
      await picturesAreFrames(await rgb(), engine);
    },
  );
});

describe('a stream whose pictures change size within a run', () => {
  // Two recordings, 320x240 then 640x360, as one bare H.264 stream (75 frames each, 25 fps): no
  // timestamps, so the fallback decodes it in one run from the start, and where the size changes
  // FFmpeg configures the run's graph anew, losing the tile of thumbnails it was filling
  // (thumbs.ts): the pictures after it are placed from the next tile.
  const changing = () =>
    cached('size-change', 'h264', { v: 1 }, async (out) => {
      const part = (source: string, file: string) =>
        run('ffmpeg', [
          ...FFMPEG,
          ...['-f', 'lavfi', '-i', `${source}:r=25:d=3`],
          ...['-c:v', 'libx264', '-preset', 'ultrafast', '-g', '1000', '-bf', '2', '-pix_fmt', 'yuv420p'],
          ...BITEXACT,
          file,
        ]);
      const [a, b] = [`${out}.a.h264`, `${out}.b.h264`];
      await part('testsrc2=s=320x240', a);
      await part('testsrc=s=640x360', b);
      writeFileSync(out, Buffer.concat([readFileSync(a), readFileSync(b)]));
      rmSync(a);
      rmSync(b);
    });
  it.each(ENGINES)(
    '[%s] each picture is the frame at its time, on both sides of the change',
    async (engine) => {
      const clip = await changing();
      const dropped = thumbStats.dropped;
      const [{ packets }, oracle] = await Promise.all([overview(clip, engine), sequentialThumbs(clip)]);
      expect(thumbStats.dropped).toBe(dropped);
      // A bare stream is timed by frame count: frame f at f / 25 s.
      expect(oracle.length).toBe(150 * THUMB_BYTES);
      const { pictures, thumbs } = packets;
      for (let i = 0; i < pictures.length; i++) {
        const f = Math.round((pictures[i] as number) * 25);
        expect(Math.abs((pictures[i] as number) * 25 - f)).toBeLessThan(0.01);
        const thumb = thumbs.subarray(i * THUMB_BYTES, (i + 1) * THUMB_BYTES);
        expect(
          meanDiff(thumb, oracle.subarray(f * THUMB_BYTES, (f + 1) * THUMB_BYTES)),
          `frame ${f}`,
        ).toBeLessThanOrEqual(2);
      }
      // Both recordings' pictures, most of each (the fallback loses the change's tile: 11 here).
      expect([...pictures].filter((t) => t < 3).length).toBeGreaterThanOrEqual(64);
      expect([...pictures].filter((t) => t >= 3).length).toBeGreaterThanOrEqual(60);
    },
  );
});

describe('the gap after the last cell', () => {
  // A window that ends just after the flash: its frame lies after the last cell, where no cell's
  // decoding reaches; the engines decode on to the window's end for its pictures (closingMs).
  it.each(ENGINES)('[%s] is decoded to the window end, and its flash hinted', async (engine) => {
    const clip = await eventClip('h264-scenecut');
    const { outcome, packets } = await overview(clip, engine, { startMs: 13_000, endMs: 16_600 });
    const cells = outcome.frameTimes.flat() as number[];
    expect(Math.max(...cells)).toBeLessThan(FLASH.seconds);
    expect([...packets.pictures].some((t) => Math.abs(t - FLASH.seconds) < 5e-4)).toBe(true);
    const first = outcome.zoomHints[0];
    expect(first?.start).toBe(outcome.timecodes.flat().at(-1));
    expect(first?.end).toBe('0:16.6');
    expect(first?.signals).toContain('picture');
  });
});

describe('a stream of many tiny frames', () => {
  // 16x16 at 1000 fps for 101 s, one keyframe: every cell decodes on from the start, 101,000
  // pictures in all, past MAX_PICTURES. The render hands over no more (58 MB of thumbnails), and
  // the cells before the limit still have their pictures.
  const tiny = () =>
    cached('tiny-frames', 'mp4', { fps: 1000, seconds: 101 }, (out) =>
      run('ffmpeg', [
        ...FFMPEG,
        ...['-f', 'lavfi', '-i', 'testsrc2=s=16x16:r=1000:d=101'],
        ...['-c:v', 'libx264', '-preset', 'ultrafast', '-g', '1000000', '-bf', '0', '-pix_fmt', 'yuv420p'],
        ...BITEXACT,
        out,
      ]),
    );
  it.each(ENGINES)(
    '[%s] hands over MAX_PICTURES pictures at most',
    async (engine) => {
      const { outcome, packets } = await overview(await tiny(), engine);
      expect(outcome.frameTimes.flat().every((t) => t !== null)).toBe(true);
      expect(packets.pictures.length).toBeLessThanOrEqual(MAX_PICTURES);
      expect(packets.pictures.length).toBeGreaterThan(MAX_PICTURES / 2);
      expect(packets.thumbs.length).toBe(packets.pictures.length * THUMB_BYTES);
    },
    300_000,
  );
});

afterAll(() => {
  console.log(`the flash's frame: ${flashDecoded.join('; ')}`);
  // The test above says something about the signal only if some run decoded the flash.
  if (flashDecoded.length === ENCODINGS.length * ENGINES.length)
    expect(flashDecoded.some((s) => s.endsWith(': decoded'))).toBe(true);
});
