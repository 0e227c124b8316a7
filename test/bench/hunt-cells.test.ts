/**
 * The hunt benchmark's eyes (bench/hunt/cells.mjs) on real sheets: short clips made with the
 * haystack recipes, real sheets from the local tool, and every cell's reading checked against
 * the frame its label samples (DESIGN §2: the last frame whose time is <= the label), with
 * the needle's frames known from the recipe. Also the agent's window rules.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { everyFrameShown, hunt, KIND, zoomArgs } from '../../bench/hunt/agent.mjs';
import { classifyCell, readCells, sheetGrid } from '../../bench/hunt/cells.mjs';
import { clickSpan, haystack, recipe } from '../../bench/hunt/haystack.mjs';
import type { Density } from '../../src/core/density.js';
import { computeGrid } from '../../src/core/layout.js';
import { parseTimeMs } from '../../src/core/time.js';
import { callLocalTool } from '../../src/mcp/tool.js';

const FPS = 30;
let work: string;
/** 20 s: red square frames 200..214, green decoy 400..414. */
let squares: string;
/** 20 s: background orange from frame 301 on. */
let change: string;

/** A 20-second haystack of the recipe, with the needle at `frame` (the benchmark's own encode). */
const short = (r: ReturnType<typeof recipe>, frame: number, decoys: number[] = []) =>
  haystack({ ...r, frames: 20 * r.fps, frame, decoys }, work);

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'vs-hunt-'));
  squares = short(recipe('C', FPS, 0.5), 200, [400]);
  change = short(recipe('A', FPS, 0.5), 301);
});

afterAll(() => rmSync(work, { recursive: true, force: true }));

/** The local tool on a window; each cell's kind as the agent reads it, and the frame it shows. */
async function look(
  file: string,
  needleClass: 'A' | 'C' | 'T',
  density: Density,
  start: number,
  end: number,
) {
  const out = mkdtempSync(join(work, 'out-'));
  const result = await callLocalTool({ video_path: file, density, start, end, out_dir: out });
  const text = (result.content[0] as { text: string }).text;
  expect(result.isError, text).toBeFalsy();
  const report = JSON.parse(text) as { files: string[]; timecodes: string[][] };
  const kinds = report.files.flatMap((f) => readCells(f, density).map((c) => classifyCell(needleClass, c)));
  const frames = report.timecodes
    .flat()
    .map((label) => Math.floor(((parseTimeMs(label) as number) * FPS) / 1000 + 1e-6));
  return { kinds, frames };
}

describe('the agent reads cells by their pixels', () => {
  it('the red needle and the green decoy, cell by cell, at 4x4 and 6x6', async () => {
    for (const density of ['4x4', '6x6'] as const) {
      // Windows around the needle (frames 200..214) and the decoy (400..414), cells a frame or two apart.
      for (const [start, end] of [
        [6.4, 7.4],
        [13, 14],
      ] as const) {
        const { kinds, frames } = await look(squares, 'C', density, start, end);
        const expected = frames.map((f) =>
          f >= 200 && f <= 214 ? KIND.needle : f >= 400 && f <= 414 ? KIND.decoy : KIND.none,
        );
        expect(kinds, `${density} ${start}-${end}`).toEqual(expected);
        expect(kinds.filter((k) => k !== KIND.none).length).toBeGreaterThan(3); // the premise: some cells show it
      }
    }
  });

  it('the state change, before and after, across the whole clip', async () => {
    const { kinds, frames } = await look(change, 'A', '4x4', 0, 20);
    expect(kinds).toEqual(frames.map((f) => (f >= 301 ? KIND.needle : KIND.none)));
    expect(new Set(kinds).size).toBe(2);
  });

  it('the tiny mark (class T), before and after, across the whole clip, at 4x4 and 6x6', async () => {
    const mark = short(recipe('T', FPS, 0.5, 'fixedgop'), 301);
    for (const density of ['4x4', '6x6'] as const) {
      const { kinds, frames } = await look(mark, 'T', density, 0, 20);
      expect(kinds, density).toEqual(frames.map((f) => (f >= 301 ? KIND.needle : KIND.none)));
      expect(new Set(kinds).size).toBe(2);
    }
  });

  it('a sheet size that is not a grid of the density is refused, not misread', () => {
    const g = computeGrid(320, 180, '4x4', true);
    expect(sheetGrid(g.width, g.height, '4x4', true)).toMatchObject({
      side: 4,
      cellWidth: g.cellWidth,
      cellHeight: g.cellHeight,
      gridTop: g.gridTop,
    });
    expect(() => sheetGrid(g.width, g.height, '6x6', true)).toThrow(/not a 6x6 grid/);
    expect(() => sheetGrid(g.width, g.height + 1, '4x4', true)).toThrow(/not a 4x4 grid/);
  });
});

