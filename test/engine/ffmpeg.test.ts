/**
 * The fallback engine's extraction on plans far larger than an overview: thousands of targets in
 * one GOP are extracted by one ffmpeg run whose selection goes through a file, so no argument
 * reaches the kernel's per-argument limit (128 KiB; the selection of 3000 targets is longer).
 * The oracle is the index each frame of the clip shows, read from the extracted pixels.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cellRect, computeGrid, JPEG_QUALITY, layoutSheets, THEME } from '../../src/core/layout.js';
import { extractGroup, readFrame } from '../../src/engine/ffmpeg/extract.js';
import { listAllPackets } from '../../src/engine/ffmpeg/packets.js';
import { ffmpegEngine } from '../../src/engine/ffmpeg.js';
import { probeFile, videoDetails } from '../../src/engine/ffprobe.js';
import { labelFontPath } from '../../src/engine/font.js';
import type { RenderPlan } from '../../src/engine/types.js';
import { expectedIndex, frameTimes, indexClip } from '../helpers/fixtures.js';
import { decodeIndex, fromRgb24, fullRect, readJpeg } from '../helpers/frames.js';

let work: string;
beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'vs-ffmpeg-'));
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** A render plan over `clip` (stream 0, no audio) laid out like the job runner lays it out. */
function renderPlan(
  clip: string,
  tempDir: string,
  layout: Omit<Parameters<typeof layoutSheets>[0], 'hasAudio'>,
): RenderPlan {
  return {
    input: clip,
    videoStream: 0,
    fontPath: labelFontPath(),
    quality: JPEG_QUALITY,
    theme: THEME,
    sheets: layoutSheets({ ...layout, hasAudio: false }),
    audio: null,
    tempDir,
  };
}

describe('ffmpeg engine: a huge group', () => {
  it('extracts 3000 targets of one GOP in one run, each the frame it names', async () => {
    // 4000 frames, one keyframe: every target shares the GOP.
    const clip = await indexClip({ seconds: 160, gop: 4000, bframes: 3 });
    const probed = await probeFile(clip);
    const d = videoDetails(probed, 0);
    const packets = await listAllPackets(clip, d);
    expect(packets.pts).toHaveLength(4000);
    expect(packets.keyframes).toHaveLength(1);
    // Three frames of every four: 3000 targets, their selection well over 128 KiB of text.
    const group = packets.pts.map((_, i) => i).filter((i) => i % 4 !== 3);
    expect(group).toHaveLength(3000);
    const size = { w: 64, h: 48 };
    const frames = await extractGroup({
      path: clip,
      d,
      packets,
      group,
      size,
      dir: join(work, 'huge'),
      threads: 0,
      skipNonReference: false,
      keyframes: packets.keyframes,
      seeking: { trusted: true },
      signal: new AbortController().signal,
    });
    expect(frames.size).toBe(3000);
    const wrong: number[] = [];
    for (const i of group) {
      const file = frames.get(packets.pts[i] as bigint);
      const rgb = file ? await readFrame(file, size) : null;
      const image = rgb ? fromRgb24(rgb, size.w, size.h) : null;
      if (!image || decodeIndex(image, fullRect(image)).index !== i) wrong.push(i);
    }
    expect(wrong).toEqual([]);
  }, 240_000);

  it('renders a plan of 2016 cells over one GOP: 56 sheets, every cell the frame displayed', async () => {
    const clip = await indexClip({ seconds: 160, gop: 4000, bframes: 3 });
    const oracle = await frameTimes(clip);
    // 56 sheets of 6x6, a cell every 79 ms (about every second frame), as one plan.
    const perSheet = 36;
    const sheets = Array.from({ length: 56 }, (_, s) =>
      Array.from({ length: perSheet }, (_, c) => {
        const timeMs = (s * perSheet + c) * 79;
        return { timeMs, label: String(timeMs) };
      }),
    );
    const grid = computeGrid(320, 240, '6x6', false);
    const out = join(work, 'plan');
    const tempDir = join(work, 'plan-tmp');
    mkdirSync(out);
    mkdirSync(tempDir);
    const plan = renderPlan(clip, tempDir, {
      grid,
      sheets,
      window: { startMs: 0, endMs: 56 * perSheet * 79 },
      paths: sheets.map((_, s) => join(out, `sheet-${s + 1}.jpg`)),
    });
    const result = await ffmpegEngine.render(plan);
    expect(result.unreadable).toEqual([]);
    const wrong: string[] = [];
    for (const [s, cells] of sheets.entries()) {
      const image = readJpeg(join(out, `sheet-${s + 1}.jpg`));
      for (const [c, cell] of cells.entries()) {
        const read = decodeIndex(image, cellRect(grid, c));
        const expected = expectedIndex(oracle, cell.timeMs / 1000);
        if (read.index !== expected) wrong.push(`${cell.timeMs} ms: ${read.index}, not ${expected}`);
      }
    }
    expect(wrong).toEqual([]);
  }, 300_000);

  it('a render that fails stops and awaits its children before it settles', async () => {
    // Short GOPs: many groups still decode when the first sheet fails to be written.
    const clip = await indexClip({ seconds: 20, gop: 12, bframes: 3 });
    const sheets = [0, 1].map((s) =>
      Array.from({ length: 36 }, (_, c) => {
        const timeMs = s === 0 ? c * 50 : 4000 + c * 400;
        return { timeMs, label: String(timeMs) };
      }),
    );
    const grid = computeGrid(320, 240, '6x6', false);
    const tempDir = join(work, 'fail-tmp');
    mkdirSync(tempDir);
    const plan = renderPlan(clip, tempDir, {
      grid,
      sheets,
      window: { startMs: 0, endMs: 20_000 },
      // The first sheet's directory does not exist: its encoder fails.
      paths: [join(work, 'missing', 'sheet-1.jpg'), join(work, 'sheet-2.jpg')],
    });
    await expect(ffmpegEngine.render(plan)).rejects.toThrow(/drawing labels failed/);
    // Settled: no ffmpeg of this render is left running, and nothing writes into tempDir any more.
    const running = execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' });
    expect(running.split('\n').filter((line) => line.includes(tempDir))).toEqual([]);
    rmSync(tempDir, { recursive: true, force: true });
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(existsSync(tempDir)).toBe(false);
    expect(existsSync(join(work, 'sheet-2.jpg'))).toBe(false);
  }, 120_000);
});
