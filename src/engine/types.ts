/**
 * The Engine interface: the only thing the job runner knows about decoding.
 *
 * TypeScript decides every rule (window, sampling plan, labels, pixel layout, colours: see
 * core/render-plan.ts, which also states the frame rule); an engine only executes a finished plan:
 * it seeks, decodes, scales, paints and encodes. Two engines implement it: the native addon
 * (crates/vidsheet-node) and the ffmpeg/ffprobe fallback.
 */
import type { AudioPeaks, MsRange } from '../core/audio.js';
import type { PacketLog } from '../core/packet-log.js';
import type { AudioStreamFacts, VideoStreamFacts } from '../core/probe.js';
import type { RenderPlan } from '../core/render-plan.js';

export type { AudioPeaks, MsRange } from '../core/audio.js';
export type { PacketLog } from '../core/packet-log.js';
export type { AudioStreamFacts, VideoStreamFacts } from '../core/probe.js';
export type {
  BandPlan,
  CellPlan,
  HintPackets,
  LabelPlan,
  Rect,
  RenderPlan,
  Rgb,
  Rgba,
  SheetPlan,
  Theme,
} from '../core/render-plan.js';

/** What an engine learns from opening the file. */
export interface ProbeInfo {
  /**
   * The demuxer FFmpeg opened the file with, as FFmpeg names it (`format_name`, e.g.
   * `mov,mp4,m4a,3gp,3g2,mj2`). A restricted job opens every later step with exactly this one.
   */
  format: string;
  /** Duration the container declares, seconds (format duration); 0 when it declares none. */
  duration: number;
  /** Container start time in seconds (what ffprobe prints as format start_time); 0 when unknown. */
  startTime: number;
  /** Every video stream, in stream order (attached pictures included, flagged). */
  videoStreams: VideoStreamFacts[];
  /** True when the file has at least one audio stream. */
  hasAudio: boolean;
  /** Every audio stream, in stream order (core/probe.ts `chooseAudioStream` picks one). */
  audioStreams: AudioStreamFacts[];
  /** The latest readable end of any audio stream (as `readableEnd` above); null without audio or when unknown. */
  audioEnd: number | null;
}

/** Each sheet's band levels, by sheet index (undefined: the sheet's band has no bars). */
export type BandLevels = Array<number[] | undefined>;

export interface RenderResult {
  /** Cells whose frame could not be decoded (left black, still labelled). Indices are 0-based. */
  unreadable: Array<{ sheet: number; cell: number }>;
  /** Work counters for benchmarks (engines fill what they can measure). */
  stats?: { decodedFrames?: number };
  /**
   * Per cell, sheets in order: the presentation time of the frame the cell shows, seconds on the
   * labels' clock (pts minus the container start), unrounded; null for an unreadable cell.
   * core/zoom.ts rounds it for the reports' `frame_times`.
   */
  frameTimes: Array<number | null>;
  /** The video packets read on the way to the cells (headers only): the zoom hints' material. */
  packets: PacketLog;
}

/**
 * Failure codes an engine may raise (as `err.code`); the job runner maps them to messages. The one
 * list is the native engine's `ErrorCode` (crates/vidsheet-core/src/error.rs); native.ts checks at
 * compile time that this is the same set as the binding's generated declarations.
 */
export const ENGINE_ERROR_CODES = ['unreadable_video', 'input_not_found', 'render_failed'] as const;
export type EngineErrorCode = (typeof ENGINE_ERROR_CODES)[number];

export class EngineError extends Error {
  constructor(
    readonly code: EngineErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'EngineError';
  }
}

/**
 * What decoding a server's job may cost (DESIGN §5a "Decode cost is bounded before and during a
 * job"): every open sets FFmpeg's `max_pixels` to `maxPixels` and `max_streams` to
 * {@link MAX_STREAMS}, and starts decoders for one video stream and one audio stream only. The
 * local surfaces pass none: their files are the user's own, opened as the user's FFmpeg opens them.
 */
export interface DecodeBounds {
  maxPixels: number;
}

/** FFmpeg's `max_streams` of a bounded open (crates/vidsheet-core/src/media.rs has the same). */
export const MAX_STREAMS = 32;

export interface Engine {
  readonly name: 'native' | 'ffmpeg';
  /**
   * Opens the file and reports its facts. With `allowed` (a server's job, core/containers.ts), the
   * demuxer FFmpeg's detection picks must be on that list, judged before it reads anything of the
   * file beyond the detection's own bytes: any other rejects `unreadable_video` and opens nothing.
   * With `bounds`, a file over them is `unreadable_video`, and only the stream the stream rule
   * picks (and, before it, any better candidate that did not decode) is tried for a frame: the
   * other streams report `decodes: false` (engine/focus.ts).
   */
  probe(path: string, allowed?: readonly string[], bounds?: DecodeBounds): Promise<ProbeInfo>;
  /**
   * Decodes the whole audio stream `stream` (core/probe.ts `chooseAudioStream`; omitted, or not an
   * audio stream of the file: the first) and measures it (core/audio.ts `AudioPeaks`): raw peaks
   * per ms over `range` (container-relative, integer ms), samples placed by their timestamps (from
   * the pts of the frame that resynchronised the count, counting samples from there; a frame whose
   * pts strays more than 2 ms from the count starts a new origin, so a gap stays a gap), and the
   * peak of the whole clip. Never fails on the media: no decodable audio gives `present: false`.
   * When `signal` aborts, rejects once nothing it started still runs. `format`, when given, is the
   * demuxer the file is opened with (no detection), as `RenderPlan.inputFormat`.
   */
  audioPeaks(
    path: string,
    range: MsRange,
    signal?: AbortSignal,
    format?: string,
    stream?: number,
  ): Promise<AudioPeaks>;
  /**
   * One call per job: writes every sheet of the plan. When `signal` aborts, the render stops and
   * rejects, but only once nothing it started still writes into `plan.tempDir`, so the caller may
   * remove that directory as soon as this settles.
   *
   * `bandLevels`, when given, completes the plan while the render runs: sheet s's band levels are
   * `(await bandLevels)[s]` (core/audio.ts computes them from `audioPeaks`, which the caller runs
   * alongside), in place of the plan's own. An engine awaits it before painting a band; if it
   * rejects, the render stops and rejects with its reason.
   */
  render(
    plan: RenderPlan,
    onProgress?: (done: number, total: number) => void,
    signal?: AbortSignal,
    bandLevels?: Promise<BandLevels>,
  ): Promise<RenderResult>;
}
