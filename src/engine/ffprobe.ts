/**
 * The fallback engine's probe: what the file holds, learnt with ffprobe only (DESIGN §1: on the
 * hosted side ffmpeg runs only after the debit). It reports facts (engine/types.ts `ProbeInfo`);
 * core/probe.ts decides the stream and the clip's extent from them.
 *
 * Three kinds of ffprobe runs, the last two in parallel:
 * - one `-show_format -show_streams` for the facts every stream declares;
 * - per video stream (cover art aside), its first packets decoded until a frame comes out
 *   (`decodes`), so a codec this FFmpeg lacks or a broken bitstream is known before planning;
 * - one packet listing near the declared end (demux only) for where the data really ends; when
 *   the seek fails or finds no timestamped packet, a listing from the start (still demux only).
 */
import { stat } from 'node:fs/promises';
import { PacketEnds, type StreamClock } from './packet-ends.js';
import { run } from './process.js';
import { EngineError, type ProbeInfo, type VideoStreamFacts } from './types.js';

interface StreamJson {
  index: number;
  codec_type?: string;
  codec_name?: string;
  width?: number;
  height?: number;
  sample_aspect_ratio?: string;
  time_base?: string;
  start_pts?: number;
  start_time?: string;
  duration?: string;
  nb_frames?: string;
  avg_frame_rate?: string;
  r_frame_rate?: string;
  field_order?: string;
  has_b_frames?: number;
  refs?: number;
  is_avc?: string;
  nal_length_size?: string;
  channels?: number;
  sample_rate?: string;
  disposition?: { default?: number; attached_pic?: number };
  tags?: { rotate?: string };
  side_data_list?: Array<{ rotation?: number }>;
}

/** What the render needs to know about the video stream it decodes. */
export interface VideoDetails {
  index: number;
  codec: string;
  timeBase: [bigint, bigint];
  /** Container start time, seconds and whole microseconds (the frame rule counts from it). */
  startTime: number;
  startUs: bigint;
  /** Duration the container declares (0 when none). */
  declared: number;
  /** Where this stream's data ends, seconds from the container start (null: unknown). */
  readableEnd: number | null;
  /**
   * Frames may be interlaced: the stream does not declare itself progressive (a capture often
   * leaves the field order unknown until its frames are decoded). Tiny pictures never are.
   */
  mayBeInterlaced: boolean;
  /**
   * Packets carry no usable pts (AVI stores decode order only; its demuxer's pts are guesses):
   * frames then come out of the decoder stamped with the dts `reorderDelay` packets later, so a
   * frame's time is its packet's dts plus that many packet durations.
   */
  ptsFromDts: boolean;
  /**
   * The stream has timestamps (a start time). Without any (a bare elementary stream), ffmpeg
   * numbers the frames by their durations from the start, and a seek cannot be aimed.
   */
  timestamps: boolean;
  /** Frames the decoder holds back for reordering (`has_b_frames`). */
  reorderDelay: number;
  /**
   * How far back, in seconds, a picture's references may reach through the decoder's pictures:
   * (reference frames + 1) x (reorder delay + 1) + reorder delay frames. Two decodes that started
   * further apart than this and agree do not depend on where decoding started.
   */
  referenceReach: number;
  /** The demuxer's name as ffmpeg logs it (its own messages are not decode errors). */
  demuxer: string;
  /** Containers with a seek index land exactly on a keyframe; others (MPEG-TS, PS) bisect. */
  indexed: boolean;
  /**
   * MP4/MOV: a sample table gives every packet's dts, duration and byte position exactly, so the
   * packets near each target can be listed on their own (and NAL headers read in place).
   */
  sampleTable: boolean;
  /**
   * How to find a packet's NAL unit headers, when its bytes sit contiguously at the listed
   * position (MP4/MOV) in a length-prefixed H.264 or HEVC stream.
   */
  nal: { codec: 'h264' | 'hevc'; lengthSize: number; progressive: boolean } | null;
}

export interface AudioDetails {
  index: number;
  channels: number;
  sampleRate: number;
  /** The stream's own start time, seconds (absolute, like the container's). */
  startTime: number;
}

