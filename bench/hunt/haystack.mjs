/**
 * Haystacks for the hunt benchmark: 30-minute clips with one needle at a known frame, synthesised
 * once into bench/.cache, keyed by their recipe (a changed recipe is a new file).
 *
 * Hay: a blue-grey background with a fixed fine texture (TEXTURE: the same picture every frame) and
 * a small grey square drifting smoothly across it (some motion, so packets are not all empty; no
 * jump, which x264 would take for a scene cut), 320x180 so a 30-minute clip encodes in well under a
 * minute of CPU. The texture is what makes a cut a cut for x264: on a flat background a full-frame
 * colour change is as cheap to predict as to code afresh, and its scene-cut detector never fired
 * (measured: no keyframe but the regular ones at any needle).
 * Encodes (ENCODES), H.264 with x264 `veryfast`, default keyint 250:
 *   scenecut  x264's scene-cut detection on (`-sc_threshold 40`, its default): a cut (class A) gets
 *             a keyframe; a one-frame flash does not (x264 declines to code a flash as a cut);
 *   fixedgop  scene-cut detection off and a fixed GOP (`-sc_threshold 0 -g 250`): a keyframe every
 *             250 frames whatever happens, so only the packets' sizes can betray a change.
 * Needles, starting at frame `frame`:
 *   A  the background turns orange and stays orange (a state change that stays);
 *   B  one all-white frame (a one-frame flash);
 *   C  a red square in the middle for 15 frames (about 0.5 s at 30 fps), with decoys: the same
 *      square in green for 15 frames at other times, three of them;
 *   D  a click on the sound track (CLICK: a 3 ms burst, loud, in the middle of frame `frame`'s
 *      display time) over a quiet steady tone; nothing changes in the picture. Only class D has
 *      a sound track (AAC);
 *   T  a tiny state change that stays (TINY: an 8x8 px yellow mark appears in a corner the
 *      drifting square never crosses, 0.1 % of the picture): a few bytes in one packet, which a
 *      fixed GOP gives no keyframe to betray; yet it stays, so the overview's cells show it;
 *   U  the same mark for a brief moment only (as long as class C's squares): no overview cell is
 *      likely to show it, so only a hint can lead to it; the class that shows what the packet
 *      signals miss.
 */
import { createHash } from 'node:crypto';
import { aac, synthesise, x264 } from '../clip.mjs';

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

/** The hay's texture: each channel of the background plus `amplitude` times a fixed pattern. */
export const TEXTURE = { amplitude: 24, pattern: 'sin(X*X/41+Y/3)*cos(Y*Y/53)' };

/** The square of class C, in source pixels (the middle of the frame). */
export const SQUARE = { x: 120, y: 50, w: 80, h: 80 };

/** Classes T and U's mark, in source pixels (top right: above the drifting square's path, y >= 18). */
export const TINY = { x: 300, y: 4, w: 8, h: 8, colour: [255, 220, 0] };

/** The needle classes: the picture's (A, B, C, T, U) and the sound's (D). */
export const CLASSES = ['A', 'B', 'C', 'D', 'T', 'U'];

/** x264 output arguments of each encode. */
export const ENCODES = {
  scenecut: x264('veryfast', '-sc_threshold', '40'),
  fixedgop: x264('veryfast', '-sc_threshold', '0', '-g', '250'),
};

/**
 * Class D's sound: a steady tone at `tone` (of full scale) and a `ms`-long burst at `level`, both
 * sines; the click starts `ms / 2` before the middle of the needle frame's display time.
 */
export const CLICK = { toneHz: 220, tone: 0.03, burstHz: 1500, level: 0.8, ms: 3 };

/** When class D's click starts and ends, in seconds: it lies wholly inside frame `frame`. */
export function clickSpan(r) {
  const middle = (r.frame + 0.5) / r.fps;
  return [middle - CLICK.ms / 2000, middle + CLICK.ms / 2000];
}

