/**
 * The FFmpeg FATE samples of the corpus (fixtures/fate/) beyond the corpus suite's 3x3 overview:
 * denser overviews and zoom windows, on every engine, judged by the sequential-decode oracle
 * (test/helpers/oracle.ts). And the FLV whose frame times were disputed, settled with the file's
 * own evidence.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { corpusDir } from '../../fixtures/corpus.mjs';
import { ENGINES } from '../helpers/cli.js';
import { type CellJudgement, judgeRun, oracleCache, readJpegFile, runVidsheet } from '../helpers/oracle.js';

const execFileP = promisify(execFile);
const dir = corpusDir();
const fate = (name: string) => join(dir, `fate-${name}`);

/** Runs that each judge one file at one density and window, both engines. */
const RUNS: Array<{ file: string; density: string; start?: number; end?: number }> = [
  // Field-coded PAL MPEG-2 in a transport stream, bottom field first.
  { file: 'mpeg2_field_encoding.mp4', density: '6x6' },
  { file: 'mpeg2_field_encoding.mp4', density: '3x3', start: 0.7, end: 1.6 },
  // A DVD VOB: I and P pictures without a PES timestamp among B pictures with one.
  { file: 'coolitnow-partial.mp4', density: '6x6' },
  { file: 'coolitnow-partial.mp4', density: '3x3', start: 0.6, end: 0.93 },
  { file: 'wwwq_cut.mp4', density: '4x4', start: 2, end: 3.9 },
  { file: 'SonyXAVC_LongGOP_green_pixelation_early_Frames.mp4', density: '4x4' },
];

describe.concurrent('FATE samples: windows and dense overviews, every engine', () => {
  for (const run of RUNS) {
    const cache = oracleCache();
    const window = run.start === undefined ? 'overview' : `${run.start}-${run.end} s`;
    for (const engine of ENGINES) {
      it(`${run.file} ${run.density} ${window} [${engine}]`, { timeout: 300_000 }, async () => {
        const { facts, problems } = await judgeRun({ ...run, file: fate(run.file), engine, cache });
        expect(problems).toEqual([]);
        expect(facts.cells).toBeGreaterThan(0);
      });
    }
  }
});

/**
 * Both engines show an interlaced frame by its top field, line-doubled (native: convert.rs; the
 * fallback: bwdif keeping the top field), whichever field comes first in time: the judge accepts
 * either field of the right frame, so only the two engines' sheets side by side tell a fallback
 * that keeps the bottom field apart. On this bottom-field-first file the two fields are 20 ms
 * apart: the sheets differ by 12.1 on average where the engines keep different fields, 4.3 (the
 * interpolated lines, JPEG) where they keep the same.
 */
