/**
 * The fallback engine's probe: what the file holds, learnt with ffprobe only (DESIGN §1: on the
 * hosted side ffmpeg runs only after the debit). It reports facts (engine/types.ts `ProbeInfo`);
 * core/probe.ts decides the stream and the clip's extent from them.
 *
 * Three kinds of ffprobe runs, the last two in parallel:
 * - one `-show_format -show_streams` for the facts every stream declares;
 * - per video stream (cover art aside), its first packets decoded until a frame comes out
 *   (`decodes`), so a codec this FFmpeg lacks or a broken bitstream is known before planning;
 * - one packet listing near the declared end (demux only) for where the data really ends, one per
 *   stream in MP4/MOV; when the seek fails or finds no timestamped packet, a listing from the
 *   start (still demux only).
 */
import { stat } from 'node:fs/promises';
import { containerAllowed } from '../core/containers.js';
import { extentToleranceMs } from '../core/probe.js';
import { extradataSps, fromHexdump, type Sps } from './ffmpeg/h264.js';
import type { Layout } from './ffmpeg/leading-bytes.js';
import { PacketEnds, type StreamClock } from './packet-ends.js';
import { run } from './process.js';
import { referenceReach } from './reach.js';
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
  is_avc?: string;
  nal_length_size?: string;
  /** ffprobe's hexdump of the codec's extradata (`-show_data`). */
  extradata?: string;
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
   * How far back, in seconds, a picture's references may reach through the decoder's pictures
   * (the rule: fixtures/vectors/reference-reach.json, src/engine/reach.ts).
   */
  referenceReach: number;
  /** The demuxer's name as ffmpeg logs it (its own messages are not decode errors). */
  demuxer: string;
  /** The demuxer every run fixes (`-f`), when the probe was restricted (see `Opening`). */
  fixed: string | undefined;
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
  /**
   * H.264 whose packets' first slice headers can be read in place (ffmpeg/h264.ts): how the
   * packet's bytes are laid out, and the stream's SPS (null: unreadable, slice headers then say
   * only whether a picture is an IDR).
   */
  h264: { layout: Layout; lengthSize: number | null; sps: Sps | null } | null;
}

export interface AudioDetails {
  index: number;
  channels: number;
  sampleRate: number;
  /** The stream's own start time, seconds (absolute, like the container's). */
  startTime: number;
  /** The demuxer every run fixes (`-f`), when the probe was restricted (see `Opening`). */
  fixed: string | undefined;
}

