/**
 * The native engine: the Engine over a loaded napi-rs binding (crates/vidsheet-node). Finding and
 * loading the binding is native-loader.ts's job.
 */
import type * as Binding from '../../npm/linux-x64-gnu/index.js';
import { probeFocused } from './focus.js';
import {
  type AudioPeaks,
  type BandLevels,
  type BandPlan,
  type CellPlan,
  type DecodeBounds,
  ENGINE_ERROR_CODES,
  type Engine,
  EngineError,
  type EngineErrorCode,
  type HintPackets,
  type LabelPlan,
  type MsRange,
  type PacketLog,
  type ProbeInfo,
  type Rect,
  type RenderPlan,
  type RenderResult,
  type SheetPlan,
  type Theme,
  type VideoStreamFacts,
} from './types.js';

/**
 * The binding's surface, typed by the declarations napi-rs generates from vidsheet-core's structs
 * (npm/linux-x64-gnu/index.d.ts, committed; test/engine/native.test.ts checks it is current). The
 * adapter below hands the plan over and the results back unchanged, so tsc checks there that the
 * TypeScript plan fits the binding's and that the binding's probe and result fit the Engine's.
 */
type NativeBinding = {
  probe: typeof Binding.probe;
  audioPeaks: typeof Binding.audioPeaks;
  render: typeof Binding.render;
};

/**
 * And that no field is lost on the way: each struct has the same fields on both sides (a field
 * one side lacks passes an assignability check when it is optional, or extra).
 */
type SameFields<A, B> = [Exclude<keyof A, keyof B> | Exclude<keyof B, keyof A>] extends [never]
  ? true
  : false;
type Check<T extends true> = T;
type _NativeFieldsMatch = [
  Check<SameFields<RenderPlan, Binding.RenderPlan>>,
  Check<SameFields<HintPackets, Binding.HintPackets>>,
  Check<SameFields<Theme, Binding.Theme>>,
  Check<SameFields<SheetPlan, Binding.SheetPlan>>,
  Check<SameFields<CellPlan, Binding.CellPlan>>,
  Check<SameFields<Rect, Binding.Rect>>,
  Check<SameFields<LabelPlan, Binding.LabelPlan>>,
  Check<SameFields<BandPlan, Binding.BandPlan>>,
  Check<SameFields<ProbeInfo, Binding.ProbeInfo>>,
  Check<SameFields<VideoStreamFacts, Binding.VideoStreamFacts>>,
  Check<SameFields<RenderResult, Binding.RenderResult>>,
  Check<SameFields<AudioPeaks, Binding.AudioPeaks>>,
  Check<SameFields<PacketLog, Binding.PacketLog>>,
  // The error codes: the binding's ErrorCode (crates/vidsheet-core/src/error.rs) is the one list.
  Check<SameSet<EngineErrorCode, `${Binding.ErrorCode}`>>,
];

/** Two unions with the same members. */
type SameSet<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;

export function isBinding(value: unknown): value is NativeBinding {
  const b = value as Partial<NativeBinding> | null;
  return (
    typeof b?.probe === 'function' && typeof b?.audioPeaks === 'function' && typeof b?.render === 'function'
  );
}

/** Any error thrown by the binding, as an EngineError with the binding's code. */
function toEngineError(err: unknown, fallback: EngineErrorCode): EngineError {
  if (err instanceof EngineError) return err;
  const code = (err as { code?: unknown } | null)?.code;
  const message = err instanceof Error ? err.message : String(err);
  const known = ENGINE_ERROR_CODES.find((c) => c === code);
  return new EngineError(known ?? fallback, message);
}

/** The Engine over a loaded binding. */
export function nativeEngine(binding: NativeBinding): Engine {
  return {
    name: 'native',
    async probe(file: string, allowed?: readonly string[], bounds?: DecodeBounds): Promise<ProbeInfo> {
      const allowedFormats = allowed ? [...allowed] : undefined;
      try {
        if (!bounds) return await binding.probe(file, allowedFormats ? { allowedFormats } : undefined);
        const { maxPixels } = bounds;
        return await probeFocused(
          () => binding.probe(file, { allowedFormats, maxPixels }),
          (format, stream) =>
            binding.probe(file, { inputFormat: allowed ? format : undefined, maxPixels, stream }),
        );
      } catch (err) {
        throw toEngineError(err, 'unreadable_video');
      }
    },
    /**
     * Like `render`, the native call cannot be interrupted once started: on abort this rejects at
     * once and the decode finishes in the background (it writes nothing).
     */
    async audioPeaks(
      file: string,
      range: MsRange,
      signal?: AbortSignal,
      format?: string,
      stream?: number,
    ): Promise<AudioPeaks> {
      signal?.throwIfAborted();
      try {
        const call = binding.audioPeaks(file, range.startMs, range.endMs, format, stream);
        return signal ? await abortable(call, signal) : await call;
      } catch (err) {
        if (signal?.aborted) throw signal.reason;
        throw toEngineError(err, 'render_failed');
      }
    },
    /**
     * The native call cannot be interrupted once started; on abort this rejects at once and the call
     * finishes in the background. That keeps the Engine contract: the native core never writes
     * into `plan.tempDir`, only the sheet files. (The server stops a job by killing its worker.)
     */
    async render(
      plan: RenderPlan,
      onProgress?: (done: number, total: number) => void,
      signal?: AbortSignal,
      bandLevels?: Promise<BandLevels>,
    ): Promise<RenderResult> {
      signal?.throwIfAborted();
      // The native render takes a finished plan: the levels are waited for first (measured: the
      // video decode already keeps both cores busy, so running the audio alongside it gains ~1 %).
      if (bandLevels)
        plan = withLevels(plan, signal ? await abortable(bandLevels, signal) : await bandLevels);
      const progress = onProgress
        ? (done: number, total: number) => {
            try {
              onProgress(done, total);
            } catch {
              // A failing progress listener must not take the render (or the process) down.
            }
          }
        : undefined;
      try {
        const call = binding.render(plan, progress);
        const result = signal ? await abortable(call, signal) : await call;
        // napi-rs declares an Option as `T | undefined | null`; the binding gives null.
        return { ...result, frameTimes: result.frameTimes.map((t) => t ?? null) };
      } catch (err) {
        if (signal?.aborted) throw signal.reason;
        throw toEngineError(err, 'render_failed');
      }
    },
  };
}

/** `plan` with sheet s's band levels replaced by `levels[s]`. */
function withLevels(plan: RenderPlan, levels: BandLevels): RenderPlan {
  return {
    ...plan,
    sheets: plan.sheets.map((sheet, s) =>
      sheet.band && !sheet.band.message ? { ...sheet, band: { ...sheet.band, levels: levels[s] } } : sheet,
    ),
  };
}

/** `promise`, or the signal's reason as soon as it aborts (the promise itself runs on). */
function abortable<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}
