/**
 * The job runner shared by every surface: validate -> probe -> plan -> render -> report.
 *
 * Adapters parse their own input (each surface words a bad time value its own way) and shape the
 * outcome with core/report.ts; everything in between happens here, once.
 *
 * A job owns what it makes: its temporary directory and, through the engine, its child processes.
 * On success, failure or abort it stops its children, waits for them to exit, then removes the
 * directory. Nothing is process-global, so a server can run jobs side by side and abort one.
 */
import { mkdir, mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, parse, resolve } from 'node:path';
import { type AudioPeaks, audioReport, peaksRange, withBandLevels } from './core/audio.js';
import { allowedContainers, type Containers } from './core/containers.js';
import type { Density } from './core/density.js';
import { hostedErrors, runtimeErrors, VidsheetError } from './core/errors.js';
import { computeGrid, JPEG_QUALITY, layoutSheets, THEME } from './core/layout.js';
import { makePlan, type SamplingPlan } from './core/plan.js';
import { chooseAudioStream, chooseVideoStream, clipExtent } from './core/probe.js';
import type { SheetPlan } from './core/render-plan.js';
import type { JobOutcome } from './core/report.js';
import { resolveWindow, type Window } from './core/window.js';
import { hintPacketSpan, reportedFrameTime, zoomHints } from './core/zoom.js';
import { labelFontPath } from './engine/font.js';
import { selectEngine } from './engine/index.js';
import { refuseCompressedMovieHeader } from './engine/movie-header.js';
import {
  ENGINE_ERROR_CODES,
  type Engine,
  type EngineErrorCode,
  type ProbeInfo,
  type RenderResult,
} from './engine/types.js';

export interface JobRequest {
  /** Path to the video; resolved against the working directory. */
  input: string;
  density: Density;
  /** Parsed window bounds in ms; undefined when not given. */
  startMs?: number;
  endMs?: number;
  /** Output directory; defaults to the input's directory. */
  outDir?: string;
  /** How reports and messages name the input; defaults to its absolute path (local surfaces). */
  inputName?: string;
  /**
   * What an earlier probe of this same file found, with the same `containers` option (a kept video,
   * DESIGN §9): used instead of probing again.
   */
  probe?: ProbeInfo;
}

export interface JobOptions {
  engine?: Engine;
  /** Local surfaces draw the audio band and report `audio`; hosted/remote are visual only. */
  audio: boolean;
  /** Sheet file base name; local uses the input's name, hosted/remote use `video`. */
  baseName?: string;
  /** Cap on sheets (hosted/remote); local has none. */
  maxSheets?: number;
  /** Cap on the clip's duration, seconds (hosted/remote: `422 too_long`); local has none. */
  maxDurationS?: number;
  /**
   * Which containers the input may be opened as (core/containers.ts): `restricted` on the hosted
   * server and the remote endpoint; local surfaces leave it `any` (default).
   */
  containers?: Containers;
  /**
   * FFmpeg's `max_pixels` for every decoder of the job, `max_streams` 32, decoders for the chosen
   * streams only (DESIGN §5a, engine/types.ts `DecodeBounds`): the hosted server and the remote
   * endpoint pass `VIDSHEET_MAX_PIXELS`; local surfaces leave it unset (their files are the
   * user's own, opened as the user's FFmpeg opens them, like the containers above). With it, a
   * file holding a compressed movie header is refused before any open (core/movie-header.ts).
   */
  maxPixels?: number;
  onProgress?: (done: number, total: number) => void;
  /** Stops the job: children are killed and awaited, then the temporary directory is removed. */
  signal?: AbortSignal;
  /** Where the job's temporary directory is made (default: the OS temp directory). */
  workDir?: string;
  /** Receives the engine's work counters (benchmarks). */
  onStats?: (stats: NonNullable<RenderResult['stats']>) => void;
  /** How many zoom hints to keep (benchmarks that rank every gap); DESIGN §10's five otherwise. */
  hintLimit?: number;
}

/**
 * A job that has been probed and planned but not rendered: its price is known and no frame has
 * been extracted yet (the hosted surfaces charge here, between the two steps).
 */
