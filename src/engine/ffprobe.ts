/**
 * What the fallback engine learns with ffprobe before it decodes anything: the stream details, and
 * the packet list that the frame rule of core/render-plan.ts is applied to (exact presentation
 * timestamps, keyframes, and where each packet's bytes are, so reference frames can be told apart).
 */
import { open, stat } from 'node:fs/promises';
import { run } from './process.js';
import { EngineError, type ProbeInfo } from './types.js';

interface StreamJson {
  index: number;
  codec_type?: string;
  codec_name?: string;
  width?: number;
  height?: number;
  sample_aspect_ratio?: string;
  time_base?: string;
  start_time?: string;
  duration?: string;
  field_order?: string;
  is_avc?: string;
  nal_length_size?: string;
  channels?: number;
  sample_rate?: string;
  disposition?: { attached_pic?: number };
  tags?: { rotate?: string };
  side_data_list?: Array<{ rotation?: number }>;
}

export interface Details extends ProbeInfo {
  timeBase: [bigint, bigint];
  startUs: bigint;
  interlaced: boolean;
  /** Containers with a seek index land exactly on a keyframe; others (MPEG-TS, PS) bisect. */
  indexed: boolean;
  /**
   * MP4/MOV: a sample table gives every packet's dts, duration and byte position exactly, so the
   * packets near each target can be listed on their own (and NAL headers read in place).
   */
  sampleTable: boolean;
  /**
   * How to find a packet's first NAL unit header, when its bytes sit contiguously at the listed
   * position (MP4/MOV) in a length-prefixed H.264 or HEVC stream of progressive frames.
   */
  nal: { codec: 'h264' | 'hevc'; lengthSize: number } | null;
  audio: { index: number; channels: number; sampleRate: number; startTime: number } | null;
}

const num = (value: string | undefined): number | undefined => {
  const n = value === undefined ? Number.NaN : Number(value);
  return Number.isFinite(n) ? n : undefined;
};

function ratio(value: string | undefined): [number, number] | undefined {
  const m = value ? /^(\d+)[:/](\d+)$/.exec(value) : null;
  return m && Number(m[1]) > 0 && Number(m[2]) > 0 ? [Number(m[1]), Number(m[2])] : undefined;
}

/** The last probe, keyed by path, size and mtime: a job probes once to plan and again to render. */
let lastProbe: { key: string; details: Promise<Details> } | undefined;

export async function probeDetails(path: string): Promise<Details> {
  const s = await stat(path).catch(() => null);
  const key = s ? `${path}\0${s.size}\0${s.mtimeMs}` : '';
  if (key && lastProbe?.key === key) return lastProbe.details;
  const details = probeUncached(path);
  if (key) {
    lastProbe = { key, details };
    details.catch(() => (lastProbe = undefined));
  }
  return details;
}

async function probeUncached(path: string): Promise<Details> {
  const { code, stdout } = await run(
    'ffprobe',
    [
      '-v',
      'error',
      '-print_format',
      'json',
      '-show_format',
      '-show_streams',
      '-protocol_whitelist',
      'file',
      path,
    ],
    { timeoutMs: 60_000 },
  );
  let parsed: {
    streams?: StreamJson[];
    format?: { duration?: string; start_time?: string; format_name?: string };
  };
  try {
    parsed = JSON.parse(stdout.toString() || '{}');
  } catch {
    parsed = {};
  }
  const streams = parsed.streams ?? [];
  // Same choice as the native engine's "best stream": the largest real picture, not cover art.
  const video = streams
    .filter((s) => s.codec_type === 'video' && !s.disposition?.attached_pic && (s.width ?? 0) > 0)
    .sort((a, b) => (b.width ?? 0) * (b.height ?? 0) - (a.width ?? 0) * (a.height ?? 0))[0];
  const duration = num(parsed.format?.duration) ?? Math.max(0, ...streams.map((s) => num(s.duration) ?? 0));
  if (code !== 0 || !video || !(duration > 0)) {
    throw new EngineError('unreadable_video', `ffprobe found no decodable video stream in ${path}`);
  }
  const tb = ratio(video.time_base) ?? [1, 1_000_000];
  const sar = ratio(video.sample_aspect_ratio) ?? [1, 1];
  const rotation =
    video.side_data_list?.find((d) => d.rotation !== undefined)?.rotation ?? num(video.tags?.rotate) ?? 0;
  const quarterTurn = Math.abs(Math.round(rotation / 90)) % 2 === 1;
  const w = Math.round(((video.width ?? 0) * sar[0]) / sar[1]);
  const h = video.height ?? 0;
  const startTime = num(parsed.format?.start_time) ?? 0;
  const audio = streams.find((s) => s.codec_type === 'audio');
  const formatName = parsed.format?.format_name ?? '';
  const sampleTable = /\b(mov|mp4)\b/.test(formatName);
  const lengthPrefixed =
    sampleTable && video.field_order === 'progressive'
      ? video.codec_name === 'h264' && video.is_avc === 'true'
        ? { codec: 'h264' as const, lengthSize: num(video.nal_length_size) ?? 4 }
        : video.codec_name === 'hevc'
          ? { codec: 'hevc' as const, lengthSize: 4 }
          : null
      : null;
  return {
    duration,
    startTime,
    videoStream: video.index,
    width: quarterTurn ? h : w,
    height: quarterTurn ? w : h,
    hasAudio: audio !== undefined,
    timeBase: [BigInt(tb[0]), BigInt(tb[1])],
    startUs: BigInt(Math.round(startTime * 1e6)),
    interlaced: ['tt', 'bb', 'tb', 'bt'].includes(video.field_order ?? ''),
    indexed: /\b(mov|mp4|matroska|webm|avi|flv)\b/.test(formatName),
    sampleTable,
    nal: lengthPrefixed,
    audio: audio
      ? {
          index: audio.index,
          channels: audio.channels ?? 1,
          sampleRate: num(audio.sample_rate) ?? 48000,
          startTime: num(audio.start_time) ?? startTime,
        }
      : null,
  };
}

