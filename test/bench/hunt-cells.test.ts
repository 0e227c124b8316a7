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
import { everyFrameShown, KIND, zoomArgs } from '../../bench/hunt/agent.mjs';
import { classifyCell, readCells, sheetGrid } from '../../bench/hunt/cells.mjs';
import { filterGraph, recipe } from '../../bench/hunt/haystack.mjs';
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

function encode(name: string, r: ReturnType<typeof recipe>): string {
  const out = join(work, `${name}.mp4`);
  execFileSync('ffmpeg', [
    ...['-hide_banner', '-loglevel', 'error', '-nostdin', '-y', '-f', 'lavfi', '-i', filterGraph(r)],
    ...['-c:v', 'libx264', '-preset', 'veryfast', '-pix_fmt', 'yuv420p', out],
  ]);
  return out;
}

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'vs-hunt-'));
  squares = encode('squares', { ...recipe('C', FPS, 0.5), frames: 600, frame: 200, decoys: [400] });
  change = encode('change', { ...recipe('A', FPS, 0.5), frames: 600, frame: 301, decoys: [] });
});

afterAll(() => rmSync(work, { recursive: true, force: true }));

/** The local tool on a window; each cell's kind as the agent reads it, and the frame it shows. */
async function look(file: string, needleClass: 'A' | 'C', density: Density, start: number, end: number) {
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
