/**
 * Finds and loads the native binding (crates/vidsheet-node). Nothing happens at import time.
 *
 * Candidates, in order:
 *   1. the platform package npm installs as an optional dependency where it runs;
 *   2. in a checkout, the file `npm run build:native` leaves in npm/linux-x64-gnu/.
 * `VIDSHEET_NATIVE_BINDING=<path to a .node>` replaces both (benchmarks compare two builds with
 * it): when it is set, nothing else is tried, so a typo cannot silently measure another build.
 * Either it returns the engine and the file it came from (the debug log says which), or an error
 * listing each attempt, why it failed and the fix; the caller then uses the ffmpeg engine.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { isBinding, nativeEngine } from './native.js';
import type { Engine } from './types.js';

const PLATFORM = 'linux-x64';
const PLATFORM_PACKAGE = '@vidsheet/binding-linux-x64-gnu';
const BINARY = 'vidsheet.linux-x64-gnu.node';

function describe(candidate: string, err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  if ((err as NodeJS.ErrnoException).code === 'MODULE_NOT_FOUND') {
    return path.isAbsolute(candidate) ? 'file not found' : 'package not installed';
  }
  // dlopen's reason (a missing glibc version, a wrong architecture...) is on the first line.
  return err.message.split('\n')[0] ?? err.message;
}

export function loadNative(
  env: NodeJS.ProcessEnv = process.env,
): { engine: Engine; from: string } | { error: string } {
  const require = createRequire(import.meta.url);
  // dist/engine/native-loader.js (or src/engine/native-loader.ts) -> package root two levels up.
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
  const attempts: string[] = [];
  const platform = `${process.platform}-${process.arch}`;
  if (platform !== PLATFORM) {
    attempts.push(`no prebuilt native engine for ${platform} (only linux-x64 with glibc is built)`);
  }
  const checkout = existsSync(path.join(root, 'crates', 'vidsheet-node'));
  const candidates = env.VIDSHEET_NATIVE_BINDING
    ? [path.resolve(env.VIDSHEET_NATIVE_BINDING)]
    : [PLATFORM_PACKAGE, ...(checkout ? [path.join(root, 'npm', 'linux-x64-gnu', BINARY)] : [])];
  for (const candidate of candidates) {
    try {
      const binding: unknown = require(candidate);
      if (isBinding(binding)) return { engine: nativeEngine(binding), from: require.resolve(candidate) };
      attempts.push(`${candidate}: loaded but does not export probe(), audioPeaks() and render()`);
    } catch (err) {
      attempts.push(`${candidate}: ${describe(candidate, err)}`);
    }
  }
  const fix = checkout
    ? [
        'Fix: run `npm run build:native` (Rust; builds its static FFmpeg once), or',
        '`npm run build:native:system` against the FFmpeg development packages.',
      ]
    : [
        `Fix: where it is available (Linux x64, glibc 2.28 or newer), install ${PLATFORM_PACKAGE}`,
        '(npm installs it unless optional dependencies are omitted).',
      ];
  return {
    error: [
      'vidsheet native engine not loaded; tried:',
      ...attempts.map((a) => `  - ${a}`),
      ...fix,
      'Until then the ffmpeg/ffprobe fallback engine is used (ffmpeg and ffprobe must be on PATH).',
    ].join('\n'),
  };
}
