/**
 * The oracle for real-world files (test/corpus), independent of both engines. The logic lives in
 * fixtures/oracle.mjs so bench/corpus-table.mjs runs the very same judge; this module is the tests'
 * typed entry point.
 *
 * - {@link oracleDuration}: the clip extent of DESIGN §2 from ffprobe's whole-file packet list: the
 *   readable end is the latest pts + duration of any complete packet of the chosen video stream or
 *   an audio stream, from the container's start_time; `expected` applies the max(1 s, 2 %) rule.
 * - {@link oracleFrames}: decodes the video stream sequentially from the first packet (ffmpeg,
 *   `-copyts`, no `-ss`, `-fps_mode passthrough` so no frame is dropped or duplicated), timestamps
 *   every frame with `showinfo`, scales it to a small rgb24 image, and keeps, for each requested
 *   time t, the frame displayed at t (the last frame whose presentation time is <= t; the first frame
 *   when t is before it) and up to two neighbours either side. Memory stays bounded: only frames
 *   near a requested time are kept.
 * - {@link judgeCell}: a sheet cell (box-averaged to the same small size, its label box masked) must
 *   match the expected frame best of all candidates, or within {@link MATCH}'s tie of the best (a
 *   static scene), and be within its absolute limit at all.
 * - {@link judgeRun}: runs the built CLI on a file with one engine and lists every problem, one
 *   precise sentence each.
 */
export type {
  CellJudgement,
  ClipExtent,
  Image,
  OracleCache,
  OracleFrame,
  OracleResult,
  Probed,
  Rect,
  RunFacts,
  Size,
  Thumb,
} from '../../fixtures/oracle.mjs';
export {
  cellThumb,
  chooseVideoStream,
  judgeCell,
  judgeRun,
  MATCH,
  meanAbsDiff,
  oracleCache,
  oracleDuration,
  oracleFrames,
  probeFile,
  readJpegFile,
  runVidsheet,
  thumbLuma,
  thumbSize,
} from '../../fixtures/oracle.mjs';
