/**
 * The packet lists the frame rule of core/render-plan.ts is applied to: exact presentation
 * timestamps, keyframes, and where each packet's bytes are (so NAL headers can be read in place),
 * read from the listing's rows (listing.ts) of the whole stream or of each target's neighbourhood.
 */
import type { ListedPackets } from '../../core/packet-log.js';
import { labelSeconds } from '../timestamps.js';
import { INTERVALS_PER_RUN, type Row, readRows } from './listing.js';
import type { VideoDetails } from './media.js';

export interface Packets {
  /** Presentation timestamps of the frames (a field pair's second field is none), ascending and distinct, in the stream's time base. */
  pts: bigint[];
  keyframes: bigint[];
  /** Byte position and size of each packet, by pts (absent where the demuxer does not say). */
  bytes: Map<bigint, { pos: number; size: number }>;
  /** The same packets for the zoom hints (core/zoom.ts), with the spans they cover without a hole. */
  log: ListedPackets;
  /** By pts: the packet's time in the log (its decode time). */
  decodeTime: Map<bigint, number>;
}

/**
 * The hints' time of a packet: its decode timestamp where it has one, as the native engine's; in
 * Matroska its presentation timestamp, the only one the container stores (the demuxer guesses
 * decode times, and not right after the native engine's seeks).
 */
const logTimes = (rows: Array<Row & { pts: bigint }>, d: VideoDetails) => {
  const byPts = /\bmatroska\b/.test(d.demuxer);
  return Float64Array.from(rows, (r) =>
    labelSeconds(byPts ? r.pts : (r.dts ?? r.pts), d.timeBase, d.startUs),
  );
};

/**
 * `spans`: the runs of rows read without a hole, as [first, last] row indices; a run from the
 * stream's start or to its end is open on that side.
 */
function toPackets(
  rows: Array<Row & { pts: bigint }>,
  d: VideoDetails,
  spans: Array<{ from: number; to: number; fromStart?: boolean; toEnd?: boolean }>,
): Packets {
  const times = logTimes(rows, d);
  const edges: number[] = [];
  // A hole (packets left out for want of a timestamp) ends a span: the rows after it start another.
  const whole: typeof spans = [];
  for (const span of spans) {
    let from = span.from;
    for (let i = span.from + 1; i <= span.to; i++)
      if (rows[i]?.hole) {
        whole.push({ from, to: i - 1, fromStart: from === span.from && span.fromStart });
        from = i;
      }
    whole.push({ from, to: span.to, fromStart: from === span.from && span.fromStart, toEnd: span.toEnd });
  }
  for (const span of whole) {
    let lo = Number.POSITIVE_INFINITY;
    let hi = Number.NEGATIVE_INFINITY;
    for (let i = span.from; i <= span.to; i++) {
      lo = Math.min(lo, times[i] as number);
      hi = Math.max(hi, times[i] as number);
    }
    if (lo > hi) continue;
    edges.push(span.fromStart ? Number.NEGATIVE_INFINITY : lo, span.toEnd ? Number.POSITIVE_INFINITY : hi);
  }
  // Matroska/WebM: the keyframes' presentation times stand in for the Cues the native engine
  // reads (core/packet-log.ts: where the keyframe rhythm comes from).
  const indexKeys = /\bmatroska\b/.test(d.demuxer)
    ? rows.filter((r) => r.key).map((r) => labelSeconds(r.pts, d.timeBase, d.startUs))
    : [];
  // What the frame rule needs is made on first use: a whole-stream listing read for the hints
  // alone (packet-log.ts) never needs it, and it is the costlier part of a long stream's listing.
  const asc = (a: bigint, b: bigint) => (a < b ? -1 : a > b ? 1 : 0);
  const once = <T>(make: () => T) => {
    let made: T | undefined;
    return () => (made ??= make());
  };
  const pts = once(() => [...new Set(rows.flatMap((r) => (r.second ? [] : [r.pts])))].sort(asc));
  const keyframes = once(() => [...new Set(rows.filter((r) => r.key).map((r) => r.pts))].sort(asc));
  const bytes = once(() => {
    const at = new Map<bigint, { pos: number; size: number }>();
    for (const { pts, pos, size } of rows)
      if (pos !== undefined && size !== undefined) at.set(pts, { pos, size });
    return at;
  });
  const decodeTime = once(() => new Map(rows.map((r, i) => [r.pts, times[i] as number])));
  return {
    get pts() {
      return pts();
    },
    get keyframes() {
      return keyframes();
    },
    get bytes() {
      return bytes();
    },
    get decodeTime() {
      return decodeTime();
    },
    log: {
      times,
      sizes: Float64Array.from(rows, (r) => r.size ?? 0),
      keys: Uint8Array.from(rows, (r) => (r.key ? 1 : 0)),
      spans: new Float64Array(edges),
      indexKeys: new Float64Array(indexKeys),
    },
  };
}

/** Lists every packet of the stream. */
export async function listAllPackets(path: string, d: VideoDetails, signal?: AbortSignal): Promise<Packets> {
  const rows = await readRows(path, d, undefined, signal);
  return toPackets(rows, d, [{ from: 0, to: rows.length - 1, fromStart: true, toEnd: true }]);
}

/** The end of the stream's data in whole microseconds on the stream clock (what the probe found). */
function dataEndUs(d: VideoDetails): bigint {
  const end = d.readableEnd ?? d.declared;
  return d.startUs + BigInt(Math.round(end * 1e6));
}