export interface PreparedJob {
  /** Full clip duration in ms. */
  durationMs: number;
  /** What the probe found (to be handed back as `JobRequest.probe` for the same file). */
  probe: ProbeInfo;
  plan: SamplingPlan;
  /** Sheet paths the render will write, in order. */
  files: string[];
  render(): Promise<JobOutcome>;
}

export async function runJob(request: JobRequest, options: JobOptions): Promise<JobOutcome> {
  return (await prepareJob(request, options)).render();
}

/** Validate, probe and plan (rules in their spec order); `render()` does the rest. */
export async function prepareJob(request: JobRequest, options: JobOptions): Promise<PreparedJob> {
  const input = resolve(request.input);
  const inputName = request.inputName ?? input;
  const info = await stat(input).catch(() => null);
  if (!info?.isFile()) throw runtimeErrors.inputNotFound(inputName);
  options.signal?.throwIfAborted();

  const engine = options.engine ?? selectEngine();
  const allowed = allowedContainers(options.containers);
  const bounds = options.maxPixels === undefined ? undefined : { maxPixels: options.maxPixels };
  const probe =
    request.probe ??
    (await (async () => {
      // A compressed movie header would make FFmpeg inflate what the file declares on every open:
      // refused before either engine opens the file (DESIGN §5a, core/movie-header.ts).
      if (bounds) await refuseCompressedMovieHeader(input);
      return engine.probe(input, allowed, bounds);
    })().catch((error) => {
      throw engineFailure(error, inputName);
    }));
  // Restricted: every later open fixes the demuxer the probe detected and allowed.
  const inputFormat = allowed ? probe.format : undefined;
  options.signal?.throwIfAborted();
  const stream = chooseVideoStream(probe.videoStreams);
  if (!stream) throw runtimeErrors.unreadableVideo(inputName);
  const extent = clipExtent(probe.duration, stream, probe.audioEnd);
  const durationMs = extent.durationMs;
  if (durationMs <= 0) throw runtimeErrors.unreadableVideo(inputName);
  if (options.maxDurationS !== undefined && durationMs > options.maxDurationS * 1000) {
    throw hostedErrors.tooLong(options.maxDurationS);
  }
  const window = resolveWindow(
    { startMs: request.startMs, endMs: request.endMs },
    durationMs,
    request.density,
  );
  const plan = makePlan(window, request.density, options.maxSheets);
  const outDir = resolve(request.outDir ?? parse(input).dir);
  const baseName = options.baseName ?? parse(input).name;
  const files = plan.sheets.map((_, i) => join(outDir, `${baseName}.sheet-${i + 1}.jpg`));

  const render = async (): Promise<JobOutcome> => {
    options.signal?.throwIfAborted();
    await mkdir(outDir, { recursive: true });
    const grid = computeGrid(stream.width, stream.height, request.density, options.audio);
    const sheets = layoutSheets({
      grid,
      sheets: plan.sheets,
      window,
      paths: files,
      hasAudio: probe.hasAudio,
    });
    const workDir = options.workDir ?? tmpdir();
    await mkdir(workDir, { recursive: true });
    const tempDir = await mkdtemp(join(workDir, 'vidsheet-'));
    // Audio alongside the video: the engine measures raw peaks, core/audio.ts alone turns them into
    // the bands' column levels (handed to the render as they come) and the report's levels. The
    // measurement has its own stop, so a failed render does not leave it running.
    const audioStop = new AbortController();
    const stopAudio = () => audioStop.abort(options.signal?.reason ?? new Error('job stopped'));
    options.signal?.addEventListener('abort', stopAudio, { once: true });
    const measuring = options.audio
      ? measureAudio(
          engine,
          { input, inputFormat },
          inputName,
          window,
          sheets,
          chooseAudioStream(stream, probe.audioStreams),
          audioStop.signal,
        )
      : undefined;
    const bandLevels = measuring?.then((audio) => withBandLevels(sheets, audio).map((s) => s.band?.levels));
    // Both are awaited below (or by the render); a rejection is the job's failure, not unhandled.
    measuring?.catch(() => {});
    bandLevels?.catch(() => {});
    const hintPackets = hintPacketSpan(window, durationMs);
    try {
      const result = await engine
        .render(
          {
            input,
            ...(inputFormat === undefined ? {} : { inputFormat }),
            ...(bounds === undefined ? {} : { maxPixels: bounds.maxPixels }),
            videoStream: stream.index,
            fontPath: labelFontPath(),
            quality: JPEG_QUALITY,
            theme: THEME,
            sheets,
            tempDir,
            // The gap after the last cell, decoded for its pictures: a window that ends inside
            // the clip (a window ending at the clip's end would decode on into its last, often
            // damaged or half-written, pictures for one half-slot).
            ...(window.endMs < durationMs ? { closingMs: window.endMs } : {}),
            ...(hintPackets === undefined ? {} : { hintPackets }),
          },
          options.onProgress,
          options.signal,
          bandLevels,
        )
        .catch((error) => {
          // An abort is the caller's own doing: its reason, not an engine failure.
          if (options.signal?.aborted) throw options.signal.reason;
          throw engineFailure(error, inputName);
        });
      const audio = measuring ? await measuring : null;
      if (result.stats) options.onStats?.(result.stats);
      const requestedWindow = request.startMs !== undefined || request.endMs !== undefined;
      // Cell k of the run (sheets in order) is frameTimes[k].
      const cells = plan.sheets.flat().map((c, k) => ({ ...c, frameTime: result.frameTimes[k] ?? null }));
      const perSheet = plan.sheets[0]?.length ?? 0;
      return {
        input: inputName,
        duration: durationMs / 1000,
        ...(requestedWindow ? { window } : {}),
        frames: plan.sheets.length * (plan.sheets[0]?.length ?? 0),
        files,
        timecodes: plan.sheets.map((cells) => cells.map((c) => c.label)),
        warnings: [
          ...(extent.warning ? [extent.warning] : []),
          ...result.unreadable.map(({ sheet, cell }) => `sheet ${sheet + 1} frame ${cell + 1} unreadable`),
        ],
        ...(audio ? { audio: audioReport(window, audio) } : {}),
        frameTimes: plan.sheets.map((_, s) =>
          cells.slice(s * perSheet, (s + 1) * perSheet).map((c) => reportedFrameTime(c.frameTime)),
        ),
        zoomHints: zoomHints({
          cells,
          window,
          decimals: plan.decimals,
          container: probe.format,
          packets: result.packets,
          audio,
          ...(options.hintLimit === undefined ? {} : { limit: options.hintLimit }),
        }),
      };
    } finally {
      // The engines settle only once none of their children runs, so nothing writes here any more.
      stopAudio();
      await measuring?.catch(() => {});
      options.signal?.removeEventListener('abort', stopAudio);
      await rm(tempDir, { recursive: true, force: true });
    }
  };
  return { durationMs, probe, plan, files, render };
}

