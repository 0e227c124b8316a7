/**
 * The Engine interface: the only thing the job runner knows about decoding.
 *
 * TypeScript decides every rule (window, sampling plan, labels, pixel layout, colours); an engine
 * only executes a finished plan: it seeks, decodes, scales, paints and encodes. Two engines
 * implement it: the native addon (crates/vidsheet-node) and the ffmpeg/ffprobe fallback.
 *
 * The frame rule both engines follow (DESIGN §2): the frame shown for `timeMs` is the frame being
 * displayed at that time, i.e. the last frame whose presentation time is <= target, where
 * target = container start_time + timeMs. Compared exactly, in integers:
 *   pts * tb.num * 1_000_000 <= (startUs + timeMs * 1000) * tb.den
 * with startUs the container start_time in microseconds (0 when unknown). A target before the first
 * frame shows the first frame; a target after the last frame shows the last frame. Never a keyframe
 * snap.
 */

/** An sRGB colour, `[r, g, b]` or `[r, g, b, a]`, each 0..255 (alpha 255 = opaque). */
export type Rgb = [number, number, number];
export type Rgba = [number, number, number, number];

export interface Rect {
  x: number;
  y: number;
  w: number;
  h: number;
}

/** What an engine learns from opening the file. */
export interface ProbeInfo {
  /** Duration of the whole container in seconds (format duration). */
  duration: number;
  /** Container start time in seconds (what ffprobe prints as format start_time); 0 when unknown. */
  startTime: number;
  /** Index of the video stream used (the "best" video stream, not necessarily stream 0). */
  videoStream: number;
  /** Display size in pixels after sample aspect ratio and rotation (display matrix) are applied. */
  width: number;
  height: number;
  /** True when the file has at least one audio stream. */
  hasAudio: boolean;
}

/** A timecode label: a filled box and text drawn on top of it. */
export interface LabelPlan {
  text: string;
  box: Rect;
  /** Left edge of the first glyph's advance box. */
  textX: number;
  /** Baseline of the text. */
  baselineY: number;
  /** Font size in pixels (the em size handed to the rasteriser). */
  fontSize: number;
}

export interface CellPlan {
  /** Sample time in ms, relative to the container start time (see the frame rule above). */
  timeMs: number;
  /** Where the frame goes, scaled to exactly this size (display aspect already accounted for). */
  rect: Rect;
  label: LabelPlan;
}

/**
 * The audio-activity band above the grid (local surfaces only).
 *
 * Painting rule, identical in both engines: fill `rect` with `theme.bandBackground`. If `message`
 * is set (no audio track), draw that label and nothing else. Otherwise, for every pixel column c in
 * [0, rect.w): it covers [startMs + c*span/w, startMs + (c+1)*span/w) with span = endMs - startMs;
 * its level is the max of the normalised 1 ms envelope over the bins that range touches (at least
 * one bin: floor(from) .. max(floor(from)+1, ceil(to))). Draw a bar from the bottom of the rect of
 * height round(level * (rect.h - 4)) in `theme.bandLevel`, or `theme.bandPeak` when
 * level >= theme.peakThreshold, in which case also fill the top 3 px of that column with
 * `theme.bandPeak` (the peak marker). Then, for each tick, a 1 px wide vertical line of height
 * ceil(rect.h / 4) at the bottom of the rect, at x = rect.x + floor((tick - startMs) * w / span),
 * in `theme.bandTick`.
 */
export interface BandPlan {
  rect: Rect;
  startMs: number;
  endMs: number;
  /** Cell sample times on this sheet (ms, container-relative), marked as ticks. */
  ticksMs: number[];
  /** When set, the clip has no audio: draw this label instead of levels. */
  message: LabelPlan | null;
}

export interface SheetPlan {
  /** Absolute output path of the JPEG. */
  path: string;
  width: number;
  height: number;
  /** Cells in time order (left to right, top to bottom). */
  cells: CellPlan[];
  band: BandPlan | null;
}

export interface Theme {
  background: Rgb;
  labelBox: Rgba;
  labelText: Rgb;
  bandBackground: Rgb;
  bandLevel: Rgb;
  bandPeak: Rgb;
  bandTick: Rgb;
  /** Normalised level at or above which a band column counts as a peak. */
  peakThreshold: number;
}

/** Audio work requested with the render (local surfaces). */
export interface AudioPlan {
  /** Window the returned envelope covers, ms relative to the container start time. */
  startMs: number;
  endMs: number;
}

export interface RenderPlan {
  /** Absolute input path. */
  input: string;
  /** Video stream index from the probe. */
  videoStream: number;
  /** TTF file used for every label (bundled DejaVu Sans Mono). */
  fontPath: string;
  /** JPEG quality, 1..100 (70 on every surface). */
  quality: number;
  theme: Theme;
  sheets: SheetPlan[];
  /** Null on visual-only surfaces (hosted, remote): no audio is decoded and no band drawn. */
  audio: AudioPlan | null;
  /** Directory the engine may use for intermediate files; removed by the caller. */
  tempDir: string;
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
  /** One call per job: writes every sheet of the plan. */
  render(plan: RenderPlan, onProgress?: (done: number, total: number) => void): Promise<RenderResult>;
}
