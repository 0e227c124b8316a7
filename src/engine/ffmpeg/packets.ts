/**
 * The packet lists the frame rule of core/render-plan.ts is applied to: exact presentation
 * timestamps, keyframes, and where each packet's bytes are (so NAL headers can be read in place).
 * Listing is demux only (ffprobe `-show_entries packet=...`), never a decode.
 */
import type { PacketLog } from '../../core/packet-log.js';
import { run } from '../process.js';
import { labelSeconds, untimedDecodeTime } from '../timestamps.js';
import { type SliceInfo, secondFields, sliceInfo } from './h264.js';
import { mapFirstSlices, mapPackets } from './leading-bytes.js';
import { input, type VideoDetails } from './media.js';
import { mpeg2Picture } from './mpeg2.js';

export interface Packets {
  /** Presentation timestamps of the frames (a field pair's second field is none), ascending and distinct, in the stream's time base. */
  pts: bigint[];
  keyframes: bigint[];
  /** Byte position and size of each packet, by pts (absent where the demuxer does not say). */
  bytes: Map<bigint, { pos: number; size: number }>;
  /** The same packets for the zoom hints (core/zoom.ts), with the spans they cover without a hole. */
  log: Omit<PacketLog, 'cells'>;
  /** By pts: the packet's time in the log (its decode time). */
  decodeTime: Map<bigint, number>;
}

interface Row {
  pts?: bigint;
  dts?: bigint;
  duration?: bigint;
  key: boolean;
  pos?: number;
  size?: number;
  /**
   * Packets without any timestamp were left out just before this one (Ogg: only a page's last
   * packet carries one): the listing has a hole here (core/packet-log.ts).
   */
  hole?: boolean;
  /**
   * The second field of a field pair (H.264 PAFF, each field its own packet): the decoder outputs
   * the pair as one frame at its first field's time, so this packet's time is no frame's.
   */
  second?: boolean;
}

const int = (value: string | undefined) => (value && /^-?\d+$/.test(value) ? BigInt(value) : undefined);
const num = (value: string | undefined) => {
  const n = value === undefined || value === '' ? Number.NaN : Number(value);
  return Number.isFinite(n) ? n : undefined;
};

/** The fields of a packet line that the listing asks for (`-show_entries` below). */
interface Fields {
  pts?: string;
  dts?: string;
  duration?: string;
  flags?: string;
  pos?: string;
  size?: string;
}

/**
 * The fields of one line of the compact listing (`key=value|key=value...`). A whole stream is
 * tens of thousands of lines, read while frames decode on every core: one scan per line, no
 * array or map per field.
 */
function fieldsOf(line: string): Fields {
  const fields: Fields = {};
  for (let at = 0; at < line.length; ) {
    const bar = line.indexOf('|', at);
    const end = bar < 0 ? line.length : bar;
    const eq = line.indexOf('=', at);
    if (eq >= 0 && eq < end) {
      const value = line.slice(eq + 1, end);
      switch (line.slice(at, eq)) {
        case 'pts':
          fields.pts = value;
          break;
        case 'dts':
          fields.dts = value;
          break;
        case 'duration':
          fields.duration = value;
          break;
        case 'flags':
          fields.flags = value;
          break;
        case 'pos':
          fields.pos = value;
          break;
        case 'size':
          fields.size = value;
          break;
      }
    }
    at = end + 1;
  }
  return fields;
}

/**
 * Read intervals per ffprobe run: hundreds of targets must not make one argument longer than the
 * kernel takes (128 KiB per argument), so a long list is read in several runs, in order.
 */
const INTERVALS_PER_RUN = 400;

/** One demux-only ffprobe run over the stream's packets: `args` choose the fields and format. */
async function probePackets(path: string, d: VideoDetails, args: string[], signal: AbortSignal | undefined) {
  const { stdout } = await run(
    'ffprobe',
    ['-v', 'error', '-select_streams', String(d.index), ...args, ...input(path, d.fixed)],
    { timeoutMs: 300_000, signal },
  );
  return stdout;
}