export interface Packets {
  /** Presentation timestamps, ascending and distinct, in the stream's time base. */
  pts: bigint[];
  keyframes: bigint[];
  /** Byte position and size of each packet, by pts (absent where the demuxer does not say). */
  bytes: Map<bigint, { pos: number; size: number }>;
}

interface Row {
  pts: bigint;
  dts?: bigint;
  duration?: bigint;
  key: boolean;
  pos?: number;
  size?: number;
}

const int = (value: string | undefined) => (value && /^-?\d+$/.test(value) ? BigInt(value) : undefined);

/** The video packets in read order (demux only, no decoding), within `intervals` (ffprobe syntax). */
async function readRows(
  path: string,
  d: Details,
  intervals: string | undefined,
  signal: AbortSignal | undefined,
): Promise<Row[]> {
  const { stdout } = await run(
    'ffprobe',
    [
      '-v',
      'error',
      '-select_streams',
      String(d.videoStream),
      ...(intervals ? ['-read_intervals', intervals] : []),
      '-show_entries',
      'packet=pts,dts,duration,flags,pos,size',
      '-of',
      'compact=p=0',
      '-protocol_whitelist',
      'file',
      path,
    ],
    { timeoutMs: 120_000, signal },
  );
  const rows: Row[] = [];
  for (const line of stdout.toString().split('\n')) {
    const fields = new Map(line.split('|').map((kv) => kv.split('=') as [string, string]));
    const pts = int(fields.get('pts'));
    if (pts === undefined) continue;
    rows.push({
      pts,
      dts: int(fields.get('dts')),
      duration: int(fields.get('duration')),
      key: fields.get('flags')?.startsWith('K') ?? false,
      pos: num(fields.get('pos')),
      size: num(fields.get('size')),
    });
  }
  return rows;
}

function toPackets(rows: Row[]): Packets {
  const asc = (a: bigint, b: bigint) => (a < b ? -1 : a > b ? 1 : 0);
  const bytes = new Map<bigint, { pos: number; size: number }>();
  for (const { pts, pos, size } of rows)
    if (pos !== undefined && size !== undefined) bytes.set(pts, { pos, size });
  return {
    pts: [...new Set(rows.map((r) => r.pts))].sort(asc),
    keyframes: [...new Set(rows.filter((r) => r.key).map((r) => r.pts))].sort(asc),
    bytes,
  };
}

/** Lists every video packet of the file. */
export async function listAllPackets(path: string, d: Details, signal?: AbortSignal): Promise<Packets> {
  return toPackets(await readRows(path, d, undefined, signal));
}

/**
 * Lists only the packets around each target: one read interval per span of targets, each starting
 * at a target (a demuxer with an index seeks back to the keyframe before it) and ending 0.5 s past
 * the last one, which outlasts B-frame reordering (checked below, not assumed).
 * Returns null unless every target is provably covered: a run of contiguous packets (each one's
 * dts is the previous one's dts + duration) holds a keyframe at or before the frame displayed at
 * the target and reaches past the target. The caller then lists the whole file instead.
 */
