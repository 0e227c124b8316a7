/**
 * One group of target frames (frames that share a GOP), exactly: the frame a sequential decode
 * from the start of the stream would show, or nothing. Decoding starts only at true random-access
 * points (nal.ts leaves sync samples in name only out of `keyframes`), yet a seek can still lie
 * (a sync sample referenced across, a bisecting demuxer landing after the keyframe, damage): a run
 * whose log shows trouble or that misses a target is judged by the recovery ladder (recovery.ts,
 * fixtures/vectors/recovery-ladder.json), and the group decoded again from further back.
 */
import { createHash } from 'node:crypto';
import { copyFile, readFile } from 'node:fs/promises';
import { debuglog } from 'node:util';
import type { EntryDecode } from '../../core/open-gop.js';
import { extractionStats, extractOnce, type Run, type Start } from './decode.js';
import { EntryProof, type ProofRequest } from './entry-proof.js';
import { lastAtOrBefore, seconds } from './packets.js';
import { Ladder } from './recovery.js';

const debug = debuglog('vidsheet');

/** A group to extract: its decode, its part in the open-GOP proof, and what the render shares. */
export interface GroupRequest extends ProofRequest {
  /** Every target is a reference picture: the decoder may skip the non-reference ones before it. */
  skipNonReference: boolean;
  /**
   * Shared by the groups of one render: once a group could only be decoded right from the start
   * of the stream, seeking in it is not trusted again and later groups decode from the start.
   */
  seeking: { trusted: boolean };
  /**
   * Filled in by the extraction: a target whose own picture never decoded and that shows the frame
   * before it (a stand-in, see withStandIns) -> that frame's pts, so the report names the frame shown.
   */
  shownInstead?: Map<bigint, bigint>;
}

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
  const ladder = new Ladder(d.referenceReach);
  // Without timestamps a seek cannot be aimed: decode from the start.
  let start: Start = d.timestamps && req.seeking.trusted ? key : 'stream';
  const keyPts = (s: Start) => (s === 'stream' || s < 0 ? undefined : (req.keyframes[s] as bigint));
  const proof = await EntryProof.open(req, key, keyPts(start), firstPts, lastPts);
  try {
    for (let attempt = 0; ; attempt++) {
      const skip = attempt === 0 && req.skipNonReference;
      const from = keyPts(start);
      // Digests of the pictures from the keyframe on, when this decode may prove an entry.
      const prints = proof.prints(attempt);
      let r = await extractOnce(req, start, skip, prints.to, 2 * attempt, prints.from);
      if (skip && !complete(r)) {
        // The decoder skipped a target the hints called a reference picture: run again, skipping
        // nothing (a wrong hint costs time, never a frame).
        debug('frame(s) skipped as non-reference; extracting the group again');
        r = await extractOnce(req, start, false, prints.to, 2 * attempt + 1, prints.from);
      }
      const whole = complete(r);
      const decode: EntryDecode = {
        start: start === 'stream' ? d.startTime : seconds(from ?? firstPts, d),
        key: from === undefined ? null : seconds(from, d),
        // Only what entering at the keyframe produces, every target shown from it on.
        entry: r.entry && whole && from !== undefined && firstPts >= from,
        // While proving, the end of the pictures compared (the targets' digest is `print`).
        frame: seconds(prints.to ?? lastPts, d),
        // (A decode from the start of the stream is final: its digest only serves a proof.)
        print: whole && (start !== 'stream' || proof.entered) ? await digest(r.frames) : null,
        prints: [...r.prints].map(([p, print]) => [seconds(p, d), print] as const),
      };
      if (await proof.judge(attempt, r, decode, whole)) return r.frames;
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
    proof.close();
  }
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