/** Everything one probe learnt: the facts it reports, and what a render of any stream needs. */
export interface Probed {
  info: ProbeInfo;
  /** The demuxer every later run fixes (`-f`): set when the probe was restricted. */
  fixed: string | undefined;
  video: Map<number, VideoDetails>;
  /** The audio streams by index, in stream order (the envelope is built from one of them). */
  audio: Map<number, AudioDetails>;
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

/**
 * How a file is opened (DESIGN §5a, core/containers.ts): FFmpeg's detection, limited to the
 * `allowed` demuxers when given (a server's job; omitted: any, the user's own files), or one
 * `format` fixed without detection (the later steps of a restricted job: the one its probe found).
 */
export type Opening = { allowed?: readonly string[] } | { format: string };

/**
 * The last probe, keyed by path, size and mtime: a job probes once to plan and again to render.
 * The render's opening fixes the demuxer the plan's probe detected, so it reuses that probe.
 */
let lastProbe: { key: string; opening: Opening; probed: Promise<Probed> } | undefined;

export async function probeFile(path: string, opening: Opening = {}): Promise<Probed> {
  const s = await stat(path).catch(() => null);
  const key = s ? `${path}\0${s.size}\0${s.mtimeMs}` : '';
  const last = lastProbe;
  if (key && last?.key === key) {
    if (sameOpening(last.opening, opening)) return last.probed;
    if ('format' in opening && (await last.probed.catch(() => null))?.fixed === opening.format) {
      return last.probed;
    }
  }
  const probed = probeUncached(path, opening);
  if (key) {
    const entry = { key, opening, probed };
    lastProbe = entry;
    probed.catch(() => {
      if (lastProbe === entry) lastProbe = undefined;
    });
  }
  return probed;
}

function sameOpening(a: Opening, b: Opening): boolean {
  if ('format' in a || 'format' in b) return 'format' in a && 'format' in b && a.format === b.format;
  return a.allowed?.join('\n') === b.allowed?.join('\n');
}

/** The details a render of `stream` needs; the stream must be one the probe found. */
export function videoDetails(probed: Probed, stream: number): VideoDetails {
  const details = probed.video.get(stream);
  if (!details) throw new EngineError('render_failed', `stream ${stream} is not a video stream of the file`);
  return details;
}

async function probeUncached(path: string, opening: Opening): Promise<Probed> {
  const { code, stdout } = await run(
    'ffprobe',
    [
      ...['-v', 'error', '-print_format', 'json', '-show_format', '-show_streams', '-show_programs'],
      '-show_data',
      ...firstInput(path, opening),
    ],
    { timeoutMs: 60_000 },
  );
  let parsed: {
    streams?: StreamJson[];
    format?: { duration?: string; start_time?: string; format_name?: string };
    programs?: Array<{ program_id?: number; streams?: Array<{ index?: number }> }>;
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
  // FFmpeg's whitelist refused any other demuxer before it read the file; this is the rule itself.
  const allowed = 'allowed' in opening ? opening.allowed : undefined;
  if (!containerAllowed(formatName, allowed)) {
    throw new EngineError('unreadable_video', `the container format (${formatName}) is not allowed here`);
  }
  // Restricted: every later run fixes the demuxer this probe detected, never detecting again.
  const fixed = 'format' in opening ? opening.format : allowed ? formatName : undefined;
  const sampleTable = /\b(mov|mp4)\b/.test(formatName);
  const video = streams.filter((s) => s.codec_type === 'video');
  const audio = streams.filter((s) => s.codec_type === 'audio');
  // The ids of the programs (MPEG-TS services) that list each stream.
  const programs = (index: number) =>
    (parsed.programs ?? []).flatMap((p) =>
      p.program_id !== undefined && p.streams?.some((s) => s.index === index) ? [p.program_id] : [],
    );

  const [decodes, ends] = await Promise.all([
    Promise.all(
      video.map((s) => (s.disposition?.attached_pic ? false : decodesAFrame(path, fixed, s.index))),
    ),
    readableEnds(path, fixed, [...video, ...audio], { declared, startTime, sampleTable }),
  ]);

  const details = new Map<number, VideoDetails>();
  const facts: VideoStreamFacts[] = video.map((s, i) => {
    const tb = ratio(s.time_base) ?? [1, 1_000_000];
    const readableEnd = ends.get(s.index) ?? null;
    // The codec extradata as the demuxer filled it while probing (Annex B parameter sets in
    // MPEG-TS and PS too), as the native engine reads it.
    const extradata = fromHexdump(s.extradata ?? '');
    const sps = s.codec_name === 'h264' ? extradataSps(extradata) : null;
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
      referenceReach: reachSeconds(s, sps),
      demuxer: formatName,
      fixed,
      indexed: /\b(mov|mp4|matroska|webm|avi|flv)\b/.test(formatName),
      sampleTable,
      nal: sampleTable ? nalLayout(s) : null,
      h264: h264Reading(s, h264Layout(sampleTable, formatName), extradata, sps),
    });
    return {
      index: s.index,
      ...displaySize(s),
      isDefault: s.disposition?.default === 1,
      attachedPic: s.disposition?.attached_pic === 1,
      frames: frameCount(s, declared),
      decodes: decodes[i] === true,
      readableEnd,
      programs: programs(s.index),
    };
  });
  const audioEnds = audio.map((s) => ends.get(s.index)).filter((e): e is number => e !== undefined);
  return {
    fixed,
    info: {
      format: formatName,
      duration: declared,
      startTime,
      videoStreams: facts,
      hasAudio: audio.length > 0,
      audioStreams: audio.map((s) => ({ index: s.index, programs: programs(s.index) })),
      audioEnd: audioEnds.length ? Math.max(...audioEnds) : null,
    },
    video: details,
    audio: new Map(
      audio.map((s) => [
        s.index,
        {
          index: s.index,
          channels: s.channels ?? 1,
          sampleRate: num(s.sample_rate) ?? 48000,
          startTime: num(s.start_time) ?? startTime,
          fixed,
        },
      ]),
    ),
  };
}

