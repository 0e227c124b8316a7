/**
 * Benchmark clips, synthesised once into bench/.cache (shared by run.mjs, hosted.mjs and the hunt
 * haystacks): `synthesise` is the one place that runs ffmpeg for them.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, renameSync } from 'node:fs';
import { join } from 'node:path';

export const ROOT = new URL('..', import.meta.url).pathname;
export const CACHE = join(ROOT, 'bench', '.cache');

/**
 * Encodes `<dir>/<name>.<ext>` (bench/.cache and MP4 by default) from lavfi sources, once:
 * `sources` are lavfi graphs (video first), `output` the codec arguments. Written to a temporary
 * name and renamed, so an interrupted run never leaves a half file that looks cached. The name
 * must change with what it encodes.
 */
export function synthesise(name, { sources, output, what, dir = CACHE, ext = 'mp4' }) {
  const out = join(dir, `${name}.${ext}`);
  if (existsSync(out)) return out;
  mkdirSync(dir, { recursive: true });
  if (dir === CACHE) console.error(`bench: synthesising ${name} (${what}); once, cached in bench/.cache`);
  const partial = `${out}.partial.${ext}`;
  execFileSync(
    'ffmpeg',
    [
      ...['-hide_banner', '-loglevel', 'error', '-nostdin', '-y'],
      ...sources.flatMap((graph) => ['-f', 'lavfi', '-i', graph]),
      ...output,
      ...['-pix_fmt', 'yuv420p', partial],
    ],
    { stdio: 'inherit' },
  );
  renameSync(partial, out);
  return out;
}

/** x264 output arguments: the preset, then what a clip needs beyond it. */
export const x264 = (preset, ...extra) => ['-c:v', 'libx264', '-preset', preset, ...extra];

/** AAC output arguments. */
export const aac = (bitrate = '96k') => ['-c:a', 'aac', '-b:a', bitrate];

/**
 * Synthesises a benchmark clip once: H.264 with B-frames, GOP 247 (cells avoid keyframes), AAC.
 * `openGop`: x264's open GOPs (recovery-point keyframes whose leading B-frames reference the GOP
 * before), the legitimate kind cameras and broadcast encoders write, to compare with closed GOPs.
 */
export function clip(name, { seconds, size, openGop = false }) {
  return synthesise(name, {
    what: `${seconds} s, ${size}`,
    sources: [
      `testsrc2=s=${size}:r=30:d=${seconds}`,
      `sine=frequency=440:sample_rate=48000:duration=${seconds}`,
    ],
    output: [
      ...x264(
        'ultrafast',
        '-tune',
        'zerolatency',
        '-bf',
        '3',
        '-x264-params',
        `b-adapt=0:bframes=3:rc-lookahead=0${openGop ? ':open-gop=1' : ''}`,
      ),
      ...['-g', '247', '-keyint_min', '247', '-sc_threshold', '0'],
      ...aac(),
      '-shortest',
    ],
  });
}
