/**
 * Which file a run wrote shows which target. The frames a run writes are numbered in output order
 * and matched to targets by the timestamps showinfo logs for them in that order, never named by
 * their timestamp: where a clock restarts (a file of concatenated recordings), two frames share
 * one timestamp and a name would collide. Of such twins a target takes the one on screen when the
 * clock first reaches the target (what the native engine shows), told from the order the decoder
 * logs all frames in (-debug_ts).
 */
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { debuglog } from 'node:util';
import type { VideoDetails } from './media.js';
import { lastAtOrBefore, seconds } from './packets.js';

const debug = debuglog('vidsheet');

/** The name of the filter that logs every decoded picture's digest (see extractOnce). */
export const PRINTS = 'prints';

/** An output frame's timestamp: pts in the time base `tb` (num, den); null when it has none. */
type Stamp = { pts: bigint; tb: [bigint, bigint] } | null;

/**
 * Reads the timestamps a run logs: `outputs`, each written frame's in output order (showinfo, the
 * last filter), in the time base of the link showinfo saw it on (bwdif halves the stream's; logged
 * when the graph is configured, again if it is reconfigured), null for a frame without one; and
 * `decoded`, every decoded frame's in the stream time base, in decode output order (-debug_ts),
 * null without one. `decoded` is left empty if the decoder logs another time base. `configured`,
 * where the graph was configured (showinfo logs its time base each time, once the decoder has
 * logged the frame it is configured for). And `prints`,
 * each decoded picture's digest by pts (stream time base) when the run logs them (extractOnce).
 */
export function runLog(d: VideoDetails) {
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
  const log = {
    outputs,
    decoded,
    prints,
    /**
     * Where the graph was configured, as the index in `decoded` of the frame that set it up: the
     * first, then again at each frame whose size or format changed.
     */
    configured: [] as number[],
    line: (text: string) => {
      const p = print.exec(text);
      if (p) prints.set(BigInt(p[1] as string), p[2] as string);
      const c = config.exec(text);
      if (c) {
        log.configured.push(Math.max(0, decoded.length - 1));
        tb = BigInt(c[2] as string) > 0n ? [BigInt(c[1] as string), BigInt(c[2] as string)] : null;
      }
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
  return log;
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
export async function matchOutputs(
  d: VideoDetails,
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
  const [tbNum, tbDen] = d.timeBase;
  const times = pts.map((p) => seconds(p, d));
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
