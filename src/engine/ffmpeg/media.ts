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
  /** The container's own id of the stream, in hex (MP4/MOV: its track's ID). */
  id?: string;
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
  /** The container's own id of the stream (MP4/MOV: its track's ID), null when it has none. */
  trackId: number | null;
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
  /** A bounded job's limits, which every run sets, decoding this stream only (see `input`). */
  bounds: RunBounds | undefined;
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
export type Opening = ({ allowed?: readonly string[] } | { format: string }) & { bounds?: RunBounds };

/**
 * The input arguments of every run: local files only, whatever the file's playlist or links say;
 * with `fixed`, that demuxer and no detection (the whitelist is defence in depth: it also binds
 * any file a demuxer would open inside this one).
 */
export const input = (path: string, fixed: string | undefined, bounds?: RunBounds) => [
  '-protocol_whitelist',
  'file',
  ...bounded(bounds),
  ...(fixed === undefined ? [] : ['-f', fixed, '-format_whitelist', fixed]),
  '-i',
  path,
];

/**
 * A bounded run's limits: the job's (`DecodeBounds`) and, when given, the video streams whose
 * decoders the run may start (`video`): every other video stream's decoder refuses every picture.
 */
export interface RunBounds extends DecodeBounds {
  video?: readonly number[];
  /** With `video`: the one audio stream whose decoder may run (every other one's is refused). */
  audio?: number | undefined;
  /** Or these streams refused by name, every other decoder allowed (the probe's survey). */
  refuse?: readonly number[];
}

/**
 * The `max_pixels` that refuses a video stream's decoder (see `bounded`). FFmpeg logs the refusal
 * as a picture "exceeding" this count; decode-log.ts `refusedDecoders` knows those lines by it.
 */
export const REFUSED_PIXELS = 0;
/** The `max_samples` that refuses an audio stream's decoder the same way (FFmpeg's default is the other). */
const REFUSED_SAMPLES = 0;
const MAX_SAMPLES = 2147483647;

/**
 * A bounded job's input options (DESIGN §5a): `max_streams` and every decoder's `max_pixels`; with
 * `video`, a `max_pixels` of {@link REFUSED_PIXELS} for every other video stream and a
 * `max_samples` of 0 for every audio stream but `audio` (with `refuse`, those video streams only).
 *
 * FFmpeg's stream analysis (in every ffprobe and ffmpeg run) decodes a frame of each stream it
 * lacks parameters for: eight tracks of one 5900x5900 PNG cost 855 MB per run. The native engine
 * refuses a stream's decoder at open (a `max_pixels` of -1); ffprobe cannot be told so, as it opens
 * a decoder for every stream after the analysis and exits when one fails. A `max_pixels` of 0
 * instead lets the analysis open the decoder and refuses every picture before its buffer is asked
 * for: the stream is then read from its container and parser alone, and the analysis zeroes the
 * size it had (the probe takes it from a run without analysis). Where the decoder itself puts a
 * size back (H.264 from its parameter sets) ffprobe's own open then fails, and the probe allows
 * that stream again (probe.ts `show`): it costs what it did before the bound, one picture of at
 * most `max_pixels`. The refused decoders log errors, which decode-log.ts `refusedDecoders` tells
 * from the decoded stream's. With `audio`, every other audio stream's decoder is refused the same
 * way, by a `max_samples` of 0 (the native engine decodes the file's first audio stream only too).
 */
function bounded(bounds: RunBounds | undefined): string[] {
  if (!bounds) return [];
  const pixels = String(bounds.maxPixels);
  // Later options win for the streams they name: every video stream refused, then the allowed ones.
  const audio = bounds.audio === undefined ? [] : [`-max_samples:${bounds.audio}`, String(MAX_SAMPLES)];
  const refused = bounds.video
    ? [
        ...[
          '-max_pixels:v',
          String(REFUSED_PIXELS),
          ...bounds.video.flatMap((i) => [`-max_pixels:${i}`, pixels]),
        ],
        ...['-max_samples:a', String(REFUSED_SAMPLES), ...audio],
      ]
    : (bounds.refuse ?? []).flatMap((i) => [`-max_pixels:${i}`, String(REFUSED_PIXELS)]);
  return ['-max_streams', String(MAX_STREAMS), '-max_pixels', pixels, ...refused];
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
