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
 *   trouble (see troubleWatch) or that misses a target is judged by the recovery ladder
 *   (recovery.ts, the native engine's rule too): the group is extracted again from keyframes
 *   further back, finally from the start of the stream, until a run is clean or two runs that
 *   started further apart than any reference reaches show the same pictures (they no longer depend
 *   on where decoding started: what a sequential decode gives).
 * - Long selections go through a filter script file, never argv (hundreds of targets would pass
 *   the kernel's argument length limit).
 * - The frames a run writes are numbered in output order and matched to targets by the timestamps
 *   showinfo logs for them in that order, never named by their timestamp: where a clock restarts
 *   (a file of concatenated recordings), two frames share one timestamp and a name would collide.
 *   Of such twins a target takes the one on screen when the clock first reaches the target (what
 *   the native engine shows), told from the order the decoder logs all frames in (-debug_ts).
 */
import { createHash } from 'node:crypto';
import { copyFile, mkdir, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { debuglog } from 'node:util';
import { AHEAD_MARGIN, type EntryDecode, provesAhead, provesEntry } from '../../core/open-gop.js';
import { type Aside, run } from '../process.js';
import { parsePpm, ppmHeader } from '../raster.js';
import { mapFirstSlices } from './leading-bytes.js';
import { input, type VideoDetails } from './media.js';
import { lastAtOrBefore, type Packets, seconds } from './packets.js';
import { Ladder, type OpenGops, type PairSide, ProofPair } from './recovery.js';

const debug = debuglog('vidsheet');

/**
 * Debug counters of this process's extractions (tests count the recovery ladder's cost by them;
 * nothing else reads them): ffmpeg runs started, and restarts from further back.
 */
export const extractionStats = { runs: 0, restarts: 0 };

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
  /**
   * The keyframes (listed ones) that nal.ts shows to be sync samples in name only: an open GOP's
   * recovery point, or a false sync sample.
   */
  entries: ReadonlySet<bigint>;
  /** Shared by the groups of one render: whether the stream's open-GOP entries are proven clean. */
  openGops: OpenGops;
  /**
   * This group is a side of the render's proof pair (src/core/open-gop.ts proofPair): its first
   * decode goes on to `end` keeping its pictures' digests, and is handed to `meeting`.
   */
  pair?: { side: PairSide; from: bigint; end: bigint; meeting: ProofPair<Run> };
  /** Sets the group's core aside while it waits for the open-GOP verdict (process.ts limiter). */
  aside?: Aside;
  signal: AbortSignal;
  /**
   * Filled in by the extraction: a target whose own picture never decoded and that shows the frame
   * before it (a stand-in, see withStandIns) -> that frame's pts, so the report names the frame shown.
   */
  shownInstead?: Map<bigint, bigint>;
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
type Start = number | 'stream';

/** The name of the filter that logs every decoded picture's digest (see extractOnce). */
const PRINTS = 'prints';

/** How far past its last target a decode from the start goes for frames handed out late (s). */
const LATE_FRAMES_SECONDS = 10;

/**
 * Returns the group's frames by pts, as the paths of PPM files of exactly the cell size (see
 * readFrame); a target missing from the map could not be decoded.
 */
export async function extractGroup(req: GroupRequest): Promise<Map<bigint, string>> {
  const { packets, group, d } = req;
  const firstPts = packets.pts[group[0] as number] as bigint;
  const lastPts = packets.pts[group[group.length - 1] as number] as bigint;
  // The keyframe opening the group: the ladder's origin (-1: none is listed before it, and the
  // first run aims at the first target itself).
  const key = lastAtOrBefore(req.keyframes, (k) => k <= firstPts);
  const complete = (r: Run) => group.every((f) => r.frames.has(packets.pts[f] as bigint));
  const reach = d.referenceReach;
  const ladder = new Ladder(reach);
  // Without timestamps a seek cannot be aimed: decode from the start.
  let start: Start = d.timestamps && req.seeking.trusted ? key : 'stream';
  const keyPts = (s: Start) => (s === 'stream' || s < 0 ? undefined : (req.keyframes[s] as bigint));
  const opening = keyPts(start);
  const entering = opening !== undefined && req.entries.has(opening);
  // A group opening at an entry claims the proof of the stream's open GOPs when no other group
  // holds it and it can prove (entries are told apart only when one thread decodes, see
  // troubleWatch), and no pair of this render's groups proves it with their own decodes (`pair`).
  // The groups that find the claim held decode meanwhile, keeping their pictures' digests so they
  // can still prove, and wait for the verdict only to judge their decode.
  const aside = req.aside ?? (<U>(wait: Promise<U>) => wait);
  let claim = entering && !req.pair && req.threads === 1 ? await aside(req.openGops.claimAlone()) : null;
  debug('group at %ss: %s', seconds(firstPts, d).toFixed(3), claim ? 'claims the open-GOP proof' : 'starts');
  // While proving, both decodes go on to the reach past the entry (the proof compares every
  // picture over it), however close after the entry the targets are.
  const [tbNum, tbDen] = d.timeBase;
  const ticks = (s: number) => BigInt(Math.ceil((s * Number(tbDen)) / Number(tbNum)));
  const reachEnd = opening === undefined ? lastPts : opening + ticks(reach) + 1n;
  // The keyframe after the group, where the proof may be made ahead (src/core/open-gop.ts
  // provesAhead): this group's decode carried on past it, met by a short decode from it.
  const next = req.keyframes[key + 1];
  const ahead =
    claim !== null &&
    opening !== undefined &&
    next !== undefined &&
    req.entries.has(next) &&
    provesAhead({
      key: seconds(opening, d),
      last: seconds(lastPts, d),
      next: seconds(next, d),
      previous: key > 0 ? seconds(req.keyframes[key - 1] as bigint, d) : d.startTime,
      reach,
    });
  const aheadEnd = next === undefined ? lastPts : aheadOf(d, next);
  const later = (p: bigint) => (p > lastPts ? p : lastPts);
  // How far the decodes that may prove go, keeping their pictures' digests; null: none may.
  const proveTo = req.pair
    ? later(req.pair.end)
    : ahead
      ? aheadEnd
      : entering && req.threads === 1 && req.openGops.open
        ? later(reachEnd)
        : null;
  // The earlier side of a pair keeps only the digests its pair compares, from the first side's
  // keyframe on: that decode cannot prove its own entry.
  const printsFrom = req.pair?.side === 'earlier' ? req.pair.from : undefined;
  // The claiming group's first attempt, when it entered as an entry does.
  let entered: EntryDecode | undefined;
  // Whether this group's side of a proof pair has been handed over.
  let offered = false;
  try {
    for (let attempt = 0; ; attempt++) {
      const skip = attempt === 0 && req.skipNonReference;
      const from = keyPts(start);
      // Digests of every picture from the keyframe on, for the proof (src/core/open-gop.ts).
      const prove = claim !== null || attempt === 0 ? proveTo : null;
      const from0 = attempt === 0 ? printsFrom : undefined;
      let r = await extractOnce(req, start, skip, prove, 2 * attempt, from0);
      if (skip && !complete(r)) {
        // The decoder skipped a target the hints called a reference picture: run again, skipping
        // nothing (a wrong hint costs time, never a frame).
        debug('frame(s) skipped as non-reference; extracting the group again');
        r = await extractOnce(req, start, false, prove, 2 * attempt + 1, from0);
      }
      const whole = complete(r);
      const decode: EntryDecode = {
        start: start === 'stream' ? d.startTime : seconds(from ?? firstPts, d),
        key: from === undefined ? null : seconds(from, d),
        // Only what entering at the keyframe produces, every target shown from it on.
        entry: r.entry && whole && from !== undefined && firstPts >= from,
        // While proving, the end of the pictures compared (the targets' digest is `print`).
        frame: seconds(prove ?? lastPts, d),
        // (A decode from the start of the stream is final: its digest only serves a proof.)
        print: whole && (start !== 'stream' || entered) ? await digest(r.frames) : null,
        prints: [...r.prints].map(([p, print]) => [seconds(p, d), print] as const),
      };
      if (claim && entered) {
        // The attempt after the one that claimed the proof gives the verdict.
        const proven = provesEntry(entered, decode, reach);
        debug('open-GOP entries: %s', proven === null ? 'not told' : proven ? 'proven' : 'disproven');
        claim.settle(proven);
        claim = null;
      } else if (claim && attempt === 0) {
        if (decode.entry) {
          entered = decode;
          // Ahead: a verdict (proven: this entry is one like it) ends the claim; none told leaves
          // it to the proof behind, the next attempt.
          const proven = ahead ? await proveAhead(req, key + 1, r, aheadEnd) : null;
          if (proven !== null) {
            debug('open-GOP entries: %s ahead', proven ? 'proven' : 'disproven');
            claim.settle(proven);
            claim = null;
            if (proven) return r.frames;
          }
        } else {
          // Clean, or more trouble than an entry's: this group proves nothing.
          claim.settle(null);
          claim = null;
        }
      } else if (attempt === 0 && (entering || req.pair)) {
        // A side of a proof pair hands its decode over: the pair judges once both are in.
        req.pair?.meeting.offer(req.pair.side, whole && opening !== undefined ? r : null);
        offered = true;
        if (entering) {
          // The verdict decides this entry's decode; meanwhile its core serves other groups.
          await aside(req.openGops.settled());
          // An entry like the one proven clean in this stream (src/core/open-gop.ts).
          if (decode.entry && req.openGops.proven) return r.frames;
          // No verdict (the claim was given up): this entry proves it, from further back.
          if (decode.entry && proveTo !== null && printsFrom === undefined) {
            claim = await aside(req.openGops.claim(req.threads === 1));
            if (claim) entered = decode;
          }
        }
      }
      // A decode from the start of the stream is what a sequential decode shows: final.
      if (start === 'stream') {
        if (attempt > 0) req.seeking.trusted = false;
        return whole ? r.frames : await withStandIns(req, r, 2 * attempt + 2);
      }
      const verdict = ladder.next({
        start: decode.start,
        // This engine cannot tell which packet failed: the run's trouble is its own.
        trouble: r.trouble || !whole ? [attempt] : [],
        invented: r.invented,
        frame: 0,
        print: decode.print,
      });
      if (verdict === 'accept') return r.frames;
      extractionStats.restarts++;
      debug(
        'group at %ss: %s after a seek to %s; decoding again from further back',
        seconds(firstPts, d).toFixed(3),
        r.trouble || r.invented ? 'decode trouble' : 'frames missing',
        start < 0 ? 'the first target' : `keyframe ${start}`,
      );
      const back = verdict === 'rewind' ? -1 : key - verdict.back;
      start = back >= 0 ? back : 'stream';
    }
  } finally {
    // A claim not settled (the run failed, or went to the start of the stream) is given up, and
    // so is a pair whose side never decoded.
    claim?.settle(null);
    if (!offered) req.pair?.meeting.offer(req.pair.side, null);
  }
}

/**
 * The proof made ahead (src/core/open-gop.ts provesAhead): `own`, the claiming group's decode
 * carried on to `end` with its pictures' digests, against a decode from keyframe `next` (an entry,
 * an index into req.keyframes) to `end`.
 */
async function proveAhead(req: GroupRequest, next: number, own: Run, end: bigint): Promise<boolean | null> {
  const { d, packets } = req;
  const target = lastAtOrBefore(packets.pts, (p) => p <= end);
  const r = await extractOnce({ ...req, group: [target] }, next, false, end, 1000);
  const key = req.keyframes[next] as bigint;
  return meet(d, { run: r, key }, { run: own, key: req.keyframes[next - 1] as bigint }, end);
}

/** A decode that may prove: its run (with its pictures' digests) and the keyframe it started at. */
interface ProvingDecode {
  run: Run;
  key: bigint;
}

/**
 * Whether `earlier`, a decode started at least the reach before `first`'s entry, proves that entry
 * clean (src/core/open-gop.ts provesEntry), both decodes kept their pictures' digests through
 * `end`: each decode's chosen picture is the last one both show. null when they cannot tell.
 */
function meet(d: VideoDetails, first: ProvingDecode, earlier: ProvingDecode, end: bigint): boolean | null {
  const shared = [...first.run.prints.keys()].filter((p) => p <= end && earlier.run.prints.has(p));
  const chosen = shared.reduce<bigint | undefined>((a, p) => (a === undefined || p > a ? p : a), undefined);
  if (chosen === undefined) return null;
  const decode = ({ run, key }: ProvingDecode): EntryDecode => ({
    start: seconds(key, d),
    key: seconds(key, d),
    entry: run.entry,
    frame: seconds(chosen, d),
    print: run.prints.get(chosen) ?? null,
    prints: [...run.prints].map(([p, print]) => [seconds(p, d), print] as const),
  });
  return provesEntry(decode(first), decode(earlier), d.referenceReach);
}

/**
 * Two groups of a render that prove the stream's open-GOP entries with their own decodes (src/core/
 * open-gop.ts proofPair): `first` opening at entry keyframe `keys.first`, `earlier` at `keys.earlier`,
 * both decoding through the returned `end`. null when another group already holds the proof (or
 * its verdict is in).
 */
export function proofMeeting(
  openGops: OpenGops,
  d: VideoDetails,
  keys: { earlier: bigint; first: bigint },
): { meeting: ProofPair<Run>; from: bigint; end: bigint } | null {
  const claim = openGops.claimNow();
  if (!claim) return null;
  const end = aheadOf(d, keys.first);
  const meeting = new ProofPair<Run>(claim, (earlier, first) => {
    const proven = meet(d, { run: first, key: keys.first }, { run: earlier, key: keys.earlier }, end);
    debug(
      'open-GOP entries: %s by a pair of groups',
      proven === null ? 'not told' : proven ? 'proven' : 'disproven',
    );
    return proven;
  });
  return { meeting, from: keys.first, end };
}

/**
 * Where decodes proving entry keyframe `key` ahead end: the reach and AHEAD_MARGIN past it (a
 * picture both decodes show then lies at least the reach past it).
 */
function aheadOf(d: VideoDetails, key: bigint): bigint {
  const [tbNum, tbDen] = d.timeBase;
  return key + BigInt(Math.ceil(((d.referenceReach + AHEAD_MARGIN) * Number(tbDen)) / Number(tbNum)));
}

/**
 * A decode from the start of the stream that missed targets: a packet that gives no picture at all
 * (cut short at the end of a truncated file, or its bytes zeroed) leaves the frame before it on
 * screen in a sequential decode, as a player shows it. So each missing target takes the latest
 * frame the decoder gave before it (one more run from the start extracts those not already out).
 * A target before the first picture the stream gives (one that starts mid-GOP or with intra
 * refresh: the decoder shows nothing before its first random-access or recovery point) takes that
 * first picture, as the frame rule does before a clip's first frame. A target is left missing
 * (unreadable) only when the stream gave no picture at all.
 */
async function withStandIns(req: GroupRequest, r: Run, n: number): Promise<Map<bigint, string>> {
  const { packets } = req;
  const decoded = [...new Set(r.decoded)].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const standIn = new Map<bigint, bigint>();
  for (const f of req.group) {
    const pts = packets.pts[f] as bigint;
    if (r.frames.has(pts)) continue;
    const shown = decoded[lastAtOrBefore(decoded, (p) => p < pts)] ?? decoded[0];
    if (shown !== undefined) standIn.set(pts, shown);
  }
  const needed = [...new Set(standIn.values())].filter((p) => !r.frames.has(p));
  const group = needed.flatMap((p) => {
    const i = lastAtOrBefore(packets.pts, (q) => q <= p);
    return packets.pts[i] === p ? [i] : [];
  });
  const more = group.length
    ? (await extractOnce({ ...req, group }, 'stream', false, null, n)).frames
    : new Map();
  const frames = new Map(r.frames);
  const used = new Set<string>();
  for (const [pts, shown] of standIn) {
    const file = r.frames.get(shown) ?? more.get(shown);
    if (!file) continue;
    // Each target owns its file (the render removes a file once its target's cells are drawn).
    const own = used.has(file) || r.frames.has(shown) ? `${file}.${pts}` : file;
    if (own !== file) await copyFile(file, own);
    used.add(file);
    frames.set(pts, own);
    req.shownInstead?.set(pts, shown);
  }
  return frames;
}

/** A digest of a run's pictures, by target: the same only for the very same frames. */
async function digest(frames: Map<bigint, string>): Promise<string> {
  const hash = createHash('sha256');
  for (const [pts, file] of [...frames].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    hash.update(`${pts}\n`).update(await readFile(file));
  }
  return hash.digest('hex');
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

/** A frame file's pixels (packed RGB of the cell size), or null when it is not a whole PPM. */
export async function readFrame(file: string, size: { w: number; h: number }): Promise<Buffer | null> {
  const image = parsePpm(await readFile(file).catch(() => Buffer.alloc(0)));
  return image && image.width === size.w && image.height === size.h ? image.rgb : null;
}

/**
 * One ffmpeg run: decodes from `start` and writes the group's targets as PPM files numbered in
 * output order; returns them by target pts.
 */
async function extractOnce(
  req: GroupRequest,
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
  const filters = [
    // The last target (the group ascends), in the stream time base the filter graph starts in:
    // seconds would round to its ticks. First, since bwdif halves the time base.
    `trim=end_pts=${end + 1n + lateBy}`,
    // Every picture's digest (its checksum) for an open-GOP entry's proof, as decoded, on a
    // branch of its own: only those the proof compares (from `printsFrom`, to `prove`) are
    // summed, a fifth of a 1080p picture's decode each.
    ...(prove !== null
      ? [
          `split[cells][${PRINTS}];\n[${PRINTS}]trim=${printsFrom === undefined ? '' : `start_pts=${printsFrom}:`}end_pts=${prove + 1n},showinfo@${PRINTS},nullsink;\n[cells]null`,
        ]
      : []),
    // Interlaced frames (flagged per frame by the decoder) are deinterlaced, progressive ones pass.
    ...(d.mayBeInterlaced ? ['bwdif=mode=send_frame:parity=auto:deint=interlaced'] : []),
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
  await writeFile(script, filters.join(',\n'));
  const entry = start === 'stream' || start < 0 ? undefined : req.keyframes[start];
  const idrEntry = seek !== null && entry !== undefined && (await isIdr(req, entry)) ? entry : null;
  const watch = troubleWatch(d, seek === null ? null : new Set(packets.keyframes), idrEntry);
  const stamps = runLog(d);
  const log = lines((text) => {
    watch.line(text);
    stamps.line(text);
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
      '-copyts',
      ...(seek === null ? [] : ['-noaccurate_seek', '-ss', seek.toFixed(6)]),
      ...input(req.path, d.fixed),
      '-map',
      `0:${d.index}`,
      '-filter_script:v',
      script,
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
  debug(
    'run %s: from %s to %ss, %d frames decoded',
    dir,
    seek === null ? 'the stream start' : `${seek.toFixed(3)}s`,
    seconds(end, d).toFixed(3),
    stamps.decoded.length,
  );
  const frames = new Map<bigint, string>();
  const whole = ppmHeader(size).length + size.w * size.h * 3;
  const matched = await matchOutputs(req, dir, pts, eps, stamps, exit.code);
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

/**
 * Per target (`pts`, ascending), the file of the run's output that shows it, if any. File k (from
 * 1) is the k-th frame showinfo logged: a run cut short may have logged a frame it did not write,
 * never the reverse, so only trailing outputs can lack a file; a run that ended normally wrote one
 * per stamp, or the numbering cannot be trusted and nothing is matched. A target takes the output
 * nearest it within `eps` (ffmpeg may stamp a frame a tick off the listed pts: a stream without
 * timestamps is timed on a microsecond clock) and, of outputs equally near (twins of a restarted
 * clock), the one {@link onScreen} names, else the first.
 */
async function matchOutputs(
  req: GroupRequest,
  dir: string,
  pts: bigint[],
  eps: number,
  log: { outputs: Stamp[]; decoded: Array<bigint | null> },
  exitCode: number | null,
): Promise<Array<string | undefined>> {
  const { outputs } = log;
  const numbers = (await readdir(dir)).flatMap((name) => {
    const m = /^cell-(\d+)\.ppm$/.exec(name);
    return m ? [Number(m[1])] : [];
  });
  const aligned =
    numbers.every((k) => k <= outputs.length) && (exitCode !== 0 || numbers.length === outputs.length);
  // Per target, the outputs nearest it (several only where a clock restarted), in output order.
  const found: Array<{ off: number; outputs: number[] } | undefined> = pts.map(() => undefined);
  if (!aligned) {
    debug('%d frame files for %d frames logged: none is matched', numbers.length, outputs.length);
    return found.map(() => undefined);
  }
  const [tbNum, tbDen] = req.d.timeBase;
  const times = pts.map((p) => seconds(p, req.d));
  for (const [o, stamp] of outputs.entries()) {
    if (!stamp) continue;
    // The targets are at least 3 eps apart: only the two around the output's time can match.
    const t = Number(stamp.pts * stamp.tb[0]) / Number(stamp.tb[1]);
    const after = lastAtOrBefore(times, (x) => x <= t) + 1;
    for (const k of [after - 1, after]) {
      const p = pts[k];
      if (p === undefined) continue;
      // Exact until the division: timestamps of a capture hours into its clock are large.
      const diff = stamp.pts * stamp.tb[0] * tbDen - p * tbNum * stamp.tb[1];
      const off = Number(diff < 0n ? -diff : diff) / Number(stamp.tb[1] * tbDen);
      const best = found[k];
      if (off < eps && (!best || off < best.off)) found[k] = { off, outputs: [o] };
      else if (best && off === best.off) best.outputs.push(o);
    }
  }
  const twin = onScreen(log.decoded, pts);
  return found.map((f, k) => {
    if (!f) return undefined;
    const o = (f.outputs.length > 1 ? f.outputs[twin[k] ?? 0] : undefined) ?? f.outputs[0];
    return join(dir, `cell-${(o as number) + 1}.ppm`);
  });
}

/**
 * Per target (`pts`, ascending), which of the frames sharing its timestamp (0: the first decoded)
 * is on screen when the clock first reaches it, from every frame's timestamp in decode output
 * order: the frames are played in that order, a frame whose timestamp goes back before the one
 * on screen is not shown then, and the frame on screen when one past the target comes is the
 * answer; the next target goes on from there. So of two recordings whose clocks overlap, a time
 * both reach shows the first one's frame, a time only the second reaches (the first stopped
 * short of it) the second's. undefined where that frame is not the target's (nothing decoded).
 */
function onScreen(decoded: Array<bigint | null>, pts: bigint[]): Array<number | undefined> {
  const seen = new Map<bigint, number>();
  const rank = decoded.map((ts) => {
    if (ts === null) return 0;
    const r = seen.get(ts) ?? 0;
    seen.set(ts, r + 1);
    return r;
  });
  let pos = 0;
  let cur: number | undefined;
  return pts.map((p) => {
    for (; pos < decoded.length; pos++) {
      const ts = decoded[pos];
      if (ts === null || ts === undefined) continue;
      const shown = cur === undefined ? undefined : decoded[cur];
      if (shown !== undefined && shown !== null && ts < shown) continue;
      if (ts > p) break;
      cur = pos;
    }
    return cur !== undefined && decoded[cur] === p ? rank[cur] : undefined;
  });
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
async function isIdr(req: GroupRequest, pts: bigint): Promise<boolean> {
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

/** Who logged a line (decoder-log.json's sources). */
export type LogSource = 'decoder' | 'demuxer' | 'muxer' | 'filter' | 'other';

/**
 * What one log message says about the decode: an error when the decoder logs at error level or
 * worse (or the tool says a decode call failed), invented reference pictures when it logs "Frame
 * num gap" at debug level, nothing otherwise. The rule and its vectors:
 * fixtures/vectors/decoder-log.json (the native engine's is crates/vidsheet-core/src/decode_log.rs
 * `classify`).
 */
export function logLine(source: LogSource, level: string, message: string): 'error' | 'gap' | null {
  if (source !== 'decoder') return null;
  if (level === 'error' || level === 'fatal' || level === 'panic') return 'error';
  return level === 'debug' && message.startsWith('Frame num gap') ? 'gap' : null;
}

/**
 * A line of a run's log (`-loglevel level+debug`: `[name @ 0x...] [level] message`, the tool's own
 * lines without the context) as logLine reads it. A codec's context (the decoder, or its parser:
 * the log does not tell them apart) is any context but the demuxer (named by ffprobe), the image
 * muxer and the filter graph; of the tool's lines only its report of a failed decode call is the
 * decoder's.
 */
export function readLogLine(
  text: string,
  demuxer: string,
): { source: LogSource; level: string; message: string } | null {
  const m = /^(?:\[(.+?) @ 0x[0-9a-f]+\] )?\[(\w+)\] (.*)$/.exec(text);
  if (!m) return null;
  const [, name, level = '', message = ''] = m;
  const source: LogSource =
    name === undefined
      ? /^Error while decoding\b/.test(message)
        ? 'decoder'
        : 'other'
      : name === demuxer
        ? 'demuxer'
        : name === 'image2'
          ? 'muxer'
          : /^(Parsed_|graph |auto_scale|swscaler$|showinfo@)/.test(name)
            ? 'filter'
            : 'decoder';
  return { source, level, message };
}

/** H.264's error when told to forget a short-term picture it does not have (see troubleWatch). */
const MMCO_UNREF = 'mmco: unref short failure';

/**
 * Reads a run's log as it streams (logLine): the decoder's errors and invented reference pictures.
 * After a seek an error counts from the first keyframe read: an indexed demuxer lands on one, a
 * bisecting one may land before it, where packets fail without consequence (`keyframes`, the listed
 * ones, name it then). When no keyframe is recognised, all errors count. Invented pictures stay
 * referenced past any keyframe but an IDR, so they count wherever they appear, except with an IDR
 * entry (`idrEntry`, its pts; decoded with `-debug pict`) whose packet the run reads: the first IDR
 * slice the run's decoder logs is then the entry or one before it, and an IDR drops every
 * reference picture, invented ones too; the gaps logged before it only say that decoding started
 * mid-stream before the entry (a bisecting seek lands in the GOP before it). The packets' lines
 * alone do not tell this: with frame threads the decoder logs a packet's gaps after later packets
 * were read. A seek that lands past the entry never reads it: then every gap counts.
 *
 * Also whether all of it is what entering at a keyframe that is not an IDR produces (`entry`, see
 * src/core/open-gop.ts): references invented while that keyframe decodes, before the next packet
 * is read, and failures to forget pictures that were never there (MMCO_UNREF), nothing else. The
 * log names no packet: one decoding thread logs a packet's lines after it is read and before the
 * next one is; frame threads log later, so there an entry is never recognised (and is verified).
 */
export function troubleWatch(d: VideoDetails, keyframes: Set<bigint> | null, idrEntry: bigint | null) {
  const packetLine = new RegExp(
    `^\\[info\\] demuxer -> ist_index:${d.index} type:video .*\\bpkt_pts:(-?\\d+|NOPTS) `,
  );
  let entered = keyframes === null;
  let before = false;
  let after = false;
  let invented = false;
  // Packets read since the keyframe decoding entered at (0: that keyframe is decoding).
  let sinceKey = keyframes === null ? 1 : -1;
  // Trouble an entry does not produce: other errors, references invented later.
  let other = false;
  // Decoder lines before the run's first packet are the stream probe's own decode.
  let reading = false;
  let pastIdr = idrEntry === null;
  let entryRead = false;
  // Gaps logged before the first IDR slice: they count only if the entry is never read.
  let beforeIdr = false;
  const line = (text: string) => {
    const packet = packetLine.exec(text);
    if (packet) {
      reading = true;
      if (packet[1] !== 'NOPTS' && BigInt(packet[1] as string) === idrEntry) entryRead = true;
      if (!entered) {
        const pts = packet[1] === 'NOPTS' ? undefined : BigInt(packet[1] as string);
        entered = d.indexed || (pts !== undefined && (keyframes as Set<bigint>).has(pts));
      }
      if (entered) sinceKey++;
      return;
    }
    const read = readLogLine(text, d.demuxer);
    if (!pastIdr && reading && read?.source === 'decoder' && IDR_SLICE.test(read.message)) pastIdr = true;
    const said = read && logLine(read.source, read.level, read.message);
    if (said === 'gap') {
      if (pastIdr) {
        invented = true;
        if (sinceKey !== 0) other = true;
      } else beforeIdr = true;
    } else if (said === 'error') {
      if (entered) after = true;
      else before = true;
      if (entered && !read?.message.startsWith(MMCO_UNREF)) other = true;
    }
  };
  return {
    line,
    found: () => {
      const trouble = after || (!entered && before);
      // Gaps before an IDR entry the run never read: invented, and never an open-GOP entry's.
      const lost = beforeIdr && !entryRead;
      return { trouble, invented: invented || lost, entry: entered && invented && !other && !lost };
    },
  };
}

/** The H.264 decoder's `-debug pict` line for an IDR slice (h264_slice.c: "slice:%d %c mb:%d %c%s%s"). */
const IDR_SLICE = /^slice:\d+ \w mb:\d+ \w(?: fix)? IDR /;

/** An output frame's timestamp: pts in the time base `tb` (num, den); null when it has none. */
type Stamp = { pts: bigint; tb: [bigint, bigint] } | null;

/**
 * Reads the timestamps a run logs: `outputs`, each written frame's in output order (showinfo, the
 * last filter), in the time base of the link showinfo saw it on (bwdif halves the stream's; logged
 * when the graph is configured, again if it is reconfigured), null for a frame without one; and
 * `decoded`, every decoded frame's in the stream time base, in decode output order (-debug_ts),
 * null without one. `decoded` is left empty if the decoder logs another time base. And `prints`,
 * each decoded picture's digest by pts (stream time base) when the run logs them (extractOnce).
 */
function runLog(d: VideoDetails) {
  const config = /^\[Parsed_showinfo_\d+ @ [^\]]*\] \[\w+\] config in time_base: (\d+)\/(\d+)/;
  const frame = /^\[Parsed_showinfo_\d+ @ [^\]]*\] \[\w+\] n:\s*\d+ pts:\s*(-?\d+|NOPTS) /;
  const print = new RegExp(
    `^\\[showinfo@${PRINTS} @ [^\\]]*\\] \\[\\w+\\] n:\\s*\\d+ pts:\\s*(-?\\d+) .*\\bchecksum:([0-9A-Fa-f]+)`,
  );
  const decoder = new RegExp(
    `^\\[\\w+\\] decoder -> ist_index:${d.index} type:video .*\\bbest_effort_ts:(-?\\d+) .*\\btime_base:(\\d+)/(\\d+)`,
  );
  const [tbNum, tbDen] = d.timeBase;
  const noPts = -(2n ** 63n); // AV_NOPTS_VALUE, printed as a number
  let tb: [bigint, bigint] | null = null;
  const outputs: Stamp[] = [];
  const decoded: Array<bigint | null> = [];
  const prints = new Map<bigint, string>();
  let sameClock = true;
  return {
    outputs,
    decoded,
    prints,
    line: (text: string) => {
      const p = print.exec(text);
      if (p) prints.set(BigInt(p[1] as string), p[2] as string);
      const c = config.exec(text);
      if (c) tb = BigInt(c[2] as string) > 0n ? [BigInt(c[1] as string), BigInt(c[2] as string)] : null;
      const f = frame.exec(text);
      if (f) outputs.push(tb && f[1] !== 'NOPTS' ? { pts: BigInt(f[1] as string), tb } : null);
      const g = sameClock ? decoder.exec(text) : null;
      if (g) {
        sameClock = BigInt(g[2] as string) === tbNum && BigInt(g[3] as string) === tbDen;
        if (!sameClock) decoded.length = 0;
        else decoded.push(BigInt(g[1] as string) === noPts ? null : BigInt(g[1] as string));
      }
    },
  };
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