export async function listPacketsNear(
  path: string,
  d: Details,
  timesMs: number[],
  signal?: AbortSignal,
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
  const intervals = spans.map(([from, to]) => `${at(from)}%${at(to)}`).join(',');
  const rows = await readRows(path, d, intervals, signal);

  const runs: Row[][] = [];
  for (const [i, r] of rows.entries()) {
    const prev = rows[i - 1];
    const contiguous =
      prev?.dts !== undefined &&
      prev.duration !== undefined &&
      r.dts !== undefined &&
      prev.dts + prev.duration === r.dts;
    if (contiguous) runs[runs.length - 1]?.push(r);
    else runs.push([r]);
  }
  const [tbNum, tbDen] = d.timeBase;
  const us = (p: bigint) => (p * tbNum * 1_000_000n) / tbDen;
  const fileEndUs = d.startUs + BigInt(Math.round(d.duration * 1e6)) - 1_000n;
  const covered = (ms: number) => {
    const shown = atOrBefore(d, ms);
    return runs.some((run) => {
      let frame: bigint | undefined;
      for (const r of run) if (shown(r.pts) && (frame === undefined || r.pts > frame)) frame = r.pts;
      const opened = frame !== undefined && run.some((r) => r.key && r.pts <= (frame as bigint));
      // The run must also reach a packet decoded after the target (dts past it: every later
      // packet shows later too), or the end of the file; else a frame displayed at or before the
      // target could still be missing from it.
      const reaches = run.some(
        (r) => (r.dts !== undefined && !shown(r.dts)) || us(r.pts + (r.duration ?? 0n)) >= fileEndUs,
      );
      return opened && reaches;
    });
  };
  return sorted.every(covered) ? toPackets(rows) : null;
}

/**
 * Lists the packets of a window's neighbourhood (30 s of lead-in for the frame displayed at its
 * start), for demuxers that bisect rather than seek by index; the caller falls back to the whole
 * file when that misses the GOP start.
 */
export async function listPacketsInWindow(
  path: string,
  d: Details,
  range: { fromMs: number; toMs: number },
  signal?: AbortSignal,
): Promise<Packets> {
  const from = range.fromMs > 30_000 ? `${range.fromMs / 1000 - 30 + d.startTime}` : '';
  return toPackets(await readRows(path, d, `${from}%${range.toMs / 1000 + 1 + d.startTime}`, signal));
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
export function frameAt(pts: bigint[], d: Details, timeMs: number): number {
  return Math.max(lastAtOrBefore(pts, atOrBefore(d, timeMs)), 0);
}

/**
 * The comparison the frame rule is made of, in exact integers: is a timestamp (stream time base)
 * at or before `timeMs` after the container start?
 */
function atOrBefore(d: Details, timeMs: number): (ts: bigint) => boolean {
  const [tbNum, tbDen] = d.timeBase;
  const target = (d.startUs + BigInt(timeMs) * 1000n) * tbDen;
  return (ts) => ts * tbNum * 1_000_000n <= target;
}

export const seconds = (p: bigint, d: Details) => Number(p * d.timeBase[0]) / Number(d.timeBase[1]);

/**
 * Whether each packet holds a reference frame, read from its first slice's NAL header (H.264
 * nal_ref_idc, HEVC sub-layer non-reference types); undefined where that cannot be told. Only a
 * hint for `-skip_frame noref`: the decoder itself decides what it skips, and a target it skipped
 * is extracted again without skipping, so a wrong hint costs time, never a wrong frame.
 */
export async function referenceHints(
  path: string,
  d: Details,
  packets: Packets,
  pts: bigint[],
): Promise<Array<boolean | undefined>> {
  const nal = d.nal;
  if (!nal) return pts.map(() => undefined);
  const file = await open(path, 'r');
  try {
    const header = Buffer.alloc(nal.lengthSize + 2);
    const hints: Array<boolean | undefined> = [];
    for (const p of pts) {
      const at = packets.bytes.get(p);
      let hint: boolean | undefined;
      // Walk the length-prefixed NAL units (parameter sets, SEI, ...) up to the first slice.
      for (let off = 0, units = 0; at && hint === undefined && units < 16; units++) {
        if (off + header.length > at.size) break;
        const { bytesRead } = await file.read(header, 0, header.length, at.pos + off);
        if (bytesRead < header.length) break;
        const length = header.readUIntBE(0, nal.lengthSize);
        const first = header[nal.lengthSize] as number;
        if (nal.codec === 'h264') {
          const type = first & 0x1f;
          if (type === 1 || type === 5) hint = ((first >> 5) & 3) !== 0;
        } else {
          const type = (first >> 1) & 0x3f;
          // VCL types 0..31; the even ones up to 14 are sub-layer non-reference pictures.
          if (type <= 31) hint = !(type <= 14 && type % 2 === 0);
        }
        off += nal.lengthSize + length;
      }
      hints.push(hint);
    }
    return hints;
  } finally {
    await file.close();
  }
}