/** Everything one probe learnt: the facts it reports, and what a render of any stream needs. */
export interface Probed {
  info: ProbeInfo;
  video: Map<number, VideoDetails>;
  /** The first audio stream (the one the envelope is built from), null without audio. */
  audio: AudioDetails | null;
}

const num = (value: string | number | undefined): number | undefined => {
  const n = value === undefined ? Number.NaN : Number(value);
  return Number.isFinite(n) ? n : undefined;
};

function ratio(value: string | undefined): [number, number] | undefined {
  const m = value ? /^(\d+)[:/](\d+)$/.exec(value) : null;
  return m && Number(m[1]) > 0 && Number(m[2]) > 0 ? [Number(m[1]), Number(m[2])] : undefined;
}

const int = (value: string | undefined) => (value && /^-?\d+$/.test(value) ? BigInt(value) : undefined);

/** The last probe, keyed by path, size and mtime: a job probes once to plan and again to render. */
let lastProbe: { key: string; probed: Promise<Probed> } | undefined;

export async function probeFile(path: string): Promise<Probed> {
  const s = await stat(path).catch(() => null);
  const key = s ? `${path}\0${s.size}\0${s.mtimeMs}` : '';
  if (key && lastProbe?.key === key) return lastProbe.probed;
  const probed = probeUncached(path);
  if (key) {
    lastProbe = { key, probed };
    probed.catch(() => (lastProbe = undefined));
  }
  return probed;
}

/** The details a render of `stream` needs; the stream must be one the probe found. */
export function videoDetails(probed: Probed, stream: number): VideoDetails {
  const details = probed.video.get(stream);
  if (!details) throw new EngineError('render_failed', `stream ${stream} is not a video stream of the file`);
  return details;
}