/**
 * A haystack recipe: class, frame rate, needle frame, encode, and (class C) decoy start frames.
 * Everything the clip holds follows from it.
 */
export function recipe(needleClass, fps, depth, encode = 'scenecut') {
  if (!CLASSES.includes(needleClass)) throw new Error(`no needle class ${needleClass}`);
  if (!ENCODES[encode]) throw new Error(`no encode ${encode}`);
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
  return { needleClass, fps, depth, encode, frame, frames, brief, decoys };
}

export function filterGraph(r) {
  const { width, height } = SIZE;
  const between = (f) => `between(n\\,${f}\\,${f + r.brief - 1})`;
  const mark = `drawbox=x=${TINY.x}:y=${TINY.y}:w=${TINY.w}:h=${TINY.h}:color=${hex(TINY.colour)}:t=fill`;
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
    D: 'null',
    T: `${mark}:enable='gte(n\\,${r.frame})'`,
    U: `${mark}:enable='${between(r.frame)}'`,
  }[r.needleClass];
  const seconds = r.frames / r.fps;
  const [red, green, blue] = LOOK.background.map((v) => `'${v}+${TEXTURE.amplitude}*${TEXTURE.pattern}'`);
  return (
    // The textured picture is computed once and repeated (geq on every frame would cost minutes).
    `color=c=${hex(LOOK.background)}:s=${width}x${height}:r=${r.fps}:d=1,geq=r=${red}:g=${green}:b=${blue},` +
    `trim=end_frame=1,loop=loop=-1:size=1,setpts=N/${r.fps}/TB,trim=duration=${seconds}[bg];` +
    `color=c=${hex(LOOK.mover)}:s=24x24:r=${r.fps}[m];` +
    // The background change (and the mark, out of the square's way) go under the drifting square;
    // flash and squares over it.
    (['A', 'T', 'U'].includes(r.needleClass)
      ? `[bg]${needle}[b];[b][m]overlay=x='148+140*sin(t/5)':y='78+60*sin(t/7)':shortest=1`
      : `[bg][m]overlay=x='148+140*sin(t/5)':y='78+60*sin(t/7)':shortest=1,${needle}`)
  );
}

/** Class D's sound track: the tone throughout, the click inside the needle frame (lavfi aevalsrc). */
export function audioGraph(r) {
  const [from, to] = clickSpan(r);
  const { toneHz, tone, burstHz, level } = CLICK;
  return (
    `aevalsrc=exprs='${tone}*sin(2*PI*${toneHz}*t)+${level}*between(t\\,${from.toFixed(6)}\\,${to.toFixed(6)})*sin(2*PI*${burstHz}*t)'` +
    `:s=48000:d=${r.frames / r.fps}`
  );
}

/**
 * The haystack's file, synthesised once (about a minute of CPU at 30 fps) into `dir` (bench/.cache
 * unless a test asks for another).
 */
export function haystack(r, dir) {
  const key = createHash('sha256')
    // TINY only in classes T and U's key, so the other classes' cached haystacks keep their names.
    .update(
      JSON.stringify({
        v: 3,
        r,
        SIZE,
        LOOK,
        TEXTURE,
        SQUARE,
        CLICK,
        ENCODES,
        ...(['T', 'U'].includes(r.needleClass) ? { TINY } : {}),
      }),
    )
    .digest('hex')
    .slice(0, 12);
  return synthesise(`hunt-${r.needleClass}-${r.encode}-${r.fps}fps-${Math.round(r.depth * 100)}-${key}`, {
    what: `${MINUTES} min at ${r.fps} fps, ${r.encode}`,
    sources: [filterGraph(r), ...(r.needleClass === 'D' ? [audioGraph(r)] : [])],
    output: [...ENCODES[r.encode], ...(r.needleClass === 'D' ? aac() : [])],
    dir,
  });
}
