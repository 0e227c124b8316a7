/**
 * Haystacks for the hunt benchmark: 30-minute clips with one needle at a known frame, synthesised
 * once into bench/.cache, keyed by their recipe (a changed recipe is a new file).
 *
 * Hay: a flat blue-grey background with a small grey square drifting smoothly across it (some
 * motion, so packets are not all empty; no jump, which x264 would take for a scene cut), 320x180 so a 30-minute clip encodes in well under a minute of CPU.
 * Encode: H.264 (x264 `veryfast`, which keeps scene-cut detection on, `-sc_threshold 40`, default
 * keyint 250), no audio. Needles, starting at frame `frame`:
 *   A  the background turns orange and stays orange (a state change that stays);
 *   B  one all-white frame (a one-frame flash);
 *   C  a red square in the middle for 15 frames (about 0.5 s at 30 fps), with decoys: the same
 *      square in green for 15 frames at other times, three of them.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { CACHE } from '../clip.mjs';

export const SIZE = { width: 320, height: 180 };
export const MINUTES = 30;
/** How long a class-C event lasts, in frames at 30 fps (scaled with the frame rate). */
export const BRIEF_FRAMES_30 = 15;

/** What the needles and the hay look like (sRGB), as the agent is told ("find the red square"). */
export const LOOK = {
  background: [0x2a, 0x35, 0x50],
  changed: [0xc0, 0x70, 0x30],
  flash: [255, 255, 255],
  needle: [255, 0, 0],
  decoy: [0, 200, 0],
  mover: [0x9a, 0x9a, 0x9a],
};

const hex = ([r, g, b]) => `0x${[r, g, b].map((v) => v.toString(16).padStart(2, '0')).join('')}`;

/** The square of class C, in source pixels (the middle of the frame). */
export const SQUARE = { x: 120, y: 50, w: 80, h: 80 };

/**
 * A haystack recipe: class, frame rate, needle frame, and (class C) decoy start frames. Everything
 * the clip shows follows from it.
 */
export function recipe(needleClass, fps, depth) {
  const frames = MINUTES * 60 * fps;
  // A frame that is not a round number of seconds, so no plan lands on it by construction.
  const frame = Math.round(depth * frames) + Math.round(fps * 0.37) + 3;
  const brief = Math.round((BRIEF_FRAMES_30 * fps) / 30);
  const decoys =
    needleClass === 'C'
      ? [0.2, 0.45, 0.75]
          .map((d) => Math.round(((d + depth) % 1) * frames) + 11)
          .filter((f) => Math.abs(f - frame) > fps * 60)
      : [];
  return { needleClass, fps, depth, frame, frames, brief, decoys };
}

export function filterGraph(r) {
  const { width, height } = SIZE;
  const between = (f) => `between(n\\,${f}\\,${f + r.brief - 1})`;
  const needle = {
    A: `drawbox=x=0:y=0:w=iw:h=ih:color=${hex(LOOK.changed)}:t=fill:enable='gte(n\\,${r.frame})'`,
    B: `drawbox=x=0:y=0:w=iw:h=ih:color=${hex(LOOK.flash)}:t=fill:enable='eq(n\\,${r.frame})'`,
    C: [
      `drawbox=x=${SQUARE.x}:y=${SQUARE.y}:w=${SQUARE.w}:h=${SQUARE.h}:color=${hex(LOOK.needle)}:t=fill:enable='${between(r.frame)}'`,
      ...(r.decoys.length
        ? [
            `drawbox=x=${SQUARE.x}:y=${SQUARE.y}:w=${SQUARE.w}:h=${SQUARE.h}:color=${hex(LOOK.decoy)}:t=fill:enable='${r.decoys.map(between).join('+')}'`,
          ]
        : []),
    ].join(','),
  }[r.needleClass];
  const seconds = r.frames / r.fps;
  return (
    `color=c=${hex(LOOK.background)}:s=${width}x${height}:r=${r.fps}:d=${seconds}[bg];` +
    `color=c=${hex(LOOK.mover)}:s=24x24:r=${r.fps}[m];` +
    // The background change goes under the drifting square; flash and squares over it.
    (r.needleClass === 'A'
      ? `[bg]${needle}[b];[b][m]overlay=x='148+140*sin(t/5)':y='78+60*sin(t/7)':shortest=1`
      : `[bg][m]overlay=x='148+140*sin(t/5)':y='78+60*sin(t/7)':shortest=1,${needle}`)
  );
}

/** The haystack's file, synthesised once (a few minutes on a busy 2-core machine). */
export function haystack(r) {
  const key = createHash('sha256')
    .update(JSON.stringify({ v: 2, r, SIZE, LOOK, SQUARE }))
    .digest('hex')
    .slice(0, 12);
  const out = join(CACHE, `hunt-${r.needleClass}-${r.fps}fps-${Math.round(r.depth * 100)}-${key}.mp4`);
  if (existsSync(out)) return out;
  mkdirSync(CACHE, { recursive: true });
  console.error(`hunt: synthesising ${out} (${MINUTES} min at ${r.fps} fps); once, cached in bench/.cache`);
  const partial = `${out}.partial.mp4`;
  execFileSync(
    'ffmpeg',
    [
      '-hide_banner',
      '-loglevel',
      'error',
      '-nostdin',
      '-y',
      '-f',
      'lavfi',
      '-i',
      filterGraph(r),
      '-c:v',
      'libx264',
      '-preset',
      'veryfast',
      '-sc_threshold',
      '40',
      '-pix_fmt',
      'yuv420p',
      partial,
    ],
    { stdio: 'inherit' },
  );
  renameSync(partial, out);
  return out;
}
