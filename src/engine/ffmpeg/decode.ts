/**
 * One ffmpeg run over a group of targets: from a start point (a keyframe, or the stream start)
 * it writes exactly the target frames, selected by their exact timestamps (`ffmpeg -ss T` alone
 * returns the first frame at or after T, not the frame displayed at T). Nothing is trimmed by the
 * seek (-noaccurate_seek): the select filter alone picks the frames, and trim ends the decode right
 * after the last one. Long selections go through a filter script file, never argv (hundreds of
 * targets would pass the kernel's argument length limit).
 */
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { debuglog } from 'node:util';
import { run } from '../process.js';
import { parsePpm, ppmHeader } from '../raster.js';
import { EngineError } from '../types.js';
import { refusedDecoders, troubleWatch } from './decode-log.js';
import { mapFirstSlices } from './leading-bytes.js';
import { input, type VideoDetails } from './media.js';
import { matchOutputs, PRINTS, runLog } from './outputs.js';
import type { Packets } from './packets.js';
import { seconds } from './packets.js';
import { branchStamps, type Thumbnails, thumbLine } from './thumbs.js';

const debug = debuglog('vidsheet');

/**
 * Debug counters of this process's extractions (tests count the recovery ladder's cost by them;
 * nothing else reads them): ffmpeg runs started, and restarts from further back.
 */
export const extractionStats = { runs: 0, restarts: 0 };

/** What a run decodes: the group of targets, from where, into which directory. */
export interface Decoding {
  path: string;
  d: VideoDetails;
  packets: Packets;
  /** The targets: indices into packets.pts, ascending. */
  group: number[];
  /** Cell size every frame is scaled to. */
  size: { w: number; h: number };
  /** A directory of this group's own (runs write their frames into subdirectories of it). */
  dir: string;
  threads: number;
  /**
   * Where decoding may start: the listed keyframes that are true random-access points (those
   * nal.ts shows to be sync samples in name only are left out), ascending pts.
   */
  keyframes: bigint[];
  signal: AbortSignal;
  /** Where the render collects a thumbnail of every picture decoded (the zoom hints' `picture`). */
  thumbnails?: Thumbnails;
}

/**
 * One run's outcome: the frames that came out, as PPM files of the cell size by target pts (read only
 * when a sheet is composed, so a group of thousands of targets is not held in memory), and
 * whether anything went wrong once decoding had reached its start point: a decoder's error, or
 * H.264 inventing reference pictures for a frame_num gap (started on a picture that is not an IDR;
 * it says so only at debug level).
 */
export interface Run {
  frames: Map<bigint, string>;
  /** Every frame the decoder gave, by timestamp (stream time base; empty when it logs another). */
  decoded: bigint[];
  /** A decoder error (or a failed decode call) after the start point. */
  trouble: boolean;
  /** H.264 invented reference pictures. */
  invented: boolean;
  /**
   * All that went wrong is what entering at a keyframe that is not an IDR produces (see
   * src/core/open-gop.ts): references invented while decoding that keyframe, pictures never there
   * failing to be forgotten.
   */
  entry: boolean;
  /** Digests of the pictures decoded from the keyframe on, by pts, when asked for (else empty). */
  prints: Map<bigint, string>;
}

/** Where a run starts decoding: a keyframe (index into req.keyframes) or the stream start. */
export type Start = number | 'stream';

/** The filter graph's labels when it also makes thumbnails (thumbs.ts). */
const [CELLS, CELLS_OUT, THUMB_IN, THUMB_OUT] = ['decoded', 'cells_out', 'thumb_in', 'thumb_out'];

/** How far past its last target a decode from the start goes for frames handed out late (s). */
const LATE_FRAMES_SECONDS = 10;

/**
 * The sum of `terms` as one expression. FFmpeg's expression parser refuses a sum of more than
 * about 90 terms at one level, so longer sums are nested in parentheses, 32 terms a level.
 */
