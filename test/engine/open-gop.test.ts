/**
 * The fallback engine enters open GOPs as the native one does (src/core/open-gop.ts): the first
 * entry at a keyframe that is not an IDR is verified by a second decode from further back, which
 * proves the stream's entries clean, and every later entry is decoded once. The oracle is the
 * index each frame of the clip shows, read from the extracted pixels (a sequential decode from
 * the start shows each frame's own index); the decodes a group cost are the runs it wrote (one
 * directory each), and where a render starts decoding is read from the ffmpeg arguments it spawns.
 */
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { cellRect, computeGrid, JPEG_QUALITY, layoutSheets, THEME } from '../../src/core/layout.js';
import { readFrame } from '../../src/engine/ffmpeg/decode.js';
import { extractGroup } from '../../src/engine/ffmpeg/extract.js';
import { pictureHints } from '../../src/engine/ffmpeg/nal.js';
import { lastAtOrBefore, listAllPackets, seconds } from '../../src/engine/ffmpeg/packets.js';
import { probeFile, videoDetails } from '../../src/engine/ffmpeg/probe.js';
import { OpenGops } from '../../src/engine/ffmpeg/recovery.js';
import { ffmpegEngine } from '../../src/engine/ffmpeg.js';
import { labelFontPath } from '../../src/engine/font.js';
import { indexClip } from '../helpers/fixtures.js';
import { decodeIndex, fromRgb24, fullRect, readJpeg } from '../helpers/frames.js';
import { expectedIndex, frameTimes } from '../helpers/oracle.js';

/** The arguments of every process the engine spawns (the real processes run). */
const spawned = vi.hoisted(() => [] as string[][]);
vi.mock('../../src/engine/process.js', async (importOriginal) => {
  const real = await importOriginal<typeof import('../../src/engine/process.js')>();
  return {
    ...real,
    run: (tool: 'ffmpeg' | 'ffprobe', args: string[], options?: Parameters<typeof real.run>[2]) => {
      spawned.push([tool, ...args]);
      return real.run(tool, args, options);
    },
  };
});

let work: string;
beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'vs-open-gop-'));
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('ffmpeg engine: open GOPs', () => {
  it('proves the first entry with a second decode, then enters every other GOP with one', async () => {
    // 25 fps, a keyframe every 4 s: keyframes 1..9 are recovery-point I-frames, not IDRs.
    const clip = await indexClip({ seconds: 40, gop: 100, bframes: 3, openGop: true });
    const d = videoDetails(await probeFile(clip), 0);
    const packets = await listAllPackets(clip, d);
    const keyframes = packets.keyframes;
    const hints = await pictureHints(clip, d, packets, keyframes);
    const entries = new Set(keyframes.filter((_, i) => hints[i]?.randomAccess === false));
    // The fixture is what it claims: every keyframe but the first is an entry, the reach shorter
    // than a GOP: x264's B-pyramid writes 4 reference frames in the SPS, 2 frames of delay, so
    // (reference-reach.json) 17 frames, 0.68 s.
    expect(keyframes).toHaveLength(10);
    expect([...entries]).toEqual(keyframes.slice(1));
    expect(d.referenceReach).toBeCloseTo(17 / 25, 9);
    // One group per GOP after the first: a target 2.5 s past its keyframe (past the reach), and
    // one 0.2 s past it (a leading picture's references may still reach it).
    // packets.pts ascends: the frame displayed at t.
    const frameOf = (t: number) => lastAtOrBefore(packets.pts, (p) => seconds(p, d) <= t + 1e-6);
    const groups = keyframes.slice(1).map((k) => {
      const t = seconds(k, d);
      return [frameOf(t + 0.2), frameOf(t + 2.5)];
    });
    expect(groups.flat().every((f) => f >= 0)).toBe(true);
    const openGops = new OpenGops();
    const size = { w: 64, h: 48 };
    const runs: number[] = [];
    const wrong: string[] = [];
    for (const [g, group] of groups.entries()) {
      const dir = join(work, `g${g}`);
      const frames = await extractGroup({
        path: clip,
        d,
        packets,
        group,
        size,
        dir,
        threads: 1,
        skipNonReference: false,
        keyframes,
        entries,
        seeking: { trusted: true },
        openGops,
        signal: new AbortController().signal,
      });
      runs.push(readdirSync(dir).filter((name) => name.startsWith('run-')).length);
      for (const f of group) {
        const file = frames.get(packets.pts[f] as bigint);
        const rgb = file ? await readFrame(file, size) : null;
        const image = rgb ? fromRgb24(rgb, size.w, size.h) : null;
        const read = image ? decodeIndex(image, fullRect(image)).index : null;
        // The pattern shows each frame's display index: the target's own in a sequential decode.
        if (read !== f) wrong.push(`group ${g}, frame ${f}: ${read}`);
      }
    }
    expect(wrong).toEqual([]);
    expect(openGops.proven).toBe(true);
    // The first entry: its own decode and one from the keyframe before; every later one: one.
    expect(runs).toEqual([2, 1, 1, 1, 1, 1, 1, 1, 1]);
  }, 240_000);
});

