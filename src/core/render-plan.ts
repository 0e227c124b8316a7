/**
 * The render plan: everything an engine needs to draw a job's sheets, decided by TypeScript rules
 * (window, sampling plan, layout, theme) before any engine runs. Engines only execute it.
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
 * The levels are decided in TypeScript (core/audio.ts `bandLevels`, from the engine's raw peaks):
 * pixel column c in [0, rect.w) covers [startMs + c*span/w, startMs + (c+1)*span/w) with
 * span = endMs - startMs, and `levels[c]` is the clip-peak-normalised level (0..1) of the loudest
 * 1 ms bin that range touches (at least one bin: floor(from) .. max(floor(from)+1, ceil(to))).
 *
 * Painting rule, identical in both engines: fill `rect` with `theme.bandBackground`. If `message`
 * is set (no audio track), draw that label and nothing else. Otherwise, for every pixel column c in
 * [0, rect.w), with level = levels[c] (0 when absent): draw a bar from the bottom of the rect of
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
  /**
   * One level (0..1) per pixel column of `rect.w`, computed by core/audio.ts from the engine's raw
   * peaks (the layout leaves it out). The job runner hands it to `Engine.render` as `bandLevels`,
   * which takes the place of this field, so the render need not wait for the audio to start;
   * absent or short: the missing columns have no bar.
   */
  levels?: number[];
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

export interface RenderPlan {
  /** Absolute input path. */
  input: string;
  /**
   * The demuxer to open the input with, without detecting it again (a restricted job: the one its
   * probe detected and allowed, core/containers.ts); omitted: FFmpeg detects it.
   */
  inputFormat?: string;
  /**
   * FFmpeg's `max_pixels` for every decoder of the job, with `max_streams` 32 for every open and
   * decoders for the plan's stream only (DESIGN §5a, a server's job); omitted: FFmpeg's own
   * limits (the local surfaces).
   */
  maxPixels?: number;
  /** Video stream index from the probe. */
  videoStream: number;
  /** TTF file used for every label (bundled DejaVu Sans Mono). */
  fontPath: string;
  /** JPEG quality, 1..100 (70 on every surface). */
  quality: number;
  theme: Theme;
  sheets: SheetPlan[];
  /** Directory the engine may use for intermediate files; removed by the caller. */
  tempDir: string;
  /**
   * The window's end (ms, the cells' clock): decoded after the last cell and not drawn, so the
   * frames of the gap after it are decoded too, for the zoom hints' `picture` (DESIGN §10: a gap
   * none of whose frames were decoded has none, and nothing else decodes that one).
   */
  closingMs?: number;
  /**
   * The part of the clip whose packets the zoom hints read (ms, the cells' clock; core/zoom.ts
   * hintPacketSpan): an engine need list no packet outside it; an end omitted is the clip's own.
   * Omitted: the whole clip.
   */
  hintPackets?: HintPackets;
}

/** A part of the clip (ms, the cells' clock); an end omitted is the clip's own. */
export interface HintPackets {
  fromMs?: number;
  toMs?: number;
}