/**
 * The video packets in read order (demux only), within each of `intervals` (ffprobe syntax), read
 * `perRun` intervals to an ffprobe run. Which run reads an interval changes nothing: ffprobe seeks
 * for every interval, and the runs' packets are joined in order before any pair of fields is
 * told, so a pair cut by a run's end is told as one cut by an interval's end.
 */
async function readRows(
  path: string,
  d: VideoDetails,
  intervals: string[] | undefined,
  signal: AbortSignal | undefined,
  perRun = INTERVALS_PER_RUN,
): Promise<Array<Row & { pts: bigint }>> {
  const chunks: Array<string[] | undefined> = [];
  if (!intervals) chunks.push(undefined);
  else for (let i = 0; i < intervals.length; i += perRun) chunks.push(intervals.slice(i, i + perRun));
  const rows: Row[] = [];
  // Every packet in decode order, those left out for want of a timestamp too: a field pair is
  // told from consecutive packets (markSecondFields).
  const order: Row[] = [];
  // A packet without any timestamp is decoded one packet duration after the one before it (the
  // rule: fixtures/vectors/timestamps.json, untimedDecodeTime): a stream without any timestamp,
  // read from its start, from 0 (ffmpeg numbers its frames by their durations, so decode slot j
  // shows at the j-th time). withPts then places their frames among the times shown. Not where a
  // packet may be a field picture (H.264 whose SPS allows fields, or that cannot be read): a
  // frame whose first field has no timestamp is shown at its second field's, and
  // markSecondFields tells those apart by the missing timestamp.
  const fieldsPossible = d.codec === 'h264' && d.h264?.sps?.frameMbsOnly !== true;
  const fromStart = !intervals || intervals.every((i) => i.startsWith('%'));
  let clock: bigint | null = fromStart ? 0n : null;
  let hole = false;
  for (const chunk of chunks) {
    const stdout = await probePackets(
      path,
      d,
      [
        ...(chunk ? ['-read_intervals', chunk.join(',')] : []),
        '-show_entries',
        'packet=pts,dts,duration,flags,pos,size',
        '-of',
        'compact=p=0',
      ],
      signal,
    );
    for (const line of stdout.toString().split('\n')) {
      const fields = fieldsOf(line);
      // Not a packet (a blank line: ffprobe ends a packet with side data with one).
      if (fields.size === undefined) continue;
      const duration = int(fields.duration);
      const step = duration !== undefined && duration > 0n ? duration : undefined;
      const own = int(fields.dts);
      const timed = untimedDecodeTime(clock, int(fields.pts), own, duration);
      const dts = timed.dts;
      // Where fields are possible, only a read from the stream's start runs the clock, up to the
      // first decode time read.
      clock = fieldsPossible && own !== undefined ? null : timed.clock;
      // Without usable pts, a frame is shown at the dts of the packet `reorderDelay` later (CFR
      // decode order: one packet duration each); the keyframe of a closed GOP is shown in its
      // own decode slot, so the same shift holds for it.
      const pts = d.ptsFromDts
        ? dts === undefined
          ? undefined
          : dts + BigInt(d.reorderDelay) * (step ?? 1n)
        : int(fields.pts);
      const row: Row = {
        pts,
        dts,
        duration,
        key: fields.flags?.startsWith('K') ?? false,
        pos: num(fields.pos),
        size: num(fields.size),
      };
      order.push(row);
      if (pts === undefined && dts === undefined) {
        hole ||= rows.length > 0;
        continue;
      }
      if (hole) row.hole = true;
      rows.push(row);
      hole = false;
    }
  }
  // Pts below dts (broken composition offsets): the decoder calls the pts faulty and its
  // best-effort timestamps, what ffplay and the ffmpeg CLI show frames at, become the decode
  // times, shifted as without pts (the rule: crates/vidsheet-core/src/video/pump.rs `stamp`).
  if (!d.ptsFromDts && rows.some((r) => r.pts !== undefined && r.dts !== undefined && r.pts < r.dts)) {
    for (const r of rows)
      if (r.dts !== undefined)
        r.pts = r.dts + BigInt(d.reorderDelay) * (r.duration && r.duration > 0n ? r.duration : 1n);
  }
  await markSecondFields(path, d, order);
  // Packets before the stream's first keyframe (a capture that opens mid-GOP) stay listed: whether
  // they give a picture is the decoder's to say (HEVC's does, H.264's waits for a recovery point),
  // and a target whose picture a decode from the start does not give shows the frame a sequential
  // decode leaves on screen (extract.ts withStandIns).
  return withPts(rows, d.reorderDelay);
}

