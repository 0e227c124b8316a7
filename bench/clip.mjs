/**
 * Benchmark clips, synthesised once into bench/.cache (shared by run.mjs and hosted.mjs).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, renameSync } from 'node:fs';
import { join } from 'node:path';

export const ROOT = new URL('..', import.meta.url).pathname;
export const CACHE = join(ROOT, 'bench', '.cache');

/**
 * Synthesises a benchmark clip once: H.264 with B-frames, GOP 247 (cells avoid keyframes), AAC.
 * `openGop`: x264's open GOPs (recovery-point keyframes whose leading B-frames reference the GOP
 * before), the legitimate kind cameras and broadcast encoders write, to compare with closed GOPs.
 */
export function clip(name, { seconds, size, openGop = false }) {
  const out = join(CACHE, `${name}.mp4`);
  if (existsSync(out)) return out;
  mkdirSync(CACHE, { recursive: true });
  console.error(`bench: synthesising ${name} (${seconds} s, ${size}); once, cached in bench/.cache`);
  const partial = `${out}.partial.mp4`;
  execFileSync(
    'ffmpeg',
    [
      '-hide_banner',
      '-loglevel',
      'error',
      '-y',
      '-f',
      'lavfi',
      '-i',
      `testsrc2=s=${size}:r=30:d=${seconds}`,
      '-f',
      'lavfi',
      '-i',
      `sine=frequency=440:sample_rate=48000:duration=${seconds}`,
      '-c:v',
      'libx264',
      '-preset',
      'ultrafast',
      '-tune',
      'zerolatency',
      '-bf',
      '3',
      '-x264-params',
      `b-adapt=0:bframes=3:rc-lookahead=0${openGop ? ':open-gop=1' : ''}`,
      '-g',
      '247',
      '-keyint_min',
      '247',
      '-sc_threshold',
      '0',
      '-pix_fmt',
      'yuv420p',
      '-c:a',
      'aac',
      '-b:a',
      '96k',
      '-shortest',
      partial,
    ],
    { stdio: 'inherit' },
  );
  renameSync(partial, out);
  return out;
}
