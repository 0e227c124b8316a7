/**
 * Extracting one group of target frames (frames that share a GOP) with ffmpeg, exactly: the frame
 * a sequential decode from the start of the stream would show, or nothing.
 *
 * - One run seeks to the keyframe that opens the group and asks for exactly the target frames,
 *   selected by their exact timestamps (`ffmpeg -ss T` alone returns the first frame at or after
 *   T, not the frame displayed at T). Nothing is trimmed by the seek (-noaccurate_seek): the
 *   select filter alone picks the frames, and trim ends the decode right after the last one.
 * - Decoding starts only at true random-access points (keyframes nal.ts shows to be sync
 *   samples in name only are never used). A seek can still go wrong where that cannot be read:
 *   a sync sample that later pictures reference across (H.264 then invents grey reference
 *   pictures), a bisecting demuxer landing after the keyframe, damage. So a run whose log shows
 *   trouble (see troubleWatch) or that misses a target is not trusted: the group is extracted
 *   again from keyframes further back, each further than any reference reaches, finally from the
 *   start of the stream, until a run is clean or two runs that started that far apart agree pixel
 *   for pixel (the frames no longer depend on where decoding started: what a sequential decode
 *   gives).
 * - Long selections go through a filter script file, never argv (hundreds of targets would pass
 *   the kernel's argument length limit).
 */