describe('ffmpeg engine: where a render of an open-GOP clip starts decoding', () => {
  /**
   * Renders a 3x3 sheet of `clip` (cells at `timesMs`) and returns, per extraction run, the time
   * it seeks to (0 without a seek), after checking every cell shows the frame a sequential decode
   * shows at its time.
   */
  async function render(clip: string, timesMs: number[], name: string): Promise<number[]> {
    const oracle = await frameTimes(clip);
    const grid = computeGrid(320, 240, '3x3', false);
    const tempDir = join(work, `${name}-tmp`);
    mkdirSync(tempDir);
    const sheets = [timesMs.map((timeMs) => ({ timeMs, label: String(timeMs) }))];
    const path = join(work, `${name}.jpg`);
    spawned.length = 0;
    const result = await ffmpegEngine.render({
      input: clip,
      videoStream: 0,
      fontPath: labelFontPath(),
      quality: JPEG_QUALITY,
      theme: THEME,
      sheets: layoutSheets({
        grid,
        sheets,
        window: { startMs: 0, endMs: Math.max(...timesMs) + 1 },
        paths: [path],
        hasAudio: false,
      }),
      tempDir,
    });
    expect(result.unreadable).toEqual([]);
    const image = readJpeg(path);
    const shown = timesMs.map((_, c) => decodeIndex(image, cellRect(grid, c)).index);
    expect(shown).toEqual(timesMs.map((t) => expectedIndex(oracle, t / 1000)));
    // Extraction runs write PPM frames; their seek, if any, is -ss.
    return spawned
      .filter((a) => a[0] === 'ffmpeg' && a.includes('ppm'))
      .map((a) => (a.includes('-ss') ? Number(a[a.indexOf('-ss') + 1]) : 0));
  }

  /** 10 minutes of 960x540 at 6 fps, a keyframe every 10 s: only the first an IDR. */
  const longOpenGopClip = () =>
    indexClip({ seconds: 600, fps: 6, gop: 60, bframes: 3, openGop: true, width: 960, height: 540 });

  /** Each target of `timesMs` was decoded by a run that seeks to its own 10-s keyframe. */
  const expectOwnKeyframes = (seeks: number[], timesMs: number[]) => {
    for (const t of timesMs) {
      const key = Math.floor(t / 10_000) * 10;
      expect(seeks.some((s) => Math.abs(s - key) < 0.01)).toBe(true);
    }
  };

  it('a long clip: each target far from the IDR is decoded from its own GOP, not from the start', async () => {
    // 10 minutes at 6 fps, a keyframe every 10 s: only the first is an IDR, the others recovery
    // points. (960x540 at 6 fps: a run costs as much as about 29 s of decoding, src/core/open-gop.ts,
    // and a picture may reference 2.8 s back: x264's 4 reference frames and 2 frames of delay make
    // 17 frames, reference-reach.json.)
    const clip = await longOpenGopClip();
    const timesMs = [33_300, 100_000, 166_700, 233_300, 300_000, 366_700, 433_300, 500_000, 566_700];
    const seeks = await render(clip, timesMs, 'long');
    // The render's first two targets are decoded on their own (MP4 lists them first), from their
    // own keyframes too: the proof is short enough for entering to pay even for them, made ahead
    // (src/core/open-gop.ts provesAhead: the 33.3 s target's decode carried on past keyframe 40,
    // met by a decode from it). Every target's own keyframe is a start, the IDR none.
    expectOwnKeyframes(seeks, timesMs);
    expect(seeks.filter((s) => s < 10)).toHaveLength(0);
    expect(seeks.filter((s) => Math.abs(s - 40) < 0.01)).toHaveLength(1);
    // One run per target, and the proof's second decode.
    expect(seeks).toHaveLength(timesMs.length + 1);
  }, 300_000);

  it("targets in consecutive GOPs: the entries share the cores, so entering pays; the proof is two groups' decodes", async () => {
    // The clip of the test above. Seven targets 9.5 s into GOPs 23..29, after two near the start.
    // From the IDR: one run to 299.5 s, its cost 299.5 + 29 s = 328.5 s. Entering: the proof path
    // 9.5 + 19.5 s of stream in two runs (87 s), then six runs of 9.5 + 29 s: 231 s laid end to
    // end, as the rule once counted them (1.25 x 318 s > 328.5 s: it declined), 115.5 s shared by
    // two cores (1.25 x 202.5 s < 328.5 s). (Assumes at least two cores, as any CI runner has.)
    const clip = await longOpenGopClip();
    const late = [23, 24, 25, 26, 27, 28, 29].map((n) => n * 10_000 + 9_500);
    const timesMs = [3_300, 6_600, ...late];
    const seeks = await render(clip, timesMs, 'consecutive');
    expectOwnKeyframes(seeks, late);
    // The first two targets from the IDR, each later one from its own keyframe. The proof is made
    // by two groups' own decodes (src/core/open-gop.ts proofPair: 3.58 s more than their targets
    // need, against 19.5 s from keyframe 22): the GOP-23 group's decode goes on to 243.08 s (the
    // reach, 2.83 s, and 0.25 s past 240 s), met by the GOP-24 group's own decode from keyframe
    // 24, not by a second one from keyframe 24 (provesAhead's) nor one from keyframe 22.
    expect(seeks.filter((s) => s < 10)).toHaveLength(1);
    expect(seeks.some((s) => Math.abs(s - 220) < 0.01)).toBe(false);
    expect(seeks.filter((s) => Math.abs(s - 240) < 0.01)).toHaveLength(1);
    expect(seeks).toHaveLength(late.length + 1);
  }, 300_000);

  it("a window over two GOPs: as many runs as a closed-GOP clip, the proof made by two groups' own decodes", async () => {
    // Nine targets 302..318 s: GOP 30 (keyframe 300 s) to 308 s, GOP 31 (310 s) from 310 s. The
    // GOP-30 group's decode goes on to 313.08 s (the reach, 2.83 s, and 0.25 s past 310 s), which
    // GOP 31's own decode passes anyway: together they prove the entry at 310 s
    // (src/core/open-gop.ts proofPair), with no decode of their own and no group waiting for one.
    const timesMs = [302_000, 304_000, 306_000, 308_000, 310_000, 312_000, 314_000, 316_000, 318_000];
    const openSeeks = await render(await longOpenGopClip(), timesMs, 'window-open');
    const closed = await indexClip({ seconds: 600, fps: 6, gop: 60, bframes: 3, width: 960, height: 540 });
    const closedSeeks = await render(closed, timesMs, 'window-closed');
    // Each run from its own keyframe: the GOP-31 entry decoded once (a proof made ahead would
    // decode from it twice, one made behind from 300 s or before).
    const at = (seeks: number[], key: number) => seeks.filter((s) => Math.abs(s - key) < 0.01).length;
    expect(openSeeks.every((s) => Math.abs(s - 300) < 0.01 || Math.abs(s - 310) < 0.01)).toBe(true);
    expect(at(openSeeks, 310)).toBe(1);
    // The closed-GOP clip's window: the same runs (the render's parts may each decode GOP 30).
    expect(at(openSeeks, 300)).toBe(at(closedSeeks, 300));
    expect(openSeeks).toHaveLength(closedSeeks.length);
  }, 300_000);

  it('near the start: decoding starts at the IDR, as entering would cost more', async () => {
    const clip = await indexClip({ seconds: 20, gop: 100, bframes: 3, openGop: true });
    const timesMs = [1_000, 3_000, 5_000, 7_000, 9_000, 11_000, 13_000, 15_000, 17_000];
    const seeks = await render(clip, timesMs, 'short');
    // The keyframe at 0 is the only start (aimed just past it): one run per part of the render.
    expect(seeks.every((s) => s < 0.01)).toBe(true);
  }, 300_000);
});
