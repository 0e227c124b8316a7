/**
 * Where a file's data ends (DESIGN §2, issue 42), end to end through the built CLI on every
 * engine, on synthesised MP4s shaped like FATE files: a cut file whose audio is stored behind its
 * video (h264/wwwq_cut.mp4), one cut right after a whole sample, and 15 fps pictures one of which
 * lasts 5.8 s (hevc/two_first_slice.mp4), whole and cut right after it. Each fixture's lie is
 * checked first in ffprobe's listings, so a test cannot pass because a fixture stopped being
 * hostile; each run is judged by the corpus oracle (fixtures/oracle.mjs: every cell against a
 * sequential decode, the extent against ffprobe's per-stream packet lists) and its duration held
 * to the millisecond the rule gives.
 */
import { execFile } from 'node:child_process';
import { stat } from 'node:fs/promises';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { ENGINES } from '../helpers/cli.js';
import {
  FRAME_CUT_MP4,
  frameCutMp4,
  LAGGING_AUDIO_MP4,
  LONG_FRAME_MP4,
  laggingAudioCutMp4,
  longFrameMp4,
} from '../helpers/fixtures.js';
import { judgeRun, oracleCache } from '../helpers/oracle.js';

const execFileP = promisify(execFile);
const TEST_TIMEOUT_MS = 240_000;
/** Making a fixture (ffmpeg encodes it once; then it is cached) and reading it back. */
const FIXTURE = { timeout: 120_000 };

const longFrame = () => longFrameMp4({ after: 0, cut: false });
/** Frames after the long one in the cut fixture's index. */
const AFTER = 30;
const longFrameCut = () => longFrameMp4({ after: AFTER, cut: true });

interface Row {
  stream: number;
  /** Time-base units. */
  pts: number;
  duration: number;
  pos: number;
  size: number;
}

/** ffprobe's packet listing of `path` (`extra`: which streams, flags), in read order. */
async function listing(path: string, extra: string[] = []): Promise<Row[]> {
  const { stdout } = await execFileP('ffprobe', [
    ...['-v', 'quiet', ...extra, '-show_entries', 'packet=stream_index,pts,duration,pos,size'],
    ...['-of', 'json', path],
  ]);
  const { packets } = JSON.parse(stdout) as { packets: Array<Record<string, string | number>> };
  return packets.map((p) => ({
    stream: Number(p.stream_index),
    pts: Number(p.pts),
    duration: Number(p.duration),
    pos: Number(p.pos),
    size: Number(p.size),
  }));
}

/** The streams' time bases and frame rates, and the declared duration (s). */
async function facts(path: string) {
  const { stdout } = await execFileP('ffprobe', [
    ...['-v', 'error', '-show_entries', 'format=duration:stream=time_base,avg_frame_rate,nb_frames'],
    ...['-of', 'json', path],
  ]);
  const parsed = JSON.parse(stdout) as {
    format: { duration: string };
    streams: Array<{ time_base: string; avg_frame_rate: string; nb_frames?: string }>;
  };
  const pair = (r: string) => r.split('/').map(Number) as [number, number];
  return {
    declared: Number(parsed.format.duration),
    streams: parsed.streams.map((s) => ({
      timeBase: pair(s.time_base),
      rate: pair(s.avg_frame_rate),
      frames: Number(s.nb_frames),
    })),
  };
}

/** Seconds of `rows`' latest pts + duration, in the time base `tb`. */
const endOf = (rows: Row[], [num, den]: [number, number]) =>
  Math.max(...rows.map((r) => ((r.pts + r.duration) * num) / den));

/**
 * DESIGN §2 for the long-frame fixtures: the 5.8 s picture is the last whole one and counts as
 * one frame at the stream's average frame rate (in whole time-base units, rounded to nearest as
 * fixtures/vectors/frame-step.json says), ms.
 */
async function oneFrameAfterTheLongOne(path: string): Promise<number> {
  const { streams } = await facts(path);
  const { timeBase, rate } = streams[0] as { timeBase: [number, number]; rate: [number, number] };
  const rows = await listing(path, ['-select_streams', '0']);
  const last = rows.at(-1) as Row;
  const frame = Math.round((timeBase[1] * rate[1]) / (timeBase[0] * rate[0]));
  return Math.round(((last.pts + frame) * timeBase[0] * 1000) / timeBase[1]) / 1000;
}