/**
 * The engine's raw audio peaks of `audioStream` (core/probe.ts `chooseAudioStream`) over every ms
 * the report and the bands read. A file without an audio stream is not decoded at all.
 */
async function measureAudio(
  engine: Engine,
  { input, inputFormat }: { input: string; inputFormat: string | undefined },
  inputName: string,
  window: Window,
  sheets: SheetPlan[],
  audioStream: number | null,
  signal: AbortSignal | undefined,
): Promise<AudioPeaks> {
  const range = peaksRange(window, sheets);
  if (audioStream === null)
    return { present: false, clipPeak: 0, startMs: range.startMs, peaks: new Float32Array(0) };
  return engine.audioPeaks(input, range, signal, inputFormat, audioStream).catch((error) => {
    if (signal?.aborted) throw signal.reason;
    throw engineFailure(error, inputName);
  });
}

/** What users are told for each engine failure code: the catalog's message, never raw FFmpeg text alone. */
const ENGINE_FAILURES: Record<EngineErrorCode, (inputName: string, error: unknown) => VidsheetError> = {
  input_not_found: (inputName) => runtimeErrors.inputNotFound(inputName),
  unreadable_video: (inputName) => runtimeErrors.unreadableVideo(inputName),
  render_failed: (_, error) =>
    runtimeErrors.processingFailed(error instanceof Error ? error.message : String(error), error),
};

/** Engine errors carry codes (EngineError, or the binding's Error with its `code`). */
function engineFailure(error: unknown, inputName: string): Error {
  if (error instanceof VidsheetError) return error;
  const code = (error as { code?: unknown } | null)?.code;
  const known = ENGINE_ERROR_CODES.find((c) => c === code) ?? 'render_failed';
  return ENGINE_FAILURES[known](inputName, error);
}