/**
 * The input arguments of every run: local files only, whatever the file's playlist or links say;
 * with `fixed`, that demuxer and no detection (the whitelist is defence in depth: it also binds
 * any file a demuxer would open inside this one).
 */
export const input = (path: string, fixed: string | undefined) => [
  '-protocol_whitelist',
  'file',
  ...(fixed === undefined ? [] : ['-f', fixed, '-format_whitelist', fixed]),
  '-i',
  path,
];

/**
 * The probe's own run. Restricted, FFmpeg's detection picks the demuxer and its format whitelist
 * refuses any other before the demuxer reads the file: a playlist is never followed, not even to
 * be refused afterwards.
 */
function firstInput(path: string, opening: Opening): string[] {
  if ('format' in opening) return input(path, opening.format);
  const whitelist = opening.allowed ? ['-format_whitelist', opening.allowed.join(',')] : [];
  return ['-protocol_whitelist', 'file', ...whitelist, '-i', path];
}

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

/** See VideoDetails.referenceReach: the rule's frame durations, in seconds. */
function reachSeconds(s: StreamJson, sps: Sps | null): number {
  const rate = ratio(s.avg_frame_rate) ?? ratio(s.r_frame_rate) ?? [25, 1];
  const frames = referenceReach(s.codec_name ?? '', sps?.maxNumRefFrames ?? null, num(s.has_b_frames) ?? 0);
  return (frames * rate[1]) / rate[0];
}

/** Length-prefixed H.264/HEVC in MP4/MOV: where each packet's NAL unit headers can be read. */
function nalLayout(s: StreamJson): VideoDetails['nal'] {
  const progressive = s.field_order === 'progressive';
  if (s.codec_name === 'h264' && s.is_avc === 'true') {
    return { codec: 'h264', lengthSize: num(s.nal_length_size) ?? 4, progressive };
  }
  return s.codec_name === 'hevc' ? { codec: 'hevc', lengthSize: 4, progressive } : null;
}

/** Where leading-bytes.ts finds a packet's bytes in this container; null where it cannot. */
function h264Layout(sampleTable: boolean, formatName: string): Layout | null {
  if (sampleTable) return 'sample';
  if (/\bmpegts\b/.test(formatName)) return 'transport';
  if (/\bmpeg\b/.test(formatName)) return 'program';
  return /\bmatroska\b/.test(formatName) ? 'block' : null;
}

/** See VideoDetails.h264: the layouts leading-bytes.ts reads, the SPS from the extradata. */
function h264Reading(
  s: StreamJson,
  layout: Layout | null,
  extradata: Buffer,
  sps: Sps | null,
): VideoDetails['h264'] {
  if (s.codec_name !== 'h264' || layout === null) return null;
  // avcC (MP4) says how long its length prefixes are; Annex B (MPEG-TS, PS) has start codes.
  const lengthSize = extradata[0] === 1 && extradata.length > 4 ? ((extradata[4] as number) & 3) + 1 : null;
  if (layout !== 'transport' && layout !== 'program' && lengthSize === null) return null;
  return { layout, lengthSize, sps };
}

/**
 * Whether a frame of `stream` decodes: its first few packets, then (a stream opening mid-GOP, as
 * broadcast captures do) up to 300, decoded until the end of that read; the decoder is flushed, so
 * B-frame delay does not hide a frame.
 */