/** The keyframes' frame numbers (ffprobe's packet flags, presentation order) of a constant-rate clip. */
function keyframes(file: string, fps: number): number[] {
  const csv = execFileSync('ffprobe', [
    ...['-v', 'error', '-select_streams', 'v:0', '-show_entries', 'packet=pts_time,flags'],
    ...['-of', 'csv=p=0', file],
  ]).toString();
  return csv
    .trim()
    .split('\n')
    .map((line) => line.split(','))
    .filter(([, flags]) => flags?.startsWith('K'))
    .map(([t]) => Math.round(Number(t) * fps))
    .sort((a, b) => a - b);
}

/** The decoded sound (mono, 48 kHz, float): the oracle for where the click is. */
function samples(file: string): Float32Array {
  const raw = execFileSync(
    'ffmpeg',
    ['-v', 'error', '-nostdin', '-i', file, '-vn', '-ac', '1', '-ar', '48000', '-f', 'f32le', 'pipe:1'],
    { maxBuffer: 64 * 1024 * 1024 },
  );
  return new Float32Array(raw.buffer, raw.byteOffset, raw.length / 4);
}

describe('the haystacks hold what their recipes say', () => {
  it('a state change gets a keyframe in the scene-cut encode; the fixed-GOP encode has every 250th only', () => {
    const scenecut = short(recipe('A', FPS, 0.5), 301);
    const fixedgop = short(recipe('A', FPS, 0.5, 'fixedgop'), 301);
    expect(keyframes(fixedgop, FPS)).toEqual([0, 250, 500]);
    expect(keyframes(scenecut, FPS)).toEqual([0, 250, 301, 551]); // the cut restarts the count
  });

  for (const fps of [30, 60]) {
    it(`class D at ${fps} fps: the click sounds within its frame, over a tone far below it`, () => {
      const r = recipe('D', fps, 0.5);
      const frame = 7 * fps + 5;
      const pcm = samples(short(r, frame));
      const loud = [...pcm.keys()].filter((i) => Math.abs(pcm[i] as number) > 0.3);
      expect(loud.length).toBeGreaterThan(0);
      const [first, last] = [(loud[0] as number) / 48_000, (loud.at(-1) as number) / 48_000];
      expect(first).toBeGreaterThanOrEqual(frame / fps);
      expect(last).toBeLessThan((frame + 1) / fps);
      expect(clickSpan({ ...r, frame })[0]).toBeCloseTo(first, 2); // the recipe says where it is
      let tone = 0; // the loudest sample before the click: the tone, steady and quiet
      for (let i = 0; i < first * 48_000 - 4800; i++) tone = Math.max(tone, Math.abs(pcm[i] as number));
      expect(tone).toBeLessThan(0.05);
      expect(tone).toBeGreaterThan(0.01);
    });
  }

  it('the agent hears a class-D click through the real hints and names its frame within one', async () => {
    const fps = 30;
    const frame = 13 * fps + 7;
    const file = short(recipe('D', fps, 0.5), frame);
    const call = async (args: { start?: string | number; end?: string | number }) => {
      const out = mkdtempSync(join(work, 'out-'));
      const result = await callLocalTool({ video_path: file, density: '4x4', out_dir: out, ...args });
      const text = (result.content[0] as { text: string }).text;
      expect(result.isError, text).toBeFalsy();
      const report = JSON.parse(text) as { timecodes: string[][] };
      return { report, kinds: report.timecodes.flat().map(() => KIND.none) };
    };
    const r = await hunt({ call, listen: true, minWindowS: 0.034 });
    expect(r.answer, JSON.stringify(r.trail)).not.toBeNull();
    expect(Math.abs((r.answer as number) - frame / fps)).toBeLessThanOrEqual(1 / fps + 0.0005);
    expect(r.trail.at(-1)?.complete).toBe(true);
  });
});

describe('the agent window rules', () => {
  it('every frame is shown only when two cells share a frame', () => {
    expect(everyFrameShown([[1, 1.033, 1.033]])).toBe(true);
    expect(everyFrameShown([[1], [1]])).toBe(true); // across sheets too
    expect(everyFrameShown([[1, 1.033, 1.067]])).toBe(false);
    expect(everyFrameShown([[null, null]])).toBe(false);
  });

  it('zooms between two labels, widened to the smallest window the grid allows', () => {
    expect(zoomArgs('1:00', '1:05.5', 0.034, 100)).toEqual({ start: '1:00', end: '1:05.5' });
    expect(zoomArgs('1:00.000', '1:00.033', 0.074, 100)).toEqual({ start: 59.979, end: 60.055 });
    expect(zoomArgs(0, '0:00.010', 0.074, 100)).toEqual({ start: 0, end: 0.076 });
  });
});