/**
 * Lists only the packets around each target: one read interval per span of targets, each starting
 * at a target (a demuxer with an index seeks back to the keyframe before it) and ending 0.5 s past
 * the last one, which outlasts B-frame reordering (checked below, not assumed).
 * Returns null unless every target is provably covered: a run of contiguous packets (each one's
 * dts is the previous one's dts + duration) holds a keyframe at or before the frame displayed at
 * the target and reaches past the target. The caller then lists the whole stream instead.
 * `intervalsPerRun`: for tests, how many read intervals one ffprobe run takes (see readRows).
 */
export async function listPacketsNear(
  path: string,
  d: VideoDetails,
  timesMs: number[],
  signal?: AbortSignal,
  intervalsPerRun = INTERVALS_PER_RUN,
): Promise<Packets | null> {
  const sorted = [...new Set(timesMs)].sort((a, b) => a - b);
  const spans: Array<[number, number]> = [];
  for (const t of sorted) {
    const last = spans[spans.length - 1];
    // A target within 1 s of the previous span's end (1.5 s of the previous target) extends that
    // span instead of seeking again.
    if (last && t <= last[1] + 1_000) last[1] = t + 500;
    else spans.push([t, t + 500]);
  }
  const at = (ms: number) => (d.startTime + ms / 1000).toFixed(6);
  const rows = await readRows(
    path,
    d,
    spans.map(([from, to]) => `${at(from)}%${at(to)}`),
    signal,
    intervalsPerRun,
  );

  const runs: Array<Array<Row & { pts: bigint }>> = [];
  const runSpans: Array<{ from: number; to: number }> = [];
  for (const [i, r] of rows.entries()) {
    const prev = rows[i - 1];
    const contiguous =
      prev?.dts !== undefined &&
      prev.duration !== undefined &&
      r.dts !== undefined &&
      prev.dts + prev.duration === r.dts;
    if (contiguous) {
      runs[runs.length - 1]?.push(r);
      (runSpans[runSpans.length - 1] as { to: number }).to = i;
    } else {
      runs.push([r]);
      runSpans.push({ from: i, to: i });
    }
  }
  const [tbNum, tbDen] = d.timeBase;
  const us = (p: bigint) => (p * tbNum * 1_000_000n) / tbDen;
  // The end of the data the probe found, not the declared duration: a header may claim more (or
  // less) than the file holds.
  const fileEndUs = dataEndUs(d) - 1_000n;
  const covered = (ms: number) => {
    const shown = atOrBefore(d, ms);
    return runs.some((run) => {
      let frame: bigint | undefined;
      for (const r of run)
        if (!r.second && shown(r.pts) && (frame === undefined || r.pts > frame)) frame = r.pts;
      const opened = frame !== undefined && run.some((r) => r.key && r.pts <= (frame as bigint));
      // The run must also reach a packet decoded after the target (dts past it: every later
      // packet shows later too), or the end of the data; else a frame displayed at or before the
      // target could still be missing from it.
      const reaches = run.some(
        (r) => (r.dts !== undefined && !shown(r.dts)) || us(r.pts + (r.duration ?? 0n)) >= fileEndUs,
      );
      return opened && reaches;
    });
  };
  return sorted.every(covered) ? toPackets(rows, d, runSpans) : null;
}

/**
 * Lists the packets of a window's neighbourhood (30 s of lead-in for the frame displayed at its
 * start), for demuxers that bisect rather than seek by index; the caller falls back to the whole
 * stream when that misses the GOP start.
 */
export async function listPacketsInWindow(
  path: string,
  d: VideoDetails,
  range: { fromMs: number; toMs: number },
  signal?: AbortSignal,
): Promise<Packets> {
  const from = range.fromMs > 30_000 ? (range.fromMs / 1000 - 30 + d.startTime).toFixed(6) : '';
  const to = (range.toMs / 1000 + 1 + d.startTime).toFixed(6);
  const rows = await readRows(path, d, [`${from}%${to}`], signal);
  return toPackets(rows, d, [{ from: 0, to: rows.length - 1, fromStart: from === '' }]);
}

/** Index of the last element for which `le` holds (the items are sorted), or -1. */
export function lastAtOrBefore<T>(items: T[], le: (item: T) => boolean): number {
  let lo = 0;
  let hi = items.length - 1;
  let found = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (le(items[mid] as T)) {
      found = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return found;
}

/** The frame rule of core/render-plan.ts: index into `pts` of the frame displayed at `timeMs`. */
export function frameAt(pts: bigint[], d: VideoDetails, timeMs: number): number {
  return Math.max(lastAtOrBefore(pts, atOrBefore(d, timeMs)), 0);
}

/**
 * The comparison the frame rule is made of, in exact integers: is a timestamp (stream time base)
 * at or before `timeMs` after the container start?
 */
function atOrBefore(d: VideoDetails, timeMs: number): (ts: bigint) => boolean {
  const [tbNum, tbDen] = d.timeBase;
  const target = (d.startUs + BigInt(timeMs) * 1000n) * tbDen;
  return (ts) => ts * tbNum * 1_000_000n <= target;
}

/** A timestamp in seconds on the stream clock (absolute, like ffmpeg's `t` under -copyts). */
export const seconds = (p: bigint, d: VideoDetails) => Number(p * d.timeBase[0]) / Number(d.timeBase[1]);
