/**
 * The Engine interface: the only thing the job runner knows about decoding.
 *
 * TypeScript decides every rule (window, sampling plan, labels, pixel layout, colours: see
 * core/render-plan.ts, which also states the frame rule); an engine only executes a finished plan:
 * it seeks, decodes, scales, paints and encodes. Two engines implement it: the native addon
 * (crates/vidsheet-node) and the ffmpeg/ffprobe fallback.
 */
import type { VideoStreamFacts } from '../core/probe.js';
import type { RenderPlan } from '../core/render-plan.js';

export type { VideoStreamFacts } from '../core/probe.js';

export type {
  AudioPlan,
  BandPlan,
  CellPlan,
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
  /** Duration the container declares, seconds (format duration); 0 when it declares none. */
  duration: number;
  /** Container start time in seconds (what ffprobe prints as format start_time); 0 when unknown. */
  startTime: number;
  /** Every video stream, in stream order (attached pictures included, flagged). */
  videoStreams: VideoStreamFacts[];
  /** True when the file has at least one audio stream. */
  hasAudio: boolean;
  /** The latest readable end of any audio stream (as `readableEnd` above); null without audio or when unknown. */
  audioEnd: number | null;
}

export interface AudioEnvelope {
  /** False when the file has no decodable audio track. */
  present: boolean;
  /**
   * Peak absolute amplitude per millisecond of the mono downmix, divided by the peak of the whole
   * clip (so 0..1), one value per ms of the plan's audio window: index i covers
   * [startMs + i, startMs + i + 1). All zeros for a silent track; empty when not present.
   */
  envelope: Float32Array;
}

export interface RenderResult {
  /** Cells whose frame could not be decoded (left black, still labelled). Indices are 0-based. */
  unreadable: Array<{ sheet: number; cell: number }>;
  /** Present when the plan asked for audio. */
  audio: AudioEnvelope | null;
  /** Work counters for benchmarks (engines fill what they can measure). */
  stats?: { decodedFrames?: number };
}

/** Failure codes an engine may raise (as `err.code`); the job runner maps them to messages. */
export type EngineErrorCode = 'unreadable_video' | 'input_not_found' | 'render_failed';

export class EngineError extends Error {
  constructor(
    readonly code: EngineErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'EngineError';
  }
}

export interface Engine {
  readonly name: 'native' | 'ffmpeg';
  probe(path: string): Promise<ProbeInfo>;
  /**
   * One call per job: writes every sheet of the plan. When `signal` aborts, the render stops and
   * rejects, but only once nothing it started still writes into `plan.tempDir`, so the caller may
   * remove that directory as soon as this settles.
   */
  render(
    plan: RenderPlan,
    onProgress?: (done: number, total: number) => void,
    signal?: AbortSignal,
  ): Promise<RenderResult>;
}
