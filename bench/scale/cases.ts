/**
 * The fallback engine on plans far larger than an overview (bench/scale.mjs runs this file): 3000
 * targets of one GOP extracted by one ffmpeg run, and a 2016-cell plan rendered whole. Each frame
 * is asserted (the index each frame of the clip shows, read from the pixels), and each case prints
 * its time. The guard these cases stand behind, that a selection goes to ffmpeg through a filter
 * script file and never argv, is checked in every CI run by test/engine/selection-script.test.ts.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cellRect, computeGrid } from '../../src/core/layout.js';
import { readFrame } from '../../src/engine/ffmpeg/decode.js';
import { extractGroup } from '../../src/engine/ffmpeg/extract.js';
import { listAllPackets } from '../../src/engine/ffmpeg/packets.js';
import { probeFile, videoDetails } from '../../src/engine/ffmpeg/probe.js';
import { OpenGops } from '../../src/engine/ffmpeg/recovery.js';
import { ffmpegEngine } from '../../src/engine/ffmpeg.js';
import { indexClip } from '../../test/helpers/fixtures.js';
import { decodeIndex, fromRgb24, fullRect, readJpeg } from '../../test/helpers/frames.js';
import { expectedIndex, frameTimes } from '../../test/helpers/oracle.js';
import { renderPlan } from '../../test/helpers/plans.js';

let work: string;
beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'vs-scale-'));
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** Prints one result line: what ran, in how many seconds. */
async function timed<T>(what: string, work: () => Promise<T>): Promise<T> {
  const began = performance.now();
  const out = await work();
  console.log(`scale: ${what}: ${((performance.now() - began) / 1000).toFixed(1)} s`);
  return out;
}

describe('the fallback at scale', () => {
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
    const frames = await timed('3000 targets of one GOP in one ffmpeg run', () =>
      extractGroup({
        path: clip,
        d,
        packets,
        group,
        size,
        dir: join(work, 'huge'),
        threads: 0,
        skipNonReference: false,
        keyframes: packets.keyframes,
        entries: new Set(),
        seeking: { trusted: true },
        openGops: new OpenGops(),
        signal: new AbortController().signal,
      }),
    );
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
    const result = await timed('a plan of 2016 cells, 56 sheets', () => ffmpegEngine.render(plan));
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
});
