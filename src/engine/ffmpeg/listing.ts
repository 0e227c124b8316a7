/**
 * A stream's packets as ffprobe lists them (demux only, `-show_entries packet=...`, never a
 * decode), read into rows in decode order: each packet's timestamps as the decoder will show its
 * frame (packets without any timestamp clocked, fixtures/vectors/timestamps.json; a field pair's
 * second field marked, fixtures/vectors/fields.json). packets.ts turns the rows into the lists the
 * frame rule is applied to.
 */
import { run } from '../process.js';
import { frameStep, ptsFaulty, untimedDecodeTime } from '../timestamps.js';
import { type SliceInfo, secondFields, sliceInfo } from './h264.js';
import { mapFirstSlices, mapPackets } from './leading-bytes.js';
import { input, type VideoDetails } from './media.js';
import { readLoneField } from './mpeg2.js';

export interface Row {
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

export const int = (value: string | undefined) =>
  value && /^-?\d+$/.test(value) ? BigInt(value) : undefined;
export const num = (value: string | undefined) => {
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
export const INTERVALS_PER_RUN = 400;

/** One demux-only ffprobe run over the stream's packets: `args` choose the fields and format. */
export async function probePackets(
  path: string,
  d: VideoDetails,
  args: string[],
  signal: AbortSignal | undefined,
) {
  const { stdout } = await run(
    'ffprobe',
    ['-v', 'error', '-select_streams', String(d.index), ...args, ...input(path, d.fixed, d.bounds)],
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
export async function readRows(
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
      const own = int(fields.dts);
      const timed = untimedDecodeTime(clock, int(fields.pts), own, duration);
      const dts = timed.dts;
      // Where fields are possible, only a read from the stream's start runs the clock, up to the
      // first decode time read.
      clock = fieldsPossible && own !== undefined ? null : timed.clock;
      // Without usable pts, a frame is shown at the dts of the packet `reorderDelay` later (CFR
      // decode order: one frame step each); the keyframe of a closed GOP is shown in its own
      // decode slot, so the same shift holds for it.
      const pts = d.ptsFromDts ? (dts === undefined ? undefined : dts + shift(d, duration)) : int(fields.pts);
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
  if (!d.ptsFromDts && rows.reduce((faulty, r) => ptsFaulty(faulty, r.pts, r.dts), false))
    timeByDecoder(rows, d);
  await markSecondFields(path, d, order);
  // Packets before the stream's first keyframe (a capture that opens mid-GOP) stay listed: whether
  // they give a picture is the decoder's to say (HEVC's does, H.264's waits for a recovery point),
  // and a target whose picture a decode from the start does not give shows the frame a sequential
  // decode leaves on screen (extract.ts withStandIns).
  return withPts(rows, d);
}

/** `reorderDelay` frame steps (fixtures/vectors/frame-step.json; 1 where unknown). */
const shift = (d: VideoDetails, duration: bigint | undefined) =>
  BigInt(d.reorderDelay) * (frameStep(duration, d.timeBase, d.rates) ?? 1n);

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
    pictures = await mapPackets(path, 'sample', at(), (read) => read && readLoneField(read));
  else if (h && sps && !sps.frameMbsOnly)
    pictures = await mapFirstSlices(path, h.layout, h.lengthSize, at(), (nal) => nal && sliceInfo(nal, sps));
  else return;
  const timed = (r: Row | undefined) => r?.pts !== undefined || r?.dts !== undefined;
  for (const [i, second] of secondFields(pictures).entries())
    if (second && timed(rows[i - 1])) (rows[i] as Row).second = true;
}

/**
 * Pts below dts (broken composition offsets): the decoder calls the pts faulty and its best-effort
 * timestamps, what ffplay and the ffmpeg CLI show frames at, become the decode times of the packets
 * that put the frames out, `reorderDelay` packets later (as withPts says; not dts plus that many
 * durations, which a millisecond time base rounds differently), and the last ones one step apart
 * (fixtures/vectors/frame-step.json) after the latest (the rule: fixtures/vectors/timestamps.json,
 * `of: faulty`; native: crates/vidsheet-core/src/video/clock.rs `Clock::time`). Sets each timed
 * row's pts so.
 */
export function timeByDecoder(
  rows: Row[],
  d: Pick<VideoDetails, 'reorderDelay' | 'timeBase' | 'rates'>,
): void {
  const { reorderDelay } = d;
  const timed = rows.filter((r): r is Row & { dts: bigint } => r.dts !== undefined);
  const last = timed.at(-1);
  const step = frameStep(last?.duration, d.timeBase, d.rates) ?? 1n;
  let tail = last?.dts ?? 0n;
  timed.forEach((r, i) => {
    const later = timed[i + reorderDelay];
    if (later === undefined) tail += step;
    r.pts = later?.dts ?? tail;
  });
}

/**
 * Rows with a pts each. Some packets carry only a dts (a DVD's I and P pictures without a PES
 * timestamp; MXF's of a long-GOP stream); the decoder still stamps their frames, with the dts of
 * the packet it is sent when the frame comes out. A decoder that holds `reorderDelay` frames back
 * puts one frame out per packet from the packet after those on, so the times frames are shown at
 * are the decode times of the packets from index `reorderDelay` on: the times of that set no
 * packet claims belong to the packets without a pts, in decode order, and the last of them (at
 * most `reorderDelay`) come out at the end of the stream with no packet to stamp them, one frame
 * step (fixtures/vectors/frame-step.json) after the latest (the native engine's stamp for a frame
 * without one). Where that does not fit (a known pts outside the set), the set is taken as the
 * decode times shifted by `reorderDelay` frame steps, or by the earliest pts minus the earliest dts, each used only
 * when it fits exactly; else those packets are left out.
 */
export function withPts(
  rows: Row[],
  d: Pick<VideoDetails, 'reorderDelay' | 'timeBase' | 'rates'>,
): Array<Row & { pts: bigint }> {
  const { reorderDelay } = d;
  const known = rows.filter((r): r is Row & { pts: bigint } => r.pts !== undefined);
  if (known.length === rows.length) return known;
  // BigInts: Math.min and Math.max do not take them.
  const extreme = (values: bigint[], sign: 1n | -1n) => {
    let found = values[0] as bigint;
    for (const v of values) if ((v - found) * sign > 0n) found = v;
    return found;
  };
  const min = (values: bigint[]) => extreme(values, -1n);
  const max = (values: bigint[]) => extreme(values, 1n);
  const dtss = rows.flatMap((r) => (r.dts === undefined ? [] : [r.dts]));
  if (dtss.length !== rows.length) return known;
  // No pts at all: frames are shown in decode slots.
  if (known.length === 0) return rows.map((r) => ({ ...r, pts: r.dts as bigint }));
  const stepOf = (r: Row | undefined) => frameStep(r?.duration, d.timeBase, d.rates) ?? 1n;
  const untimed = rows.length - known.length;
  const claimed = new Set(known.map((r) => r.pts));
  const shifted = (shift: bigint) => ({ shown: dtss.map((t) => t + shift), late: 0 });
  for (const { shown, late } of [
    { shown: dtss.slice(reorderDelay), late: Math.min(reorderDelay, untimed) },
    shifted(BigInt(reorderDelay) * stepOf(rows[0])),
    shifted(min(known.map((r) => r.pts)) - min(dtss)),
  ]) {
    const set = new Set(shown);
    const free = [...set].filter((t) => !claimed.has(t));
    if (![...claimed].every((t) => set.has(t)) || free.length < untimed - late || free.length > untimed)
      continue;
    let next = 0;
    let last = max([...set]);
    const step = stepOf(rows.at(-1));
    return rows.map((r) => {
      if (r.pts !== undefined) return r as Row & { pts: bigint };
      const pts = free[next++] ?? last + step;
      if (pts > last) last = pts;
      return { ...r, pts };
    });
  }
  return known;
}