describe('fixtures reproduce the FATE files', () => {
  it(
    `audio stored behind the video, cut: a read of both streams stops near 2.5 s, the video's alone reaches ${LAGGING_AUDIO_MP4.videoFirst} s`,
    FIXTURE,
    async () => {
      const path = await laggingAudioCutMp4();
      const { declared, streams } = await facts(path);
      const [vtb, atb] = streams.map((s) => s.timeBase) as [[number, number], [number, number]];
      expect(declared).toBe(LAGGING_AUDIO_MP4.seconds);
      const both = await listing(path);
      const video = await listing(path, ['-select_streams', '0']);
      const audio = await listing(path, ['-select_streams', '1']);
      expect(
        endOf(
          both.filter((r) => r.stream === 0),
          vtb,
        ),
      ).toBeLessThan(3);
      expect(video.length).toBe(LAGGING_AUDIO_MP4.videoFirst * LAGGING_AUDIO_MP4.fps);
      expect(endOf(video, vtb)).toBeCloseTo(LAGGING_AUDIO_MP4.videoFirst, 6);
      expect(endOf(audio, atb)).toBeLessThan(LAGGING_AUDIO_MP4.audioKept + 0.1);
      // The audio the video waits for lies past the end of the file, after video data that is there.
      const fileSize = (await stat(path)).size;
      expect(Math.max(...video.map((r) => r.pos + r.size))).toBeLessThan(fileSize);
    },
  );

  it(
    `cut right after frame ${FRAME_CUT_MP4.frames - 1}: the file ends exactly where that whole sample ends, ${FRAME_CUT_MP4.seconds} s declared`,
    FIXTURE,
    async () => {
      const path = await frameCutMp4();
      const { declared, streams } = await facts(path);
      expect(declared).toBe(FRAME_CUT_MP4.seconds);
      expect(streams[0]?.frames).toBe(FRAME_CUT_MP4.seconds * FRAME_CUT_MP4.fps);
      // Listed whole, with its own duration, even when corrupt packets are left out.
      const rows = await listing(path, ['-fflags', '+discardcorrupt']);
      expect(rows.length).toBe(FRAME_CUT_MP4.frames);
      const last = rows.at(-1) as Row;
      expect(last.pos + last.size).toBe((await stat(path)).size);
      expect(endOf([last], streams[0]?.timeBase as [number, number])).toBeCloseTo(9, 6);
    },
  );

  it.each([
    ['whole', longFrame, 0],
    ['cut right after it', longFrameCut, AFTER],
  ])(
    `one picture of 1/15 s lasts ${LONG_FRAME_MP4.long} s, ${LONG_FRAME_MP4.before} before it (%s): declared with it, last in the file`,
    async (_, make, after) => {
      const path = await make();
      const { declared, streams } = await facts(path);
      const tb = streams[0]?.timeBase as [number, number];
      expect(streams[0]?.frames).toBe(LONG_FRAME_MP4.before + 1 + after);
      expect(declared).toBeCloseTo(
        (LONG_FRAME_MP4.before + after) / LONG_FRAME_MP4.fps + LONG_FRAME_MP4.long,
        3,
      );
      const rows = await listing(path, ['-fflags', '+discardcorrupt']);
      expect(rows.length).toBe(LONG_FRAME_MP4.before + 1);
      const last = rows.at(-1) as Row;
      expect((last.duration * tb[0]) / tb[1]).toBeCloseTo(LONG_FRAME_MP4.long, 6);
      expect(rows.slice(0, -1).every((r) => r.duration === rows[0]?.duration)).toBe(true);
      expect(((rows[0]?.duration ?? 0) * tb[0]) / tb[1]).toBeCloseTo(1 / LONG_FRAME_MP4.fps, 6);
      expect(last.pos + last.size).toBe((await stat(path)).size);
    },
    FIXTURE.timeout,
  );
});

const cache = oracleCache();

describe.concurrent('every engine reports the readable end DESIGN §2 gives and shows what a decode shows', () => {
  const subjects: Array<[string, () => Promise<string>, (path: string) => Promise<number>]> = [
    [
      `cut MP4, audio stored behind the video (data to ${LAGGING_AUDIO_MP4.videoFirst} s of ${LAGGING_AUDIO_MP4.seconds})`,
      laggingAudioCutMp4,
      async () => LAGGING_AUDIO_MP4.videoFirst,
    ],
    [
      `MP4 cut right after frame ${FRAME_CUT_MP4.frames - 1} (declares ${FRAME_CUT_MP4.seconds} s, 8.96 s + 40 ms of data)`,
      frameCutMp4,
      async () => 9,
    ],
    [`MP4 whose last picture lasts ${LONG_FRAME_MP4.long} s`, longFrame, oneFrameAfterTheLongOne],
    [`MP4 cut right after a picture of ${LONG_FRAME_MP4.long} s`, longFrameCut, oneFrameAfterTheLongOne],
  ];
  for (const [name, make, rule] of subjects) {
    for (const engine of ENGINES) {
      it(`${name} [${engine}]`, { timeout: TEST_TIMEOUT_MS }, async () => {
        const file = await make();
        const { problems, facts: run } = await judgeRun({ file, engine, cache });
        expect(run.exit).toBe(0);
        expect(run.duration, 'duration').toBeCloseTo(await rule(file), 3);
        expect(problems, `${name} [${engine}]`).toEqual([]);
      });
    }
  }
});