async function probeUncached(path: string): Promise<Probed> {
  const { code, stdout } = await run(
    'ffprobe',
    ['-v', 'error', '-print_format', 'json', '-show_format', '-show_streams', ...input(path)],
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
  if (code !== 0 || !parsed.format) {
    throw new EngineError('unreadable_video', `ffprobe could not open ${path}`);
  }
  const streams = parsed.streams ?? [];
  const declared = num(parsed.format.duration) ?? 0;
  const startTime = num(parsed.format.start_time) ?? 0;
  const formatName = parsed.format.format_name ?? '';
  const sampleTable = /\b(mov|mp4)\b/.test(formatName);
  const video = streams.filter((s) => s.codec_type === 'video');
  const audio = streams.filter((s) => s.codec_type === 'audio');

  const [decodes, ends] = await Promise.all([
    Promise.all(video.map((s) => (s.disposition?.attached_pic ? false : decodesAFrame(path, s.index)))),
    readableEnds(path, [...video, ...audio], { declared, startTime, sampleTable }),
  ]);

  const details = new Map<number, VideoDetails>();
  const facts: VideoStreamFacts[] = video.map((s, i) => {
    const tb = ratio(s.time_base) ?? [1, 1_000_000];
    const readableEnd = ends.get(s.index) ?? null;
    details.set(s.index, {
      index: s.index,
      codec: s.codec_name ?? '',
      timeBase: [BigInt(tb[0]), BigInt(tb[1])],
      startTime,
      startUs: BigInt(Math.round(startTime * 1e6)),
      declared,
      readableEnd,
      mayBeInterlaced: s.field_order !== 'progressive' && (s.width ?? 0) >= 4 && (s.height ?? 0) >= 4,
      ptsFromDts: /\bavi\b/.test(formatName),
      reorderDelay: num(s.has_b_frames) ?? 0,
      timestamps: num(s.start_time) !== undefined,
      referenceReach: referenceReach(s),
      demuxer: formatName,
      indexed: /\b(mov|mp4|matroska|webm|avi|flv)\b/.test(formatName),
      sampleTable,
      nal: sampleTable ? nalLayout(s) : null,
    });
    return {
      index: s.index,
      ...displaySize(s),
      isDefault: s.disposition?.default === 1,
      attachedPic: s.disposition?.attached_pic === 1,
      frames: frameCount(s, declared),
      decodes: decodes[i] === true,
      readableEnd,
    };
  });
  const audioEnds = audio.map((s) => ends.get(s.index)).filter((e): e is number => e !== undefined);
  const first = audio[0];
  return {
    info: {
      duration: declared,
      startTime,
      videoStreams: facts,
      hasAudio: first !== undefined,
      audioEnd: audioEnds.length ? Math.max(...audioEnds) : null,
    },
    video: details,
    audio: first
      ? {
          index: first.index,
          channels: first.channels ?? 1,
          sampleRate: num(first.sample_rate) ?? 48000,
          startTime: num(first.start_time) ?? startTime,
        }
      : null,
  };
}

/** The input arguments of every run: local files only, whatever the file's playlist or links say. */
export const input = (path: string) => ['-protocol_whitelist', 'file', '-i', path];

/** Display size: sample aspect ratio applied to the width, then a quarter turn swaps the sides. */
function displaySize(s: StreamJson): { width: number; height: number } {
  const sar = ratio(s.sample_aspect_ratio) ?? [1, 1];
  const rotation =
    s.side_data_list?.find((d) => d.rotation !== undefined)?.rotation ?? num(s.tags?.rotate) ?? 0;
  const quarterTurn = Math.abs(Math.round(rotation / 90)) % 2 === 1;
  const w = Math.round(((s.width ?? 0) * sar[0]) / sar[1]);
  const h = s.height ?? 0;
  return quarterTurn ? { width: h, height: w } : { width: w, height: h };
}

/** The container's frame count, else duration x average frame rate; null when neither is known. */
function frameCount(s: StreamJson, declared: number): number | null {
  const counted = num(s.nb_frames);
  if (counted !== undefined && counted > 0) return Math.round(counted);
  const rate = ratio(s.avg_frame_rate) ?? ratio(s.r_frame_rate);
  const duration = num(s.duration) ?? declared;
  return rate && duration > 0 ? Math.max(1, Math.round((duration * rate[0]) / rate[1])) : null;
}

/** See VideoDetails.referenceReach. */
function referenceReach(s: StreamJson): number {
  const rate = ratio(s.avg_frame_rate) ?? ratio(s.r_frame_rate) ?? [25, 1];
  // ffprobe's `refs` is not the stream's (H.264 reports 1 whatever its SPS says): the codec's most.
  const refs = /^(h264|hevc)$/.test(s.codec_name ?? '') ? 16 : Math.max(2, num(s.refs) ?? 2);
  const delay = num(s.has_b_frames) ?? 0;
  return (((refs + 1) * (delay + 1) + delay) * rate[1]) / rate[0];
}

/** Length-prefixed H.264/HEVC in MP4/MOV: where each packet's NAL unit headers can be read. */
function nalLayout(s: StreamJson): VideoDetails['nal'] {
  const progressive = s.field_order === 'progressive';
  if (s.codec_name === 'h264' && s.is_avc === 'true') {
    return { codec: 'h264', lengthSize: num(s.nal_length_size) ?? 4, progressive };
  }
  return s.codec_name === 'hevc' ? { codec: 'hevc', lengthSize: 4, progressive } : null;
}

/**
 * Whether a frame of `stream` decodes: its first few packets, then (a stream opening mid-GOP, as
 * broadcast captures do) up to 300, decoded until the end of that read; the decoder is flushed, so
 * B-frame delay does not hide a frame.
 */
async function decodesAFrame(path: string, stream: number): Promise<boolean> {
  for (const packets of [8, 300]) {
    const { stdout } = await run(
      'ffprobe',
      [
        '-v',
        'quiet',
        '-select_streams',
        String(stream),
        '-read_intervals',
        `%+#${packets}`,
        '-show_entries',
        'frame=media_type',
        '-of',
        'csv=p=0',
        ...input(path),
      ],
      { timeoutMs: 20_000 },
    );
    if (/\S/.test(stdout.toString())) return true;
  }
  return false;
}

/**
 * Where each stream's data ends (seconds from the container start): the latest pts + duration of
 * its packets, read from 10 s before the declared end (demux only). When that read finds no
 * timestamped packet at all (the seek failed, the index lists data past the end of the file, the
 * declared duration is wrong or missing), the packets are listed from the start instead.
 */
async function readableEnds(
  path: string,
  streams: StreamJson[],
  { declared, startTime, sampleTable }: { declared: number; startTime: number; sampleTable: boolean },
): Promise<Map<number, number>> {
  const wanted = new Map(streams.map((s) => [s.index, s]));
  const at = { startTime, sampleTable };
  const tail = declared > 10 ? await packetEnds(path, wanted, at, startTime + declared - 10) : null;
  if (tail && tail.size > 0) return tail;
  return (await packetEnds(path, wanted, at, null)) ?? new Map();
}

async function packetEnds(
  path: string,
  streams: Map<number, StreamJson>,
  { startTime, sampleTable }: { startTime: number; sampleTable: boolean },
  from: number | null,
): Promise<Map<number, number> | null> {
  const fileSize = (await stat(path).catch(() => null))?.size ?? Number.POSITIVE_INFINITY;
  const { code, stdout } = await run(
    'ffprobe',
    [
      '-v',
      'quiet',
      ...(from === null ? [] : ['-read_intervals', `${from.toFixed(6)}%`]),
      '-show_entries',
      'packet=stream_index,pts,dts,duration,pos,size',
      '-of',
      'compact=p=0',
      ...input(path),
    ],
    { timeoutMs: from === null ? 300_000 : 60_000 },
  );
  if (code === null) return null; // timed out: nothing trustworthy
  const timeBases = new Map<number, [bigint, bigint]>();
  const clocks = new Map<number, StreamClock>();
  for (const [index, s] of streams) {
    const tb = ratio(s.time_base);
    if (!tb) continue;
    timeBases.set(index, [BigInt(tb[0]), BigInt(tb[1])]);
    // A read from the start clocks a stream without timestamps from the stream's start.
    const start = from === null ? (int(String(s.start_pts ?? '')) ?? 0n) : null;
    clocks.set(index, { frame: frameDuration(s, tb), clock: start });
  }
  const ends = new PacketEnds(fileSize, clocks);
  for (const line of stdout.toString().split('\n')) {
    const fields = new Map(line.split('|').map((kv) => kv.split('=') as [string, string]));
    const pos = num(fields.get('pos'));
    const size = num(fields.get('size')) ?? 0;
    ends.add(Number(fields.get('stream_index')), {
      pts: int(fields.get('pts')) ?? null,
      dts: int(fields.get('dts')) ?? null,
      duration: int(fields.get('duration')) ?? null,
      pos: pos ?? null,
      size,
      // The MP4/MOV demuxer hands out a cut last packet shortened to the bytes present: one that
      // ends exactly at the end of the file is taken as cut (an intact file loses one frame, far
      // inside DESIGN's tolerance; the native engine knows the full sample size from the index and
      // agrees).
      corrupt: sampleTable && pos !== undefined && pos + size === fileSize,
    });
  }
  const out = new Map<number, number>();
  for (const [index, end] of ends.ends) {
    const [num, den] = timeBases.get(index) as [bigint, bigint];
    // Whole microseconds, exactly, before the subtraction (TS timestamps reach 2^33 / 90 kHz).
    const us = (end * num * 1_000_000n) / den;
    out.set(index, Number(us - BigInt(Math.round(startTime * 1e6))) / 1e6);
  }
  return out;
}

/** One frame's duration in time-base units `tb`, from the average (else the real) frame rate. */
function frameDuration(s: StreamJson, tb: [number, number]): bigint | null {
  const rate = ratio(s.avg_frame_rate) ?? ratio(s.r_frame_rate);
  if (!rate) return null;
  const d = (BigInt(tb[1]) * BigInt(rate[1])) / (BigInt(tb[0]) * BigInt(rate[0]));
  return d > 0n ? d : null;
}
