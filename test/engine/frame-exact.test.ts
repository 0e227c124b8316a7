/**
 * Frame exactness, end to end through the built CLI on every engine: each cell of each sheet must
 * show exactly the frame displayed at its label time (the last frame whose presentation time is
 * <= t, counted from the container start), read back from the JPEG's pixels. The clips encode
 * their own frame index; the expected frame comes from an independent oracle (ffprobe's decoded
 * frame list), never from the engines' own code.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Density } from '../../src/core/density.js';
import { cellRect, computeGrid } from '../../src/core/layout.js';
import { makePlan } from '../../src/core/plan.js';
import { ENGINES, runCli } from '../helpers/cli.js';
import { type IndexClipOptions, indexClip } from '../helpers/fixtures.js';
import { decodeIndex, readJpeg } from '../helpers/frames.js';
import { expectedIndex, frameTimes } from '../helpers/oracle.js';

interface Variant {
  name: string;
  clip: IndexClipOptions;
  /** Displayed size, after rotation and sample aspect ratio. */
  display: [number, number];
}

const VARIANTS: Variant[] = [
  { name: 'H.264 mp4, B-frames, GOP 250', clip: { seconds: 20, gop: 250, bframes: 3 }, display: [320, 240] },
  {
    name: 'NTSC rate 30000/1001 in mkv',
    clip: { seconds: 12, fps: '30000/1001', container: 'mkv', gop: 120 },
    display: [320, 240],
  },
  {
    name: 'MPEG-TS starting at 19207 s',
    clip: { seconds: 12, container: 'ts', startOffsetSeconds: 19207 },
    display: [320, 240],
  },
  { name: 'display matrix rotation (phone, -90)', clip: { seconds: 8, rotate: 270 }, display: [240, 320] },
  { name: 'sample aspect ratio 2:1', clip: { seconds: 8, sar: '2:1' }, display: [640, 240] },
  { name: '10-bit 4:2:0', clip: { seconds: 8, pixFmt: 'yuv420p10le' }, display: [320, 240] },
  {
    name: 'short GOP (12 frames): a seek per cell',
    clip: { seconds: 10, gop: 12, bframes: 3 },
    display: [320, 240],
  },
];

interface Call {
  density: Density;
  start?: string;
  end?: string;
}

let work: string;
beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'vs-exact-'));
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

/**
 * Checks every cell against the oracle; returns how many distinct frames were shown. `onDebug`
 * receives the engine's NODE_DEBUG log (stderr is otherwise required to be empty).
 */
async function checkCells(
  engine: string,
  variant: Variant,
  call: Call,
  onDebug?: (log: string) => void,
): Promise<number> {
  const path = await indexClip(variant.clip);
  const oracle = await frameTimes(path);
  const args = [path, '--json', '--density', call.density, '--out', join(work, engine, variant.name)];
  if (call.start) args.push('--start', call.start);
  if (call.end) args.push('--end', call.end);
  const r = await runCli(args, { engine, env: onDebug ? { NODE_DEBUG: 'vidsheet' } : {} });
  if (onDebug) onDebug(r.stderr);
  else expect(r.stderr).toBe('');
  expect(r.code).toBe(0);
  const report = JSON.parse(r.stdout);
  expect(report.warnings).toEqual([]);

  const window = report.window ?? { start: 0, end: report.duration };
  const plan = makePlan(
    { startMs: Math.round(window.start * 1000), endMs: Math.round(window.end * 1000) },
    call.density,
  );
  const grid = computeGrid(variant.display[0], variant.display[1], call.density, true);
  expect(report.files).toHaveLength(plan.sheets.length);
  const shown = new Set<number>();
  for (const [s, cells] of plan.sheets.entries()) {
    const sheet = readJpeg(report.files[s]);
    expect([sheet.width, sheet.height]).toEqual([grid.width, grid.height]);
    for (const [c, cell] of cells.entries()) {
      const read = decodeIndex(sheet, cellRect(grid, c));
      const expected = expectedIndex(oracle, cell.timeMs / 1000);
      expect(
        read.confidence,
        `sheet ${s + 1} cell ${c + 1} (${cell.label}) is not a clean index frame`,
      ).toBeGreaterThan(40);
      expect(read.index, `sheet ${s + 1} cell ${c + 1} at ${cell.label}`).toBe(expected);
      shown.add(read.index);
    }
  }
  return shown.size;
}

describe.each(ENGINES)('engine %s: every cell shows the frame displayed at its label time', (engine) => {
  it.each(VARIANTS)('$name: 3x3 overview', async (variant) => {
    await checkCells(engine, variant, { density: '3x3' });
  });

  it('short GOP: 6x6 overview, cells sharing and crossing GOPs', async () => {
    await checkCells(engine, VARIANTS[6] as Variant, { density: '6x6' });
  });

  it('B-frames, GOP 250: 6x6 overview', async () => {
    await checkCells(engine, VARIANTS[0] as Variant, { density: '6x6' });
  });

  it('B-frames, GOP 250: 6x6 over a 350 ms window, labels typed as timecodes', async () => {
    // 36 cells over 350 ms of 25 fps video: ~9 distinct frames, several cells per frame.
    const distinct = await checkCells(engine, VARIANTS[0] as Variant, {
      density: '6x6',
      start: '0:07.30',
      end: '7.65',
    });
    expect(distinct).toBeGreaterThanOrEqual(8);
  });

  it('MPEG-TS at 19207 s: a window is on the container clock (0:00 = first packet)', async () => {
    await checkCells(engine, VARIANTS[2] as Variant, { density: '4x4', start: '3.1', end: '0:04.9' });
  });

  it('NTSC rate: 5x5 over a window a label apart', async () => {
    await checkCells(engine, VARIANTS[1] as Variant, { density: '5x5', start: '0:02.5', end: '0:03.1' });
  });
});

describe.runIf(ENGINES.includes('ffmpeg'))('ffmpeg engine: decoding only what a target needs', () => {
  // One B-frame between references: the B-frames are exactly the non-reference frames.
  it.each(['h264', 'hevc'] as const)(
    '%s: reference targets skip the non-reference frames before them, the others do not',
    async (codec) => {
      const variant = { name: `${codec} B non-ref`, clip: { seconds: 12, gop: 50, bframes: 1, codec } };
      let log = '';
      await checkCells('ffmpeg', { ...variant, display: [320, 240] }, { density: '5x5' }, (l) => (log = l));
      // Frame extractions are the ffmpeg runs that write numbered PPM files.
      const extractions = log.split('\n').filter((line) => /spawn ffmpeg .*-c:v ppm/.test(line));
      const skipping = extractions.filter((line) => line.includes('-skip_frame noref'));
      expect(skipping.length).toBeGreaterThan(0);
      expect(skipping.length).toBeLessThan(extractions.length);
      expect(log).not.toContain('skipped as non-reference');
    },
  );
});
