/**
 * Event clips for the events benchmark (bench/events.mjs): 100 s, 320x180 at 30 fps, with known
 * events at known frames, one clip per encode, synthesised once into bench/.cache (bench/clip.mjs).
 *
 * Camera-like scenes: three still textured pictures (each computed once and repeated) under sensor
 * noise that differs every frame (clean and noisy variants: CLIPS), so a still scene still costs
 * bytes, as a real camera's does.
 * Screen-like scenes: flat desktop colours with window rectangles and rows of "text", no noise,
 * frames dropped where nothing changes (VFR with irregular timestamps, as screen recorders write).
 *
 * EVENTS, at frames chosen off every whole second and off the fixed GOP's keyframes (250 frames;
 * a cut on a regular keyframe costs no more than the keyframe itself and is invisible to packets):
 *   click  a 5 ms loud burst on a quiet tone at 12.345 s;
 *   cut    scene A -> B at frame 700, B -> C at frame 2488;
 *   flash  one all-white frame, 1333;
 *   burst  a dark square crossing the still scene, frames 1900..1914 (half a second).
 * TINY_EVENTS (the clips named `*-tiny`, nothing else happens in them): a 6x6 px light mark appears
 * at frame 1555 and stays, 0.06 % of the picture: what the packet signals are not expected to see.
 */
import { createHash } from 'node:crypto';
import { aac, synthesise, x264 } from '../clip.mjs';

export const EVENT_CLIP = { seconds: 100, fps: 30, width: 320, height: 180 };

export const EVENTS = [
  { kind: 'click', seconds: 12.345 },
  { kind: 'cut', frame: 700 },
  { kind: 'flash', frame: 1333 },
  { kind: 'burst', frame: 1900, last: 1914 },
  { kind: 'cut', frame: 2488 },
];
export const TINY_EVENTS = [{ kind: 'tiny', frame: 1555 }];
const TINY = { x: 250, y: 20, w: 6, h: 6, colour: '0xfafafa' };
const CLICK_MS = 5;

const FIXED_GOP = ['-sc_threshold', '0', '-g', '250'];
const VFR = ['-vf', 'mpdecimate=max=15', '-fps_mode', 'vfr'];

/**
 * Each clip: its look (`noise`: the camera's sensor noise, ffmpeg `noise` strength, 0 for a
 * screen), its events and its encode (output arguments before the audio's). At strength 8 x264
 * codes a still scene in tens of bytes a frame (a clean camera); at 20 in hundreds to thousands (a
 * noisy one, where a flash or a burst is a smaller share of what every gap costs).
 */
const camera = (video, { noise = 8, tiny = false } = {}) => ({
  screen: false,
  noise,
  tiny,
  ext: 'mp4',
  video,
});
const HEVC = ['-c:v', 'libx265', '-preset', 'veryfast', '-x265-params', 'log-level=error', '-tag:v', 'hvc1'];
const SCREEN = [...VFR, ...x264('veryfast')];
export const CLIPS = {
  'h264-scenecut': camera(x264('veryfast')),
  'h264-fixedgop': camera(x264('veryfast', ...FIXED_GOP)),
  hevc: camera(HEVC),
  'h264-scenecut-noisy': camera(x264('veryfast'), { noise: 20 }),
  'h264-fixedgop-noisy': camera(x264('veryfast', ...FIXED_GOP), { noise: 20 }),
  'hevc-noisy': camera(HEVC, { noise: 20 }),
  'vfr-screen-mp4': { screen: true, noise: 0, tiny: false, ext: 'mp4', video: SCREEN },
  'vfr-screen-mkv': { screen: true, noise: 0, tiny: false, ext: 'mkv', video: SCREEN },
  'h264-fixedgop-tiny': camera(x264('veryfast', ...FIXED_GOP), { tiny: true }),
  'h264-scenecut-tiny': camera(x264('veryfast'), { tiny: true }),
};

/** The events a clip holds. */
export const eventsOf = (name) => (CLIPS[name].tiny ? TINY_EVENTS : EVENTS);

const CAMERA_SCENES = [
  { colour: [0x2a, 0x35, 0x50], pattern: 'sin(X*X/41+Y/3)*cos(Y*Y/53)' },
  { colour: [0x70, 0x50, 0x30], pattern: 'sin(X/7)*cos(X*Y/97)' },
  { colour: [0x30, 0x5a, 0x30], pattern: 'cos((X+Y)/5)*sin(X*Y/211)' },
];
const SCREEN_SCENES = [
  { desktop: '0x204080', windows: ['0xf0f0f0', '0xe0e0e8'] },
  { desktop: '0x3c3c3c', windows: ['0xfafafa', '0x202830'] },
  { desktop: '0x6a8a5a', windows: ['0xffffff', '0xd8d0c0'] },
];