import { mkdir, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { debuglog } from 'node:util';
import { input, type VideoDetails } from '../ffprobe.js';
import { run } from '../process.js';
import { parsePpm, ppmHeader } from '../raster.js';
import { lastAtOrBefore, type Packets, seconds } from './packets.js';

const debug = debuglog('vidsheet');

export interface GroupRequest {
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
  /** Every target is a reference picture: the decoder may skip the non-reference ones before it. */
  skipNonReference: boolean;
  /**
   * Where decoding may start: the listed keyframes that are true random-access points (those
   * nal.ts shows to be sync samples in name only are left out), ascending pts.
   */
  keyframes: bigint[];
  /**
   * Shared by the groups of one render: once a group could only be decoded right from the start
   * of the stream, seeking in it is not trusted again and later groups decode from the start.
   */
  seeking: { trusted: boolean };
  signal: AbortSignal;
}

/**
 * One run's outcome: the frames that came out, as PPM files of the cell size by pts (read only
 * when a sheet is composed, so a group of thousands of targets is not held in memory), and
 * whether anything went wrong once decoding had reached its start point: a decoder's error, or
 * H.264 inventing reference pictures for a frame_num gap (started on a picture that is not an IDR;
 * it says so only at debug level).
 */
interface Run {
  frames: Map<bigint, string>;
  trouble: boolean;
}

/** Where a run starts decoding: a keyframe (index into req.keyframes) or the stream start. */
type Start = number | 'stream';

/**
 * Earlier starts are tried back to the stream start only while that means decoding at most this
 * much video; past it, the earliest keyframe tried is the last resort (a long file is not decoded
 * from its start once per group).
 */
const FROM_START_LIMIT_S = 600;

/**
 * Returns the group's frames by pts, as the paths of PPM files of exactly the cell size (see
 * readFrame); a target missing from the map could not be decoded.
 */
export async function extractGroup(req: GroupRequest): Promise<Map<bigint, string>> {
  const { packets, group, d } = req;
  const firstPts = packets.pts[group[0] as number] as bigint;
  const key = lastAtOrBefore(req.keyframes, (k) => k <= firstPts);
  // Without timestamps a seek cannot be aimed: decode from the start.
  const fromStart = !d.timestamps || !req.seeking.trusted;
  const starts = fromStart
    ? (['stream'] as Start[])
    : startsFrom(req, key, seconds(firstPts, d) - d.startTime);
  const complete = (r: Run) => group.every((f) => r.frames.has(packets.pts[f] as bigint));
  let attempt = 0;
  const earlier: Array<{ at: number; run: Run }> = [];
  for (const [i, start] of starts.entries()) {
    let r = await extractOnce(req, start, i === 0 && req.skipNonReference, attempt++);
    if (i === 0 && req.skipNonReference && !complete(r)) {
      // The decoder skipped a target the hints called a reference picture: run again, skipping
      // nothing (a wrong hint costs time, never a frame).
      debug('frame(s) skipped as non-reference; extracting the group again');
      r = await extractOnce(req, start, false, attempt++);
    }
    if (start === 'stream') {
      if (i > 0) req.seeking.trusted = false;
      return r.frames;
    }
    // A run from a random-access point that decoded every target without trouble is what a
    // sequential decode gives.
    if (start >= 0 && !r.trouble && complete(r)) return r.frames;
    // So are the frames of two runs that agree although the later one started further on than
    // any reference reaches: the pictures it lacked did not matter (a legitimate open GOP, or
    // damage both decodes went through).
    const at = seconds(start >= 0 ? (req.keyframes[start] as bigint) : firstPts, d);
    for (const later of earlier) {
      if (later.at - at > d.referenceReach && (await agree(later.run, r))) return r.frames;
    }
    debug(
      'group at %ss: %s after a seek to %s; decoding again from further back',
      seconds(firstPts, d).toFixed(3),
      r.trouble ? 'decode trouble' : complete(r) ? 'no keyframe before the targets' : 'frames missing',
      start < 0 ? 'the first target' : `keyframe ${start}`,
    );
    earlier.push({ at, run: r });
  }
  return earlier[earlier.length - 1]?.run.frames ?? new Map();
}

/**
 * The starts to try, latest first: the keyframe opening the group (or, with none listed before
 * it, the first target itself), then up to four keyframes each further back than any reference
 * reaches from the one before (so two runs that agree prove something), then the stream start.
 */
function startsFrom(req: GroupRequest, key: number, firstTargetS: number): Start[] {
  const { d, keyframes } = req;
  const starts: Start[] = [key];
  let at = key >= 0 ? seconds(keyframes[key] as bigint, d) : Number.NEGATIVE_INFINITY;
  for (let n = 0; n < 4; n++) {
    const before = lastAtOrBefore(keyframes, (k) => seconds(k, d) < at - d.referenceReach);
    if (before < 0) break;
    starts.push(before);
    at = seconds(keyframes[before] as bigint, d);
  }
  if (firstTargetS <= FROM_START_LIMIT_S) starts.push('stream');
  return starts;
}

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

/** Same frames, pixel for pixel: the result no longer depends on where decoding started. */
async function agree(a: Run, b: Run): Promise<boolean> {
  if (a.frames.size !== b.frames.size) return false;
  for (const [pts, file] of a.frames) {
    const other = b.frames.get(pts);
    if (!other || !(await readFile(file)).equals(await readFile(other))) return false;
  }
  return true;
}

/** A frame file's pixels (packed RGB of the cell size), or null when it is not a whole PPM. */
export async function readFrame(file: string, size: { w: number; h: number }): Promise<Buffer | null> {
  const image = parsePpm(await readFile(file).catch(() => Buffer.alloc(0)));
  return image && image.width === size.w && image.height === size.h ? image.rgb : null;
}

/** One ffmpeg run: decodes from `start` and writes the group's targets as PPM files named by pts. */
async function extractOnce(
  req: GroupRequest,
  start: Start,
  skipNonReference: boolean,
  n: number,
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
  const span = Math.max(0, (times[times.length - 1] as number) - d.startTime - (seek ?? 0));
  const select = anyOf(times.map((t) => `lt(abs(t-${t.toPrecision(17)})\\,${eps.toPrecision(6)})`));
  const filters = [
    // The last target (the group ascends), in the stream time base the filter graph starts in:
    // seconds would round to its ticks. First, since bwdif halves the time base.
    `trim=end_pts=${(pts[pts.length - 1] as bigint) + 1n}`,
    // Interlaced frames (flagged per frame by the decoder) are deinterlaced, progressive ones pass.
    ...(d.mayBeInterlaced ? ['bwdif=mode=send_frame:parity=auto:deint=interlaced'] : []),
    `select='${select}'`,
    `scale=${size.w}:${size.h}:flags=bicubic`,
    'setsar=1',
    'format=rgb24',
  ];
  const dir = join(req.dir, `run-${n}`);
  await mkdir(dir, { recursive: true });
  const script = join(dir, 'filters');
  await writeFile(script, filters.join(',\n'));
  const watch = troubleWatch(d, seek === null ? null : new Set(packets.keyframes));
  await run(
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
      '-copyts',
      ...(seek === null ? [] : ['-noaccurate_seek', '-ss', seek.toFixed(6)]),
      ...input(req.path),
      '-map',
      `0:${d.index}`,
      '-filter_script:v',
      script,
      '-fps_mode',
      'passthrough',
      // Files are named by the frame's own pts (input time base), so a frame that never comes out
      // cannot shift the others. No frame count: trim ends the run, and a clock that restarts
      // (a file of concatenated recordings) may show a target's time twice; the later, like a
      // sequential decode, wins.
      '-enc_time_base',
      '-1',
      '-frame_pts',
      '1',
      '-f',
      'image2',
      '-c:v',
      'ppm',
      '-y',
      join(dir, 'cell-%d.ppm'),
    ],
    // Bounded (a hostile file must not hang the job), but long enough for the video decoded: up
    // to a second per second of it, whatever its resolution.
    {
      timeoutMs: 60_000 + group.length * 5_000 + span * 1000,
      signal: req.signal,
      onStderr: watch.feed,
    },
  );
  // Files are named by each frame's pts as ffmpeg stamped it, which may be a tick off the listed
  // one (a stream without timestamps is timed on a microsecond clock): each target takes the
  // nearest file within the match tolerance. The image muxer formats the pts as a C int, so a
  // large timestamp (a capture starting hours into its clock) wraps around to 32 bits.
  const [tbNum, tbDen] = d.timeBase;
  const tolerance = BigInt(Math.floor((eps * Number(tbDen)) / Number(tbNum)));
  const written = new Map<bigint, string>();
  for (const name of await readdir(dir)) {
    const m = /^cell-(-?\d+)\.ppm$/.exec(name);
    if (m) written.set(BigInt(m[1] as string), join(dir, name));
  }
  const frames = new Map<bigint, string>();
  const whole = ppmHeader(size).length + size.w * size.h * 3;
  for (const [k, p] of pts.entries()) {
    const named = BigInt.asIntN(32, p);
    let best: { off: bigint; file: string } | undefined;
    for (const [n, file] of written) {
      const off = n > named ? n - named : named - n;
      if (off <= tolerance && (!best || off < best.off)) best = { off, file };
    }
    const bytes = best ? (await stat(best.file).catch(() => null))?.size : undefined;
    if (best && bytes === whole) frames.set(p, best.file);
    else
      debug('frame at %ss not extracted (%s)', times[k], bytes === undefined ? 'no file' : `${bytes} bytes`);
  }
  return { frames, trouble: watch.trouble() };
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

/**
 * Reads a run's log as it streams: trouble is an error-level line from anything but the demuxer
 * and the image muxer (a decoder's missing reference, concealment, a broken slice, "error while
 * decoding"), or H.264's "Frame num gap" (it invents grey reference pictures any later picture may
 * predict from, so it always counts). After a seek an error counts from the first keyframe read:
 * an indexed demuxer lands on one, a bisecting one may land before it, where packets fail without
 * consequence (`keyframes`, the listed ones, name it then). When no keyframe is recognised, all
 * trouble counts.
 */
function troubleWatch(d: VideoDetails, keyframes: Set<bigint> | null) {
  const ignored = [`[${d.demuxer} @ `, '[image2 @ '];
  const packetLine = new RegExp(
    `^\\[info\\] demuxer -> ist_index:${d.index} type:video .*\\bpkt_pts:(-?\\d+|NOPTS) `,
  );
  let entered = keyframes === null;
  let before = false;
  let after = false;
  let carry = '';
  const line = (text: string) => {
    if (!entered) {
      const packet = packetLine.exec(text);
      if (packet) {
        const pts = packet[1] === 'NOPTS' ? undefined : BigInt(packet[1] as string);
        entered = d.indexed || (pts !== undefined && (keyframes as Set<bigint>).has(pts));
        return;
      }
    }
    // Invented pictures stay referenced past any keyframe but an IDR (which would not invent
    // them): they count wherever they appear.
    if (text.includes('] [debug] Frame num gap')) after = true;
    else if (/\[(error|fatal|panic)\] /.test(text) && !ignored.some((p) => text.startsWith(p))) {
      if (entered) after = true;
      else before = true;
    }
  };
  return {
    feed: (chunk: string) => {
      const lines = (carry + chunk).split('\n');
      carry = lines.pop() ?? '';
      for (const text of lines) line(text);
    },
    trouble: () => {
      if (carry) line(carry);
      carry = '';
      return after || (!entered && before);
    },
  };
}
