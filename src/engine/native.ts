/**
 * The native engine: the only module that loads the napi-rs addon (crates/vidsheet-node).
 *
 * `loadNative()` tries the prebuilt platform package, then the file `npm run build:native` leaves
 * in the repo, and either returns an Engine or says which attempts failed and how to fix it (the
 * caller then falls back to the ffmpeg engine). Nothing happens at import time.
 */
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import {
  type AudioEnvelope,
  type Engine,
  EngineError,
  type EngineErrorCode,
  type ProbeInfo,
  type RenderPlan,
  type RenderResult,
  type VideoStreamFacts,
} from './types.js';

/** The binding's surface (generated declarations live in npm/<platform>/native.d.ts). */
interface NativeBinding {
  probe(path: string): Promise<NativeProbeInfo>;
  render(
    plan: NativeRenderPlan,
    onProgress?: (done: number, total: number) => void,
  ): Promise<NativeRenderResult>;
}

/** ProbeInfo as the binding returns it: unknown values are absent instead of null. */
type NativeProbeInfo = Omit<ProbeInfo, 'videoStreams' | 'audioEnd'> & {
  videoStreams: Array<
    Omit<VideoStreamFacts, 'frames' | 'readableEnd'> & { frames?: number | null; readableEnd?: number | null }
  >;
  audioEnd?: number | null;
};

/** RenderPlan as the binding takes it: optional fields instead of nulls. */
type NativeRenderPlan = Omit<RenderPlan, 'audio' | 'sheets'> & {
  audio?: RenderPlan['audio'];
  sheets: Array<
    Omit<RenderPlan['sheets'][number], 'band'> & {
      band?: Omit<NonNullable<RenderPlan['sheets'][number]['band']>, 'message'> & {
        message?: NonNullable<RenderPlan['sheets'][number]['band']>['message'];
      };
    }
  >;
};

interface NativeRenderResult {
  unreadable: Array<{ sheet: number; cell: number }>;
  audio?: { present: boolean; envelope: Float32Array | number[] } | null;
  stats?: { decodedFrames: number; seeks: number };
}

const PLATFORM_PACKAGE = '@vidsheet/binding-linux-x64-gnu';
const BINARY = 'vidsheet.linux-x64-gnu.node';
const CODES: readonly EngineErrorCode[] = ['unreadable_video', 'input_not_found', 'render_failed'];

function describe(candidate: string, err: unknown): string {
  if (err instanceof Error) {
    if ((err as NodeJS.ErrnoException).code === 'MODULE_NOT_FOUND') {
      return path.isAbsolute(candidate) ? 'file not found (not built yet)' : 'package not installed';
    }
    return err.message.split('\n')[0] ?? String(err);
  }
  return String(err);
}

function isBinding(value: unknown): value is NativeBinding {
  const b = value as Partial<NativeBinding> | null;
  return typeof b?.probe === 'function' && typeof b?.render === 'function';
}

/** Any error thrown by the binding, as an EngineError with the binding's code. */
function toEngineError(err: unknown, fallback: EngineErrorCode): EngineError {
  if (err instanceof EngineError) return err;
  const code = (err as { code?: unknown } | null)?.code;
  const message = err instanceof Error ? err.message : String(err);
  const known = CODES.find((c) => c === code);
  return new EngineError(known ?? fallback, message);
}

function toNativePlan(plan: RenderPlan): NativeRenderPlan {
  return {
    ...plan,
    audio: plan.audio ?? undefined,
    sheets: plan.sheets.map((sheet) => ({
      ...sheet,
      band: sheet.band ? { ...sheet.band, message: sheet.band.message ?? undefined } : undefined,
    })),
  };
}

/** The binding's facts in the Engine's shape: what the binding leaves absent is null (unknown). */
function toProbeInfo(info: NativeProbeInfo): ProbeInfo {
  return {
    duration: info.duration,
    startTime: info.startTime,
    videoStreams: info.videoStreams.map((s) => ({
      index: s.index,
      width: s.width,
      height: s.height,
      isDefault: s.isDefault,
      attachedPic: s.attachedPic,
      frames: s.frames ?? null,
      decodes: s.decodes,
      readableEnd: s.readableEnd ?? null,
    })),
    hasAudio: info.hasAudio,
    audioEnd: info.audioEnd ?? null,
  };
}

function toAudio(audio: NativeRenderResult['audio']): AudioEnvelope | null {
  if (!audio) return null;
  const envelope =
    audio.envelope instanceof Float32Array ? audio.envelope : Float32Array.from(audio.envelope);
  return { present: audio.present, envelope };
}

function adapt(binding: NativeBinding): Engine {
  return {
    name: 'native',
    async probe(file: string): Promise<ProbeInfo> {
      try {
        return toProbeInfo(await binding.probe(file));
      } catch (err) {
        throw toEngineError(err, 'unreadable_video');
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
    ): Promise<RenderResult> {
      signal?.throwIfAborted();
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
        const call = binding.render(toNativePlan(plan), progress);
        const result = signal ? await abortable(call, signal) : await call;
        return {
          unreadable: result.unreadable.map((c) => ({ sheet: c.sheet, cell: c.cell })),
          audio: toAudio(result.audio),
          stats: { decodedFrames: result.stats?.decodedFrames },
        };
      } catch (err) {
        if (signal?.aborted) throw signal.reason;
        throw toEngineError(err, 'render_failed');
      }
    },
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

/**
 * Loads the native addon. On failure the error lists each attempt (package or path, and why it
 * failed) and the fix; the caller logs it on the debug channel and uses the ffmpeg engine.
 */
export function loadNative(): { engine: Engine } | { error: string } {
  const require = createRequire(import.meta.url);
  // dist/engine/native.js (or src/engine/native.ts) -> package root two levels up.
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
  const attempts: string[] = [];
  const platform = `${process.platform}-${process.arch}`;
  if (platform !== 'linux-x64') {
    attempts.push(`no prebuilt native engine for ${platform} (only linux-x64 glibc is built)`);
  }
  const candidates = [PLATFORM_PACKAGE, path.join(root, 'npm', 'linux-x64-gnu', BINARY)];
  for (const candidate of candidates) {
    try {
      const binding: unknown = require(candidate);
      if (isBinding(binding)) return { engine: adapt(binding) };
      attempts.push(`${candidate}: loaded but does not export probe() and render()`);
    } catch (err) {
      attempts.push(`${candidate}: ${describe(candidate, err)}`);
    }
  }
  return {
    error: [
      'vidsheet native engine not loaded; tried:',
      ...attempts.map((a) => `  - ${a}`),
      'Fix: run `npm run build:native` (needs Rust, pkg-config, libclang-dev and the FFmpeg',
      'development packages libavcodec-dev libavformat-dev libavutil-dev libswscale-dev);',
      'until then the ffmpeg/ffprobe fallback engine is used.',
    ].join('\n'),
  };
}