/**
 * Marks the rows (every packet, in decode order) that are a field pair's second field, from their
 * picture headers read in place: H.264 whose SPS allows field pictures (h264.ts), and MPEG-2 in
 * MP4/MOV, where a muxer may store each field as a sample (mpeg2.ts; elsewhere FFmpeg's parser
 * joins the fields). A second field whose first field's packet has no timestamp is not marked:
 * the decoder then shows the pair at the second field's time (a program stream's field whose PES
 * packet carries another's timestamp, or none).
 */
async function markSecondFields(path: string, d: VideoDetails, rows: Row[]): Promise<void> {
  const h = d.h264;
  const sps = h?.sps;
  const at = () =>
    rows.map((r) => (r.pos === undefined || r.size === undefined ? undefined : { pos: r.pos, size: r.size }));
  let pictures: Array<SliceInfo | null>;
  if (d.codec === 'mpeg2video' && d.sampleTable)
    pictures = await mapPackets(path, 'sample', at(), (read) => read && mpeg2Picture(read));
  else if (h && sps && !sps.frameMbsOnly)
    pictures = await mapFirstSlices(path, h.layout, h.lengthSize, at(), (nal) => nal && sliceInfo(nal, sps));
  else return;
  const timed = (r: Row | undefined) => r?.pts !== undefined || r?.dts !== undefined;
  for (const [i, second] of secondFields(pictures).entries())
    if (second && timed(rows[i - 1])) (rows[i] as Row).second = true;
}

/**
 * Rows with a pts each. Some packets carry only a dts (a program stream's without a PES timestamp;
 * MXF's I and P pictures of a long-GOP stream); their frames are still shown, stamped by the
 * decoder with the dts of the packet it is sent when the frame comes out. So the times frames are
 * shown at are the decode times shifted by the decoder's delay, one per packet: the times of that
 * set no packet claims belong to the packets without a pts, in decode order. The delay is the
 * frames the decoder holds back (`reorderDelay` packet durations); where that does not fit a
 * stream that misstates it, the earliest pts minus the earliest dts. Used only when it fits
 * exactly (every known pts in the set, one free time per packet without one); else those packets
 * are left out.
 */
