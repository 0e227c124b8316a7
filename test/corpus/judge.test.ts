/**
 * The corpus judge (fixtures/oracle.mjs) on cells made from the oracle's own frames: a perfect
 * engine must be judged right, and an engine one or two frames off must still be caught.
 *
 * The cells are what an engine paints: frames of a sequential ffmpeg decode of mimetype-mov.flv
 * scaled (bicubic, the engines' scaler) to the 3x3 cell size, laid out where the sheet puts its
 * cells, the whole sheet encoded as JPEG at the sheets' quality and decoded again. The clip is a
 * small object turning slowly: neighbouring frames differ only in a few edges, where a cell read
 * back on a grid a fraction of a pixel off the oracle's (its `flags=area` scale) looked like the
 * frame two before (the corpus once recorded that as an engine bug at 0:04.7).
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { corpusDir } from '../../fixtures/corpus.mjs';
import { cellRect, computeGrid, JPEG_QUALITY, labelAt } from '../../src/core/layout.js';
import { makePlan } from '../../src/core/plan.js';
import { decodeJpeg, encodeJpeg, type Image } from '../helpers/frames.js';
import {
  type CellJudgement,
  cellThumb,
  judgeCell,
  type OracleResult,
  oracleFrames,
  probeFile,
  thumbSize,
} from '../helpers/oracle.js';

const execFileP = promisify(execFile);
const FILE = join(corpusDir(), 'mimetype-mov.flv');

/** Frames `seqs` (output order of a sequential decode) scaled bicubic to `w` x `h`, as RGBA. */
async function decodedFrames(seqs: number[], w: number, h: number): Promise<Map<number, Image>> {
  const select = seqs.map((n) => `eq(n\\,${n})`).join('+');
  const { stdout } = await execFileP(
    'ffmpeg',
    [
      ...['-v', 'error', '-nostdin', '-i', FILE, '-map', '0:v:0', '-fps_mode', 'passthrough'],
      ...['-vf', `select='${select}',scale=${w}:${h}:flags=bicubic,format=rgba`],
      ...['-f', 'rawvideo', 'pipe:1'],
    ],
    { encoding: 'buffer', maxBuffer: 256 << 20 },
  );
  const size = w * h * 4;
  const sorted = [...seqs].sort((a, b) => a - b);
  expect(stdout.length, 'one picture per frame asked for').toBe(size * sorted.length);
  return new Map(
    sorted.map((n, i) => [n, { width: w, height: h, data: stdout.subarray(i * size, (i + 1) * size) }]),
  );
}

describe('the corpus judge, on cells made from the oracle frames', () => {
  const density = '3x3';
  let plan: ReturnType<typeof makePlan>['sheets'][number];
  let oracle: OracleResult[];
  /** The size of a cell. */
  let cell: { w: number; h: number };
  /** Judges `frames[i]` painted as cell i of a sheet (null: leave that cell blank). */
  let judgeSheet: (frames: Array<Image | null>) => Array<CellJudgement | null>;

  beforeAll(async () => {
    const probed = await probeFile(FILE);
    if (!probed.video || !probed.display) throw new Error(`no video stream in ${FILE}`);
    // The clip is as long as it declares (the packets end within DESIGN §2's tolerance).
    const endMs = Math.round((probed.declared ?? 0) * 1000);
    plan = makePlan({ startMs: 0, endMs }, density).sheets[0] ?? [];
    const size = thumbSize(probed.display.width / probed.display.height);
    const timesMs = plan.map((c) => c.timeMs);
    oracle = (await oracleFrames(FILE, probed.video.index, timesMs, { ...size, startUs: probed.startUs }))
      .results;
    const grid = computeGrid(probed.display.width, probed.display.height, density, true);
    cell = { w: grid.cellWidth, h: grid.cellHeight };
    judgeSheet = (frames) => {
      const sheet: Image = {
        width: grid.width,
        height: grid.height,
        data: new Uint8Array(grid.width * grid.height * 4).fill(17),
      };
      frames.forEach((f, i) => {
        if (!f) return;
        const r = cellRect(grid, i);
        for (let y = 0; y < r.h; y++) {
          sheet.data.set(f.data.subarray(y * r.w * 4, (y + 1) * r.w * 4), ((r.y + y) * grid.width + r.x) * 4);
        }
      });
      const read = decodeJpeg(encodeJpeg(sheet, JPEG_QUALITY));
      return frames.map((f, i) => {
        const o = oracle[i];
        const planned = plan[i];
        if (!f || !o || !planned) return null;
        const r = cellRect(grid, i);
        const label = labelAt(planned.label, r.x, r.y + r.h, grid.fontSize);
        return judgeCell(cellThumb(read, r, label.box, size), o);
      });
    };
  });

  /** The candidate `offset` frames from the expected one, for each cell: its decode order. */
  const seqAt = (o: OracleResult | undefined, offset: number) =>
    o?.candidates.find((c) => c.offset === offset)?.seq;

  it('a cell showing the frame displayed at its time matches, in every cell', {
    timeout: 120_000,
  }, async () => {
    const seqs = oracle.map((o) => seqAt(o, 0));
    expect(seqs.every((s) => s !== undefined)).toBe(true);
    const frames = await decodedFrames(seqs as number[], cell.w, cell.h);
    const verdicts = judgeSheet(seqs.map((s) => frames.get(s as number) ?? null));
    expect(verdicts.map((v, i) => `${plan[i]?.label} ${v?.verdict}`)).toEqual(
      plan.map((c) => `${c.label} match`),
    );
  });

  it('at 0:04.7, a cell one or two frames off is caught as that frame', { timeout: 120_000 }, async () => {
    const at = plan.findIndex((c) => c.label === '0:04.7');
    expect(at).toBe(7);
    const o = oracle[at];
    // The frames -2, -1, 0, +1, +2 around the one displayed at 4.700 s (it starts at 4.685 s).
    expect(o?.candidates.map((c) => [c.offset, c.time])).toEqual([
      [-2, 4.618],
      [-1, 4.651],
      [0, 4.685],
      [1, 4.718],
      [2, 4.751],
    ]);
    const offsets = [-2, -1, 0, 1, 2];
    const seqs = offsets.map((k) => seqAt(o, k) as number);
    const frames = await decodedFrames(seqs, cell.w, cell.h);
    const verdicts = offsets.map((_, i) => {
      const cells: Array<Image | null> = plan.map(() => null);
      cells[at] = frames.get(seqs[i] as number) ?? null;
      const v = judgeSheet(cells)[at];
      return v?.verdict === 'neighbour' ? `neighbour ${v.best?.offset}` : v?.verdict;
    });
    expect(verdicts).toEqual([
      'neighbour -2',
      // 4.651 s and 4.685 s differ in 3 of the 12,348 small pixels (more than 24 levels): the same
      // picture to the judge (MATCH.minPixels), so either will do.
      'match',
      'match',
      'neighbour 1',
      'neighbour 2',
    ]);
  });
});