const frames = () => EVENT_CLIP.seconds * EVENT_CLIP.fps;

/** One still scene, as a lavfi chain ending in `[label]`. */
function sceneGraph(i, screen, label) {
  const { width: w, height: h, fps, seconds } = EVENT_CLIP;
  if (screen) {
    const s = SCREEN_SCENES[i];
    // Two windows with title bars and rows of "text" (thin dark lines of uneven length).
    const window = (x, y, ww, wh, c) =>
      [
        `drawbox=x=${x}:y=${y}:w=${ww}:h=${wh}:color=${c}:t=fill`,
        `drawbox=x=${x}:y=${y}:w=${ww}:h=10:color=0x5060a0:t=fill`,
        ...Array.from(
          { length: Math.floor((wh - 20) / 9) },
          (_, k) =>
            `drawbox=x=${x + 6}:y=${y + 16 + 9 * k}:w=${ww - 12 - ((k * 37 + 11 * i) % 60)}:h=3:color=0x303030:t=fill`,
        ),
      ].join(',');
    return (
      `color=c=${s.desktop}:s=${w}x${h}:r=${fps}:d=${seconds},` +
      `${window(12 + 20 * i, 10, 170, 120, s.windows[0])},${window(150 - 10 * i, 60, 150, 105, s.windows[1])}` +
      `[${label}]`
    );
  }
  const s = CAMERA_SCENES[i];
  const hex = `0x${s.colour.map((v) => v.toString(16).padStart(2, '0')).join('')}`;
  const [r, g, b] = s.colour.map((v) => `'${v}+40*${s.pattern}'`);
  // Computed once and repeated (geq on every frame would cost minutes).
  return (
    `color=c=${hex}:s=${w}x${h}:r=${fps}:d=1,geq=r=${r}:g=${g}:b=${b},trim=end_frame=1,` +
    `loop=loop=-1:size=1,setpts=N/${fps}/TB,trim=duration=${seconds}[${label}]`
  );
}

/** The clip's picture: scenes cut at the events' frames, the flash, the burst, the mark, the noise. */
export function videoGraph(name) {
  const { screen, tiny, noise } = CLIPS[name];
  const sensor = noise ? `,noise=alls=${noise}:allf=t+u` : '';
  const { fps } = EVENT_CLIP;
  const n = (f) => `n\\,${f}`;
  if (tiny) {
    const t = TINY_EVENTS[0];
    return (
      `${sceneGraph(0, false, 's0')};[s0]drawbox=x=${TINY.x}:y=${TINY.y}:w=${TINY.w}:h=${TINY.h}:` +
      `color=${TINY.colour}:t=fill:enable='gte(${n(t.frame)})'${sensor}`
    );
  }
  const [, cut1, flash, burst, cut2] = EVENTS;
  return (
    `${sceneGraph(0, screen, 's0')};${sceneGraph(1, screen, 's1')};${sceneGraph(2, screen, 's2')};` +
    `[s0][s1]overlay=enable='gte(${n(cut1.frame)})'[x1];[x1][s2]overlay=enable='gte(${n(cut2.frame)})'[x2];` +
    `color=c=0x141414:s=48x48:r=${fps}[m];` +
    `[x2][m]overlay=x='10+18*(n-${burst.frame})':y=60:enable='between(n\\,${burst.frame}\\,${burst.last})':shortest=1,` +
    `drawbox=x=0:y=0:w=iw:h=ih:color=white:t=fill:enable='eq(${n(flash.frame)})'${sensor}`
  );
}

/** The sound: a quiet tone and, except in the tiny clips, the click. */
export function audioGraph(name) {
  const { seconds } = EVENT_CLIP;
  const click = EVENTS[0].seconds;
  const burst = CLIPS[name].tiny
    ? ''
    : `+0.9*between(t\\,${click}\\,${(click + CLICK_MS / 1000).toFixed(3)})*sin(2*PI*1500*t)`;
  return `aevalsrc=exprs='0.02*sin(2*PI*220*t)${burst}':s=48000:d=${seconds}`;
}

/** The clip's file, synthesised once into bench/.cache. */
export function eventClip(name) {
  const c = CLIPS[name];
  if (!c) throw new Error(`no event clip ${name}`);
  const sources = [videoGraph(name), audioGraph(name)];
  const output = [...c.video, ...aac(), '-shortest'];
  const key = createHash('sha256')
    .update(JSON.stringify({ v: 1, sources, output, frames: frames() }))
    .digest('hex')
    .slice(0, 12);
  return synthesise(`events-${name}-${key}`, {
    what: `${EVENT_CLIP.seconds} s event clip, ${name}`,
    sources,
    output,
    ext: c.ext,
  });
}
