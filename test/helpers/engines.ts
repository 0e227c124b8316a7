/**
 * Each engine by name, for tests that run both in one process (selectEngine would pick one for
 * the whole process).
 */
import { ffmpegEngine } from '../../src/engine/ffmpeg.js';
import { loadNative } from '../../src/engine/native-loader.js';
import type { Engine } from '../../src/engine/types.js';

export function engineNamed(name: string): Engine {
  if (name === 'ffmpeg') return ffmpegEngine;
  const native = loadNative();
  if (!('engine' in native)) throw new Error(`the native binding did not load: ${native.error}`);
  return native.engine;
}
