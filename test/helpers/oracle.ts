/**
 * The tests' oracle, independent of both engines: fixtures/oracle.mjs (shared with
 * bench/corpus-table.mjs, typed by its JSDoc), plus what only the synthetic clips can be asked:
 * the pattern every frame of a sequential decode shows (see frames.ts).
 *
 * - {@link frameTimes}, {@link expectedIndex}: the frame rule (DESIGN §2), from ffprobe's frame list:
 *   the frame shown at t is the last one whose presentation time is <= t (the first when t is
 *   before it), counted from the container's start_time.
 * - {@link decodedIndices}: the pattern each frame of a sequential decode shows, paired with
 *   frameTimes' entries.
 * - {@link packetExtent}, {@link oracleDuration}: where a file's data really ends (the latest
 *   pts + duration of a complete packet), and the clip extent DESIGN §2 gives.
 * - {@link oracleFrames}, {@link judgeCell}, {@link judgeRun}: what a sequential decode shows at the
 *   cells' times, a sheet's cells judged against it, a whole CLI run judged (test/corpus).
 * - {@link programTable}: which streams each program of a transport stream lists.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { decodedPts } from '../../fixtures/oracle.mjs';
import { decodeIndex, fromRgb24, fullRect, type IndexRead } from './frames.js';

export type {
  CellJudgement,
  ClipExtent,
  FrameTimes,
  Image,
  OracleCache,
  OracleFrame,
  OracleResult,
  PacketExtent,
  Probed,
  Rect,
  RunFacts,
  Size,
  Thumb,
} from '../../fixtures/oracle.mjs';
export {
  cellThumb,
  decodedPts,
  expectedIndex,
  frameTimes,
  judgeCell,
  judgeRun,
  MATCH,
  meanAbsDiff,
  oracleCache,
  oracleDuration,
  oracleFrames,
  packetExtent,
  probeFile,
  readJpegFile,
  runVidsheet,
  secondsToUs,
  thumbLuma,
  thumbSize,
  windowOf,
} from '../../fixtures/oracle.mjs';

const execFileP = promisify(execFile);

/**
 * Decodes one video stream sequentially from the start (no seek, so no seek artefact) and reads
 * the pattern of every frame. Entry i belongs to `frameTimes(path, stream)` entry i: each frame of
 * the decode is paired with its pts by decode order, then sorted by pts the way frameTimes sorts,
 * so a stream whose clock restarts (output order is not pts order) still pairs each time with its
 * own picture. Frames are scaled to 160x120 (the pattern is in fractions of the frame).
 */
export async function decodedIndices(path: string, stream: number): Promise<IndexRead[]> {
  const [w, h] = [160, 120];
  const [{ stdout }, times] = await Promise.all([
    execFileP(
      'ffmpeg',
      [
        ...['-hide_banner', '-nostdin', '-loglevel', 'error', '-i', path],
        ...['-map', `0:${stream}`, '-fps_mode', 'passthrough', '-vf', `scale=${w}:${h}:flags=area`],
        ...['-f', 'rawvideo', '-pix_fmt', 'rgb24', '-'],
      ],
      { encoding: 'buffer', maxBuffer: 1024 * 1024 * 1024 },
    ),
    decodedPts(path, stream),
  ]);
  const size = w * h * 3;
  const decoded = Math.floor(stdout.length / size);
  if (decoded !== times.pts.length) {
    throw new Error(
      `decodedIndices: ffmpeg decoded ${decoded} frames of ${path}, ffprobe ${times.pts.length}`,
    );
  }
  const paired = times.pts.flatMap((pts, i) => {
    if (pts === null) return []; // frameTimes leaves these out too
    const img = fromRgb24(stdout.subarray(i * size, (i + 1) * size), w, h);
    return [{ pts, read: decodeIndex(img, fullRect(img)) }];
  });
  paired.sort((a, b) => (a.pts < b.pts ? -1 : a.pts > b.pts ? 1 : 0)); // stable, like frameTimes
  return paired.map((p) => p.read);
}

/** ffprobe's program table: program number -> the stream indices it lists. */
export async function programTable(path: string): Promise<Map<number, number[]>> {
  const { stdout } = await execFileP('ffprobe', [
    ...['-v', 'error', '-show_programs', '-show_entries', 'program=program_num:stream=index'],
    ...['-of', 'json', path],
  ]);
  const parsed = JSON.parse(stdout) as {
    programs: Array<{ program_num: number; streams: Array<{ index: number }> }>;
  };
  return new Map(parsed.programs.map((p) => [p.program_num, p.streams.map((s) => s.index)]));
}