async function decodesAFrame(path: string, fixed: string | undefined, stream: number): Promise<boolean> {
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
        ...input(path, fixed),
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
 * declared duration is wrong or missing), the packets are listed from the start instead; so they
 * are when it ends clearly short of the declared end (beyond DESIGN §2's tolerance): the file is
 * cut, and a demuxer whose seek lands past the data may stamp the packets it then reads with the
 * times the seek asked for (MXF does: its index table gives the time, the bytes are the first ones).
 */
async function readableEnds(
  path: string,
  fixed: string | undefined,
  streams: StreamJson[],
  { declared, startTime, sampleTable }: { declared: number; startTime: number; sampleTable: boolean },
): Promise<Map<number, number>> {
  const wanted = new Map(streams.map((s) => [s.index, s]));
  const at = { startTime, sampleTable };
  const tail = declared > 10 ? await packetEnds(path, fixed, wanted, at, startTime + declared - 10) : null;
  if (
    tail &&
    tail.size > 0 &&
    Math.max(...tail.values()) >= declared - extentToleranceMs(declared * 1000) / 1000
  )
    return tail;
  return (await packetEnds(path, fixed, wanted, at, null)) ?? new Map();
}

/**
 * The ends one reading gives (see readableEnds), each stream read on its own in MP4/MOV (DESIGN
 * §2): that demuxer hands the samples of all streams out by time, so a read of them all stops at
 * the first sample missing from a cut file, of any stream, though other streams' samples before
 * the cut follow it in time; a read of one stream passes the others' samples over without reading
 * them. Other demuxers read the file in order, and one read serves every stream. Null when a read
 * timed out.
 */
async function packetEnds(
  path: string,
  fixed: string | undefined,
  streams: Map<number, StreamJson>,
  at: { startTime: number; sampleTable: boolean },
  from: number | null,
): Promise<Map<number, number> | null> {
  const reads = at.sampleTable ? [...streams].map((s) => new Map([s])) : [streams];
  const ends = await Promise.all(reads.map((read) => packetRead(path, fixed, read, at, from)));
  if (ends.some((e) => e === null)) return null;
  return new Map(ends.flatMap((e) => [...(e ?? [])]));
}

/** One ffprobe packet listing of `streams` (all of the file's when more than one is asked for). */
async function packetRead(
  path: string,
  fixed: string | undefined,
  streams: Map<number, StreamJson>,
  { startTime }: { startTime: number },
  from: number | null,
): Promise<Map<number, number> | null> {
  const fileSize = (await stat(path).catch(() => null))?.size ?? Number.POSITIVE_INFINITY;
  const only = streams.size === 1 ? ['-select_streams', String([...streams.keys()][0])] : [];
  const { code, stdout } = await run(
    'ffprobe',
    [
      '-v',
      'quiet',
      // A packet the demuxer flags corrupt (the MP4 sample a cut file ends inside, handed out
      // shortened to the bytes present) is left out: FFmpeg 5.1's ffprobe does not print the flag.
      ...['-fflags', '+discardcorrupt'],
      ...(from === null ? [] : ['-read_intervals', `${from.toFixed(6)}%`]),
      ...only,
      '-show_entries',
      'packet=stream_index,pts,dts,duration,pos,size,flags',
      '-of',
      'compact=p=0',
      ...input(path, fixed),
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
    const flags = fields.get('flags') ?? '';
    ends.add(Number(fields.get('stream_index')), {
      pts: int(fields.get('pts')) ?? null,
      dts: int(fields.get('dts')) ?? null,
      duration: int(fields.get('duration')) ?? null,
      pos: num(fields.get('pos')) ?? null,
      size: num(fields.get('size')) ?? 0,
      // Left out above; an ffprobe that prints the flag says C.
      corrupt: flags.includes('C'),
      discard: flags.includes('D'),
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