function withPts(rows: Row[], reorderDelay: number): Array<Row & { pts: bigint }> {
  const known = rows.filter((r): r is Row & { pts: bigint } => r.pts !== undefined);
  if (known.length === rows.length) return known;
  // BigInts: Math.min does not take them.
  const min = (values: bigint[]) => {
    let least = values[0] as bigint;
    for (const v of values) if (v < least) least = v;
    return least;
  };
  const dtss = rows.flatMap((r) => (r.dts === undefined ? [] : [r.dts]));
  if (dtss.length !== rows.length) return known;
  // No pts at all: frames are shown in decode slots.
  if (known.length === 0) return rows.map((r) => ({ ...r, pts: r.dts as bigint }));
  const step = rows[0]?.duration && rows[0].duration > 0n ? rows[0].duration : 1n;
  const claimed = new Set(known.map((r) => r.pts));
  for (const shift of [BigInt(reorderDelay) * step, min(known.map((r) => r.pts)) - min(dtss)]) {
    const shown = new Set(dtss.map((t) => t + shift));
    const free = [...shown].filter((t) => !claimed.has(t));
    if ([...claimed].every((t) => shown.has(t)) && free.length === rows.length - known.length) {
      let next = 0;
      return rows.map((r) =>
        r.pts === undefined ? { ...r, pts: free[next++] as bigint } : (r as Row & { pts: bigint }),
      );
    }
  }
  return known;
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
  // alone (ffmpeg.ts) never needs it, and it is the costlier part of a long stream's listing.
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

/**
 * The zoom hints' listing of a whole MP4/MOV stream (core/zoom.ts): each packet's decode time,
 * size and keyframe flag, parsed straight into the log's arrays. `listAllPackets` keeps an object
 * per packet alive for the whole job (the frame rule's lazy parts close over them); on an hour of
 * video that heap slowed every collection of a render the hints only ride along with (7 % where
 * the target is 5 %: bench/run.mjs --hints). The times are `logTimes`' (the decode time, else the
 * presentation time); a packet with neither is a hole, as there.
 */
export async function listHintPackets(
  path: string,
  d: VideoDetails,
  signal?: AbortSignal,
): Promise<Omit<PacketLog, 'cells'>> {
  // csv prints ffprobe's own field order whatever the order asked: pts, dts, size, flags.
  const stdout = await probePackets(
    path,
    d,
    ['-show_entries', 'packet=pts,dts,size,flags', '-of', 'csv=p=0'],
    signal,
  );
  const text = stdout.toString();
  let times = new Float64Array(1024);
  let sizes = new Float64Array(1024);
  let keys = new Uint8Array(1024);
  let n = 0;
  const edges: number[] = [];
  let runFrom = 0;
  let hole = false;
  // Closes the run of packets listed since the last hole: its time range, open at the stream's ends.
  const closeRun = (toEnd: boolean) => {
    if (n === runFrom) return;
    let lo = Number.POSITIVE_INFINITY;
    let hi = Number.NEGATIVE_INFINITY;
    for (let i = runFrom; i < n; i++) {
      lo = Math.min(lo, times[i] as number);
      hi = Math.max(hi, times[i] as number);
    }
    edges.push(runFrom === 0 ? Number.NEGATIVE_INFINITY : lo, toEnd ? Number.POSITIVE_INFINITY : hi);
    runFrom = n;
  };
  for (let at = 0; at < text.length; ) {
    const nl = text.indexOf('\n', at);
    const end = nl < 0 ? text.length : nl;
    const fields = text.slice(at, end).split(',');
    at = end + 1;
    const [pts, dts, size, flags] = fields;
    const bytes = num(size);
    // Not a packet line (a packet's side data gets lines of its own).
    if (fields.length !== 4 || bytes === undefined || !/^[K_]/.test(flags ?? '')) continue;
    const time = int(dts) ?? int(pts);
    if (time === undefined) {
      // A hole ends the run before it once a packet follows (trailing packets end none).
      hole = n > 0;
      continue;
    }
    if (hole) closeRun(false);
    hole = false;
    if (n === times.length) {
      const grow = <T extends Float64Array | Uint8Array>(a: T, make: (k: number) => T) => {
        const b = make(a.length * 2);
        b.set(a);
        return b;
      };
      times = grow(times, (k) => new Float64Array(k));
      sizes = grow(sizes, (k) => new Float64Array(k));
      keys = grow(keys, (k) => new Uint8Array(k));
    }
    times[n] = labelSeconds(time, d.timeBase, d.startUs);
    sizes[n] = bytes;
    keys[n] = flags?.startsWith('K') ? 1 : 0;
    n++;
  }
  closeRun(true);
  return {
    times: times.slice(0, n),
    sizes: sizes.slice(0, n),
    keys: keys.slice(0, n),
    spans: new Float64Array(edges),
    indexKeys: new Float64Array(0),
  };
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
