/**
 * What every ffmpeg/ffprobe run of the fallback shares: how it opens the file (local files only,
 * the demuxer fixed once a restricted probe found it), what ffprobe's JSON says of a stream, and
 * the details a render of a stream needs. The native engine's twin is
 * crates/vidsheet-core/src/media.rs.
 */
import type { FrameRates } from '../timestamps.js';
import { type DecodeBounds, MAX_STREAMS } from '../types.js';
import type { Sps } from './h264.js';
import type { Layout } from './leading-bytes.js';

export interface StreamJson {
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
  /** Its frame rates, for the frame step (fixtures/vectors/frame-step.json). */
  rates: FrameRates;
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
  /** A bounded job's limits, which every run sets (see `input`). */
  bounds: DecodeBounds | undefined;
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

export const num = (value: string | number | undefined): number | undefined => {
  const n = value === undefined ? Number.NaN : Number(value);
  return Number.isFinite(n) ? n : undefined;
};

export function ratio(value: string | undefined): [number, number] | undefined {
  const m = value ? /^(\d+)[:/](\d+)$/.exec(value) : null;
  return m && Number(m[1]) > 0 && Number(m[2]) > 0 ? [Number(m[1]), Number(m[2])] : undefined;
}

/** A stream's frame rates as ffprobe prints them. */
export const rates = (s: StreamJson): FrameRates => ({
  avg: ratio(s.avg_frame_rate),
  real: ratio(s.r_frame_rate),
});

export const int = (value: string | undefined) =>
  value && /^-?\d+$/.test(value) ? BigInt(value) : undefined;

/**
 * How a file is opened (DESIGN §5a, core/containers.ts): FFmpeg's detection, limited to the
 * `allowed` demuxers when given (a server's job; omitted: any, the user's own files), or one
 * `format` fixed without detection (the later steps of a restricted job: the one its probe found).
 */
export type Opening = ({ allowed?: readonly string[] } | { format: string }) & { bounds?: DecodeBounds };

/**
 * The input arguments of every run: local files only, whatever the file's playlist or links say;
 * with `fixed`, that demuxer and no detection (the whitelist is defence in depth: it also binds
 * any file a demuxer would open inside this one).
 */
export const input = (path: string, fixed: string | undefined, bounds?: DecodeBounds) => [
  '-protocol_whitelist',
  'file',
  ...bounded(bounds),
  ...(fixed === undefined ? [] : ['-f', fixed, '-format_whitelist', fixed]),
  '-i',
  path,
];

/**
 * A bounded job's input options (DESIGN §5a): `max_streams` and every decoder's `max_pixels`.
 *
 * Unlike the native engine, the fallback cannot keep FFmpeg's stream analysis from decoding a
 * frame of every stream: ffprobe opens a decoder for every stream after the analysis and exits
 * when one is refused, and in an ffmpeg run the refusal of another stream's decoder is logged at
 * error level by a codec context, which the decode log (decode-log.ts) must read as the decoder's.
 * So each run's analysis may cost up to `max_streams` pictures of at most `max_pixels`; what the
 * fallback bounds is how many runs do so at once (one: the probe's frame trials and packet reads
 * run one after another), and each run lives under the worker's memory limit, which ffprobe meets
 * by failing that stream's decode and going on (its frames are never shown).
 */
function bounded(bounds: DecodeBounds | undefined): string[] {
  if (!bounds) return [];
  return ['-max_streams', String(MAX_STREAMS), '-max_pixels', String(bounds.maxPixels)];
}

/**
 * The probe's own run. Restricted, FFmpeg's detection picks the demuxer and its format whitelist
 * refuses any other before the demuxer reads the file: a playlist is never followed, not even to
 * be refused afterwards.
 */
export function firstInput(path: string, opening: Opening): string[] {
  if ('format' in opening) return input(path, opening.format, opening.bounds);
  const whitelist = opening.allowed ? ['-format_whitelist', opening.allowed.join(',')] : [];
  return ['-protocol_whitelist', 'file', ...bounded(opening.bounds), ...whitelist, '-i', path];
}