export function anyOf(terms: string[]): string {
  if (terms.length <= 32) return terms.join('+');
  const chunks: string[] = [];
  for (let i = 0; i < terms.length; i += 32) chunks.push(`(${terms.slice(i, i + 32).join('+')})`);
  return anyOf(chunks);
}

/** A frame file's pixels (packed RGB of the cell size), or null when it is not a whole PPM. */
export async function readFrame(file: string, size: { w: number; h: number }): Promise<Buffer | null> {
  const image = parsePpm(await readFile(file).catch(() => Buffer.alloc(0)));
  return image && image.width === size.w && image.height === size.h ? image.rgb : null;
}

/**
 * One ffmpeg run: decodes from `start` and writes the group's targets as PPM files numbered in
 * output order; returns them by target pts.
 */
export async function extractOnce(
  req: Decoding,
  start: Start,
  skipNonReference: boolean,
  /** Proving an entry: decode through this pts at least, logging every picture's digest. */
  prove: bigint | null,
  n: number,
  /** The first pts whose picture's digest is logged (undefined: from the first decoded). */
  printsFrom?: bigint,
): Promise<Run> {
  const { d, packets, group, size } = req;
  const pts = group.map((f) => packets.pts[f] as bigint);
  const times = pts.map((p) => seconds(p, d));
  // Half the smallest gap to a neighbouring frame bounds both the seek lead-in and the match tolerance.
  const gaps = group.flatMap((f, k) =>
    [packets.pts[f - 1], packets.pts[f + 1]]
      .filter((q) => q !== undefined)
      .map((q) => Math.abs(seconds(q as bigint, d) - (times[k] as number))),
  );
  const eps = Math.min(0.0005, ...gaps.map((g) => g / 3));
  const seek = start === 'stream' ? null : seekTo(d, req.keyframes, start, pts[0] as bigint, eps);
  const last = pts[pts.length - 1] as bigint;
  const end = prove !== null && prove > last ? prove : last;
  const span = Math.max(0, seconds(end, d) - d.startTime - (seek ?? 0));
  const select = anyOf(times.map((t) => `lt(abs(t-${t.toPrecision(17)})\\,${eps.toPrecision(6)})`));
  // A decode from the start is final, and the frames it gives decide the stand-ins (withStandIns):
  // it goes on past the last target, since around damage the decoder hands frames out of order
  // (a picture held back comes out after later ones, timed before them) and trim ends the run at
  // the first frame past its end, which would lose them (and time them anew as it flushes).
  const [tbNum, tbDen] = d.timeBase;
  const lateBy = start === 'stream' ? (BigInt(LATE_FRAMES_SECONDS) * tbDen) / tbNum : 0n;
  // The last target (the group ascends), in the stream time base the filter graph starts in:
  // seconds would round to its ticks.
  const endPts = end + 1n + lateBy;
  const room = req.thumbnails?.room() ?? 0;
  const thumbnails = room > 0 ? req.thumbnails : undefined;
  const filters = [
    // First, since bwdif halves the time base.
    `trim=end_pts=${endPts}`,
    // Every decoded picture's thumbnail, on a branch of its own to an output of its own.
    ...(thumbnails
      ? [`split[${CELLS}][${THUMB_IN}];\n${thumbnails.branch(THUMB_IN, THUMB_OUT, room)};\n[${CELLS}]null`]
      : []),
    // Every picture's digest (its checksum) for an open-GOP entry's proof, as decoded, on a
    // branch of its own: only those the proof compares (from `printsFrom`, to `prove`) are
    // summed, a fifth of a 1080p picture's decode each.
    ...(prove !== null
      ? [
          `split[cells][${PRINTS}];\n[${PRINTS}]trim=${printsFrom === undefined ? '' : `start_pts=${printsFrom}:`}end_pts=${prove + 1n},showinfo@${PRINTS},nullsink;\n[cells]null`,
        ]
      : []),
    // Interlaced frames (flagged per frame by the decoder) are deinterlaced, progressive ones pass.
    // Each keeps its top field, whichever comes first in time, as the native engine does (its
    // first field in memory, line-doubled: convert.rs).
    ...(d.mayBeInterlaced ? ['bwdif=mode=send_frame:parity=tff:deint=interlaced'] : []),
    `select='${select}'`,
    `scale=${size.w}:${size.h}:flags=bicubic`,
    'setsar=1',
    'format=rgb24',
    // Logs each frame's timestamp as it leaves for the encoder, in the order the files are
    // numbered (nothing after it drops or reorders a frame).
    'showinfo',
  ];
  const dir = join(req.dir, `run-${n}`);
  await mkdir(dir, { recursive: true });
  const script = join(dir, 'filters');
  // With thumbnails the graph has two outputs, so it is a complex one: its input and cells labelled.
  const graph = filters.join(',\n');
  await writeFile(script, thumbnails ? `[0:${d.index}]${graph}[${CELLS_OUT}]` : graph);
  const entry = start === 'stream' || start < 0 ? undefined : req.keyframes[start];
  const idrEntry = seek !== null && entry !== undefined && (await isIdr(req, entry)) ? entry : null;
  const watch = troubleWatch(d, seek === null ? null : new Set(packets.keyframes), idrEntry);
  const stamps = runLog(d);
  // Out of memory (the worker's limit, DESIGN §5a) fails the job, not just these cells.
  let outOfMemory = false;
  let overMaxPixels = false;
  const refusal = refusedDecoders();
  const log = lines((text) => {
    // -debug_ts on the outputs' frames says nothing of the decode: passed over at a glance.
    if (thumbnails && thumbLine(text)) return;
    // The other video streams' decoders, refused in a bounded run, are not this decode's.
    if (!refusal.keep(text)) return;
    watch.line(text);
    stamps.line(text);
    if (outOfMemoryLine(text)) outOfMemory = true;
    if (text.includes(MAX_PIXELS_REFUSED)) overMaxPixels = true;
  });
  extractionStats.runs++;
  const exit = await run(
    'ffmpeg',
    [
      // Debug level, each line tagged with its level: H.264 reports invented reference pictures
      // only there. -debug_ts names each packet as it is read, so trouble before the start point
      // (a bisecting seek lands before it) is told from trouble after.
      '-loglevel',
      'level+debug',
      '-debug_ts',
      '-nostats',
      '-nostdin',
      '-threads',
      String(req.threads),
      ...(skipNonReference ? ['-skip_frame', 'noref'] : []),
      // Each slice header logged (at debug level), so troubleWatch sees where the IDR entry is decoded.
      ...(idrEntry !== null ? ['-debug', 'pict'] : []),
      // The thumbnails' scalers run on every decoded picture, and the graph's slice threads cost
      // more than they save on pictures that small: one thread took the branch's CPU from 1.85 s
      // to 0.78 s per 9,000 pictures at 360p, the same bytes. Not where bwdif deinterlaces every
      // picture on them.
      ...(thumbnails && !d.mayBeInterlaced ? ['-filter_complex_threads', '1'] : []),
      '-copyts',
      ...(seek === null ? [] : ['-noaccurate_seek', '-ss', seek.toFixed(6)]),
      ...input(req.path, d.fixed, d.bounds),
      ...(thumbnails
        ? ['-filter_complex_script', script, '-map', `[${CELLS_OUT}]`]
        : ['-map', `0:${d.index}`, '-filter_script:v', script]),
      // Every selected frame is written, none duplicated. No frame count: trim ends the run (a
      // clock that restarts may show a target's time twice, and each frame must be logged).
      '-fps_mode',
      'passthrough',
      '-f',
      'image2',
      '-c:v',
      'ppm',
      '-y',
      join(dir, 'cell-%d.ppm'),
      ...(thumbnails ? thumbnails.output(THUMB_OUT, dir) : []),
    ],
    // Bounded (a hostile file must not hang the job), but long enough for the video decoded: up
    // to a second per second of it, whatever its resolution.
    {
      timeoutMs: 60_000 + group.length * 5_000 + (span + (lateBy ? LATE_FRAMES_SECONDS : 0)) * 1000,
      signal: req.signal,
      onStderr: log.feed,
    },
  );
  log.end();
  await thumbnails?.take(d, dir, branchStamps(stamps.decoded, endPts, room), {
    finished: exit.code === 0,
    configured: stamps.configured,
  });
  // A picture over max_pixels is refused before its buffer is asked for, and says so: its cells
  // are unreadable, as any frame that does not decode.
  if (outOfMemory && !overMaxPixels)
    throw new EngineError('render_failed', 'ffmpeg ran out of memory decoding the video');
  debug(
    'run %s: from %s to %ss, %d frames decoded',
    dir,
    seek === null ? 'the stream start' : `${seek.toFixed(3)}s`,
    seconds(end, d).toFixed(3),
    stamps.decoded.length,
  );
  const frames = new Map<bigint, string>();
  const whole = ppmHeader(size).length + size.w * size.h * 3;
  const matched = await matchOutputs(d, dir, pts, eps, stamps, exit.code);
  for (const [k, file] of matched.entries()) {
    const bytes = file ? (await stat(file).catch(() => null))?.size : undefined;
    if (file && bytes === whole) frames.set(pts[k] as bigint, file);
    else
      debug('frame at %ss not extracted (%s)', times[k], bytes === undefined ? 'no file' : `${bytes} bytes`);
  }
  return {
    frames,
    decoded: stamps.decoded.filter((p): p is bigint => p !== null),
    prints: stamps.prints,
    ...watch.found(),
  };
}

