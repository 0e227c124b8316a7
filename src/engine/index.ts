/**
 * Picks the engine: the native addon wherever it loads, else the ffmpeg fallback.
 * `VIDSHEET_ENGINE=native|ffmpeg` forces one. `NODE_DEBUG=vidsheet` says why the addon did not load.
 */
import { debuglog } from 'node:util';
import { VidsheetError } from '../core/errors.js';
import { ffmpegEngine } from './ffmpeg.js';
import { loadNative } from './native-loader.js';
import type { Engine } from './types.js';

/** For every surface with an inline image: the quality/size ladder (remote thumbnail, `inline_sheets`). */
export { type FittedJpeg, fitJpeg } from './jpeg-ladder.js';
/** For the server: `limiter` queues tasks (hosted jobs run one at a time, in arrival order). */
export { limiter } from './process.js';

const debug = debuglog('vidsheet');
let chosen: Engine | undefined;

export function selectEngine(env: NodeJS.ProcessEnv = process.env): Engine {
  if (chosen) return chosen;
  const forced = env.VIDSHEET_ENGINE;
  if (forced === 'ffmpeg') {
    chosen = ffmpegEngine;
  } else {
    const native = loadNative();
    if ('engine' in native) {
      debug('native binding: %s', native.from);
      chosen = native.engine;
    } else if (forced === 'native') {
      throw new VidsheetError(
        'processing_failed',
        `VIDSHEET_ENGINE=native, but the native binding did not load:\n${native.error}`,
      );
    } else {
      debug('native binding unavailable, using the ffmpeg fallback engine:\n%s', native.error);
      chosen = ffmpegEngine;
    }
  }
  debug('engine: %s', chosen.name);
  return chosen;
}