it('both engines keep the same field of a bottom-field-first frame', { timeout: 300_000 }, async () => {
  const work = await mkdtemp(join(tmpdir(), 'vs-fields-'));
  try {
    const sheets = [];
    for (const engine of ['native', 'ffmpeg']) {
      const out = join(work, engine);
      const run = await runVidsheet([fate('mpeg2_field_encoding.mp4'), '--density', '6x6', '--out', out], {
        env: { ...process.env, VIDSHEET_ENGINE: engine },
        timeoutMs: 240_000,
      });
      expect(run.code, run.stderr).toBe(0);
      const [file] = await readdir(out);
      sheets.push(await readJpegFile(join(out, file as string)));
    }
    const [a, b] = sheets as [
      Awaited<ReturnType<typeof readJpegFile>>,
      Awaited<ReturnType<typeof readJpegFile>>,
    ];
    expect([b.width, b.height]).toEqual([a.width, a.height]);
    let sum = 0;
    for (let i = 0; i < a.data.length; i++)
      if (i % 4 !== 3) sum += Math.abs((a.data[i] as number) - (b.data[i] as number));
    expect(sum / ((a.data.length * 3) / 4)).toBeLessThan(8);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
});

const FLV = fate('Enigma_Principles_of_Lust-part.mp4');

interface Frame {
  pts: number;
  dts: number;
  bestEffort: number;
  type: string;
}

/** The video frames of a sequential decode, in output (display) order, milliseconds (tb 1/1000). */
async function decodedFrames(): Promise<Frame[]> {
  const { stdout } = await execFileP('ffprobe', [
    ...['-v', 'quiet', '-select_streams', 'v:0', '-show_frames', '-of', 'json'],
    ...['-show_entries', 'frame=pts,pkt_dts,best_effort_timestamp,pict_type', FLV],
  ]);
  return (JSON.parse(stdout).frames as Array<Record<string, unknown>>).map((f) => ({
    pts: f.pts as number,
    dts: f.pkt_dts as number,
    bestEffort: f.best_effort_timestamp as number,
    type: f.pict_type as string,
  }));
}

/**
 * The disputed FLV (FATE h264/Enigma_Principles_of_Lust-part): a review's judge put the frame the
 * engines show at 0:05 and 0:06 one frame later. Which frame is right at t depends on which times
 * the frames are shown at, and the file itself answers that.
 */
describe('the disputed FLV: frames are shown at their best-effort times', () => {
  /** The video packets' [pts, dts], decode order. */
  async function packets(): Promise<number[][]> {
    const { stdout } = await execFileP('ffprobe', [
      ...['-v', 'quiet', '-select_streams', 'v:0', '-show_entries', 'packet=pts,dts', '-of', 'csv=p=0', FLV],
    ]);
    return stdout
      .split('\n')
      .filter((l) => /^\d+,\d+/.test(l))
      .map((l) => l.split(',').slice(0, 2).map(Number));
  }

  it('its tags carry decode times as pts: no composition offset, though it has B-frames', async () => {
    const listed = await packets();
    expect(listed.length).toBeGreaterThan(300);
    expect(listed.filter(([pts, dts]) => pts !== dts)).toEqual([]);
    const frames = await decodedFrames();
    expect(frames.filter((f) => f.type === 'B').length).toBeGreaterThan(10);
    // So the container's pts go backwards in display order (a P picture decoded before two B
    // pictures is shown after them, with its earlier decode time): they are no presentation
    // timeline, and the decoder's timestamp correction judges them faulty.
    const backwards = frames.filter((f, i) => i > 0 && f.pts <= (frames[i - 1] as Frame).pts);
    expect(backwards.length).toBeGreaterThan(10);
  });

  it('its best-effort times are a timeline: the decode time of the packet that put each frame out', async () => {
    const frames = await decodedFrames();
    const dts = (await packets()).map(([, d]) => d as number);
    // The first frame keeps its own pts (nothing judged faulty yet); the last comes out when the
    // decoder is flushed at the cut, with no packet to be stamped by. Every other frame comes out
    // as a packet is sent, one frame per packet from the second on, stamped with its decode time:
    // the times pts = dts + the reorder delay would have given, had the muxer written offsets.
    const stamps = frames.map((f) => f.bestEffort).slice(0, -1);
    for (let i = 1; i < stamps.length; i++)
      expect(stamps[i], `frame ${i}`).toBeGreaterThan(stamps[i - 1] as number);
    expect(stamps.slice(1)).toEqual(dts.slice(2, -1));
  });

  // At 0:05 and 0:06 the two timelines name different frames: a cell judged against the
  // best-effort timeline cannot also pass against the container's pts.
  it('at 0:05 and 0:06 the container pts and the best-effort times name different frames', async () => {
    const frames = await decodedFrames();
    const shownAt = (t: number, time: (f: Frame) => number) => {
      const sorted = [...frames].sort((a, b) => time(a) - time(b));
      return sorted.filter((f) => time(f) <= t * 1000).pop();
    };
    for (const t of [5, 6]) {
      const byBestEffort = shownAt(t, (f) => f.bestEffort);
      const byPts = shownAt(t, (f) => f.pts);
      expect(byBestEffort?.dts, `t=${t}`).not.toBe(byPts?.dts);
    }
  });

  const cache = oracleCache();
  for (const engine of ENGINES) {
    it(`every engine shows the best-effort frame in 0:05-0:06.8 and the 6x6 overview [${engine}]`, {
      timeout: 300_000,
    }, async () => {
      // The middle cell of 4.9-5.1 (and 5.9-6.1) samples 0:05.000 (0:06.000) exactly.
      for (const run of [
        { density: '3x3', start: 4.9, end: 5.1 },
        { density: '3x3', start: 5.9, end: 6.1 },
        { density: '3x3', start: 5, end: 6.8 },
        { density: '6x6', start: undefined, end: undefined },
      ]) {
        const cells: CellJudgement[] = [];
        const { problems } = await judgeRun({
          file: FLV,
          engine,
          cache,
          ...run,
          onCell: (c) => cells.push(c),
        });
        expect(problems, `${run.density} ${run.start ?? 'overview'}`).toEqual([]);
        expect(cells.length).toBeGreaterThanOrEqual(9);
      }
    });
  }
});