/** What FFmpeg says when a picture is over max_pixels (its buffer refused, memory to spare). */
export const MAX_PIXELS_REFUSED = 'exceeds specified max pixel count';

/**
 * Whether an ffmpeg log line says an allocation failed (the worker's memory limit): FFmpeg's text
 * for ENOMEM, a frame buffer that could not be had, or a filter graph (the scaler's buffers) that
 * could not be set up for the decoded picture, which FFmpeg 5.1 reports without the errno.
 */
export function outOfMemoryLine(text: string): boolean {
  return /Cannot allocate memory|get_buffer\(\) failed|Error reinitializing filters/.test(text);
}

/**
 * The -ss value (seconds after the container start) that makes decoding begin at `start`.
 * Indexed containers seek backward to a keyframe, so aim just past it (aiming before it would
 * decode the previous GOP); bisecting demuxers (MPEG-TS, PS) may land on any packet, so aim 0.1 s
 * before it. With no keyframe listed before the target, aim at the target itself.
 */
function seekTo(
  d: VideoDetails,
  keyframes: bigint[],
  start: number,
  firstTarget: bigint,
  eps: number,
): number {
  const key = start >= 0 ? keyframes[start] : undefined;
  const from = seconds(key ?? firstTarget, d) - d.startTime;
  return Math.max(0, d.indexed && key !== undefined ? from + eps : from - 0.1);
}

/** Whether the packet at `pts` is an H.264 IDR picture, read in place; false when that cannot be told. */
async function isIdr(req: Decoding, pts: bigint): Promise<boolean> {
  const h = req.d.h264;
  const at = req.packets.bytes.get(pts);
  if (!h || !at) return false;
  const [idr] = await mapFirstSlices(
    req.path,
    h.layout,
    h.lengthSize,
    [at],
    (nal) => nal !== null && ((nal[0] as number) & 0x1f) === 5,
  );
  return idr ?? false;
}

/** Hands `line` each whole line of a log fed in chunks; `end` hands it an unterminated last one. */
function lines(line: (text: string) => void) {
  let carry = '';
  return {
    feed: (chunk: string) => {
      const parts = (carry + chunk).split('\n');
      carry = parts.pop() ?? '';
      for (const text of parts) line(text);
    },
    end: () => {
      if (carry) line(carry);
      carry = '';
    },
  };
}
