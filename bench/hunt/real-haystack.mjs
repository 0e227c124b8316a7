/**
 * Real-footage haystacks for the hunt and events benchmarks (issue 41): 30 minutes at 320x180,
 * 30 fps, made of pieces of the real videos Debian packages ship (the corpus, fixtures/corpus.json,
 * fetched by `node fixtures/corpus.mjs`), a cut every ~17 s (14 to 20 s; a piece of a shorter
 * source ends with the source), with one needle drawn in at a known frame, encoded three ways.
 * Built once into bench/.cache, keyed by their recipe.
 *
 * Sources (SOURCES, chosen by looking at them): a fixed surveillance camera with walkers, a
 * handheld camera on trees in the wind, a rotating night Earth (a detailed, slowly changing render:
 * large packets, like a timelapse), a handheld camera on a cockatoo, a hand moving a pen over a
 * coin, an archival film (1906, grain and scratches), an animated trailer with its own cuts, a 3D
 * animation, Big Buck Bunny, a stop-motion toy, a screencast with a webcam inset, two game
 * screencasts, an audio-waveform animation. No FATE sample (those come from a repository mirror).
 *
 * Build: each source is normalised once (fps=30, scaled and centre-cropped to 320x180, yuv420p) to
 * an intra-only MJPEG NUT file, so a piece can start at any frame exactly; a haystack is then one
 * ffmpeg run: the concat demuxer over the timeline's pieces, `setpts=N/30/TB` (frame index n is
 * the time n/30), the needle's drawbox, the encode.
 *
 * Needles (REAL_LOOK: the colours the agent is told), starting at frame `frame`:
 *   A  a lasting change: from `frame` on, the whole picture under an orange veil (90 % opaque: the
 *      footage still moves faintly under it, so packets stay real);
 *   B  one all-white frame (a one-frame flash);
 *   C  a red square (80x80, the middle) for 15 frames, among four orange look-alikes (the same
 *      square in orange for 15 frames at other times);
 *   N  no needle (for the false-hint rate).
 * Encodes: `scenecut` (x264 veryfast, its scene-cut detection on, default keyint 250, B-frames),
 * `fixedgop` (scene-cut off, a keyframe every 250 frames), `nobf` (as scenecut with `-bf 0`).
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { corpusDir } from '../../fixtures/corpus.mjs';
import { prng } from '../../fixtures/prng.mjs';
import { CACHE, x264 } from '../clip.mjs';
import { BRIEF_FRAMES_30, SIZE, SQUARE } from './haystack.mjs';

export const REAL_FPS = 30;
export const REAL_MINUTES = 30;
/** A piece lasts CUT_S seconds, give or take CUT_JITTER_S (uniform), unless its source ends first. */
export const CUT_S = 17;
export const CUT_JITTER_S = 3;

/**
 * The sources: a corpus file, the part of it used (seconds), what it shows. The Debian package
 * each comes from is in fixtures/corpus.json.
 */
export const SOURCES = [
  { file: 'opencv-vtest.avi', to: 79, what: 'fixed surveillance camera, walkers (opencv-doc)' },
  { file: 'opencv-tree.avi', to: 29.5, what: 'handheld camera, trees in the wind (opencv-doc)' },
  { file: 'tracker-mkv-basic.mkv', to: 30, what: 'rotating night Earth, detailed render (tracker-miners)' },
  { file: 'imageio-cockatoo.mp4', to: 14, what: 'handheld camera, a cockatoo (python3-imageio)' },
  { file: 'node-opencv-motion.mov', to: 8, what: 'camera, a pen over a coin (node-opencv)' },
  {
    file: 'nbsphinx-Shepard_Calais_1906.ogv',
    to: 19,
    what: 'archival film 1906, grain (python-nbsphinx-doc)',
  },
  { file: 'opencv-Megamind.avi', to: 11, what: 'animated trailer, its own cuts (opencv-doc)' },
  { file: 'pampi-tour.mp4', to: 11, what: '3D animation (pampi)' },
  { file: 'mimetype-mkv.mkv', to: 3.5, what: 'Big Buck Bunny (golang-github-gabriel-vasile-mimetype-dev)' },
  { file: 'mimetype-mp4.mp4', to: 5.5, what: 'stop-motion toy (golang-github-gabriel-vasile-mimetype-dev)' },
  {
    file: 'forensics-movie-hello.mp4',
    to: 8.2,
    what: 'screencast with a webcam inset (forensics-samples-files)',
  },
  { file: 'gnome-tetravex-video.ogv', to: 24, what: 'game screencast (gnome-tetravex)' },
  { file: 'gnome-glines-demo.ogv', to: 20, what: 'game screencast (five-or-more)' },
  { file: 'hollywood-soundwave.mp4', to: 60, what: 'audio-waveform animation (hollywood)' },
];

/** What the needles look like (sRGB), as the agent is told. */
export const REAL_LOOK = {
  changed: [0xc0, 0x70, 0x30],
  flash: [255, 255, 255],
  needle: [255, 0, 0],
  decoy: [255, 150, 0],
};
export const REAL_CLASSES = ['A', 'B', 'C', 'N'];

export const REAL_ENCODES = {
  scenecut: x264('veryfast', '-sc_threshold', '40'),
  fixedgop: x264('veryfast', '-sc_threshold', '0', '-g', '250'),
  nobf: x264('veryfast', '-sc_threshold', '40', '-bf', '0'),
};

const hex = ([r, g, b]) => `0x${[r, g, b].map((v) => v.toString(16).padStart(2, '0')).join('')}`;

/**
 * The timeline (pure): pieces `{ source, from, frames }` (source index, first frame in it, length)
 * filling `total` frames, sources taken in shuffled rounds so neighbours differ, each piece
 * CUT_S ± CUT_JITTER_S long or the rest of its source, starting at a random frame that leaves it
 * room. `lengths[i]`: source i's frames.
 */
export function timeline(lengths, total, seed = 41, fps = REAL_FPS) {
  const random = prng(seed);
  const pieces = [];
  let at = 0;
  let order = [];
  let last = -1;
  while (at < total) {
    if (!order.length) {
      order = lengths.map((_, i) => i);
      for (let i = order.length - 1; i > 0; i--) {
        const j = Math.floor(random() * (i + 1));
        [order[i], order[j]] = [order[j], order[i]];
      }
      if (order[0] === last) order.push(order.shift());
    }
    const source = order.shift();
    last = source;
    const want = Math.round((CUT_S + (2 * random() - 1) * CUT_JITTER_S) * fps);
    const length = lengths[source];
    const frames = Math.min(want, length, total - at);
    const from = Math.floor(random() * (length - frames + 1));
    pieces.push({ source, from, frames, at });
    at += frames;
  }
  return pieces;
}

/**
 * A real haystack's recipe: class, needle frame (off whole seconds), decoys (class C), encode.
 * Depth 0..1 places the needle; the hay is the same for every recipe.
 */
export function realRecipe(needleClass, depth, encode = 'scenecut') {
  if (!REAL_CLASSES.includes(needleClass)) throw new Error(`no real needle class ${needleClass}`);
  if (!REAL_ENCODES[encode]) throw new Error(`no encode ${encode}`);
  const fps = REAL_FPS;
  const frames = REAL_MINUTES * 60 * fps;
  const frame = Math.round(depth * frames) + Math.round(fps * 0.37) + 3;
  const brief = BRIEF_FRAMES_30;
  const decoys =
    needleClass === 'C'
      ? [0.17, 0.36, 0.55, 0.8]
          .map((d) => Math.round(((d + depth) % 1) * frames) + 11)
          .filter((f) => Math.abs(f - frame) > fps * 60)
      : [];
  return { hay: 'real', needleClass, fps, depth, encode, frame, frames, brief, decoys };
}

/** The needle's filter (after `setpts`, so `n` is the haystack's frame index). */
export function needleFilter(r) {
  const between = (f) => `between(n\\,${f}\\,${f + r.brief - 1})`;
  const square = (colour, frames) =>
    `drawbox=x=${SQUARE.x}:y=${SQUARE.y}:w=${SQUARE.w}:h=${SQUARE.h}:color=${hex(colour)}:t=fill:enable='${frames.map(between).join('+')}'`;
  switch (r.needleClass) {
    case 'A':
      return `drawbox=x=0:y=0:w=iw:h=ih:color=${hex(REAL_LOOK.changed)}@0.9:t=fill:enable='gte(n\\,${r.frame})'`;
    case 'B':
      return `drawbox=x=0:y=0:w=iw:h=ih:color=${hex(REAL_LOOK.flash)}:t=fill:enable='eq(n\\,${r.frame})'`;
    case 'C':
      return [
        square(REAL_LOOK.needle, [r.frame]),
        ...(r.decoys.length ? [square(REAL_LOOK.decoy, r.decoys)] : []),
      ].join(',');
    default:
      return 'null';
  }
}

const run = (args, opts = {}) =>
  execFileSync('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-nostdin', '-y', ...args], {
    stdio: ['ignore', 'pipe', 'inherit'],
    maxBuffer: 1024 * 1024 * 1024,
    ...opts,
  });

const NORMALISE = `fps=${REAL_FPS},scale=${SIZE.width}:${SIZE.height}:force_original_aspect_ratio=increase,crop=${SIZE.width}:${SIZE.height},setsar=1,format=yuvj420p`;

/** A source normalised to 320x180 at 30 fps, intra-only (MJPEG in NUT), once; with its frame count. */
export function normalised(source, dir = join(CACHE, 'real-sources')) {
  const input = join(corpusDir(), source.file);
  if (!existsSync(input))
    throw new Error(`${source.file} is not in the corpus: run node fixtures/corpus.mjs`);
  const key = createHash('sha256')
    .update(JSON.stringify({ v: 1, source, NORMALISE }))
    .digest('hex')
    .slice(0, 10);
  const out = join(dir, `${source.file.replace(/\.[^.]+$/, '')}-${key}.nut`);
  if (!existsSync(out)) {
    mkdirSync(dir, { recursive: true });
    console.error(`bench: normalising ${source.file} (once, cached in bench/.cache/real-sources)`);
    const partial = `${out}.partial.nut`;
    run([
      '-i',
      input,
      '-t',
      String(source.to),
      '-an',
      '-sn',
      '-vf',
      NORMALISE,
      '-c:v',
      'mjpeg',
      '-q:v',
      '3',
      partial,
    ]);
    renameSync(partial, out);
  }
  const frames = Number(
    execFileSync(
      'ffprobe',
      [
        '-v',
        'error',
        '-count_packets',
        '-select_streams',
        'v:0',
        '-show_entries',
        'stream=nb_read_packets',
        '-of',
        'csv=p=0',
        out,
      ],
      { encoding: 'utf8' },
    ).trim(),
  );
  return { ...source, path: out, frames };
}

/** Every source normalised, and the hay's timeline over them. */
export function hay() {
  const sources = SOURCES.map((s) => normalised(s));
  const total = REAL_MINUTES * 60 * REAL_FPS;
  return {
    sources,
    pieces: timeline(
      sources.map((s) => s.frames),
      total,
    ),
    total,
  };
}

/** The concat demuxer's script for the pieces: exact frames (intra-only, 1/30 s timestamps). */
function concatScript(sources, pieces) {
  const eps = 0.25 / REAL_FPS;
  return `ffconcat version 1.0\n${pieces
    .map((p) => {
      const s = sources[p.source];
      return `file '${s.path}'\ninpoint ${(p.from / REAL_FPS - eps).toFixed(6)}\noutpoint ${((p.from + p.frames) / REAL_FPS - eps).toFixed(6)}\n`;
    })
    .join('')}`;
}

/** The haystack's file for a recipe, built once into `dir` (bench/.cache by default). */
export function realHaystack(r, dir = CACHE) {
  const { sources, pieces, total } = hay();
  const key = createHash('sha256')
    .update(
      JSON.stringify({
        v: 1,
        r,
        pieces,
        sources: sources.map((s) => [s.path, s.frames]),
        LOOK: REAL_LOOK,
        SQUARE,
        enc: REAL_ENCODES[r.encode],
      }),
    )
    .digest('hex')
    .slice(0, 12);
  const out = join(dir, `real-${r.needleClass}-${r.encode}-${Math.round(r.depth * 100)}-${key}.mp4`);
  if (existsSync(out)) return out;
  mkdirSync(dir, { recursive: true });
  console.error(`bench: building ${out} (30 min of real footage, ${r.encode}); once`);
  const script = `${out}.ffconcat`;
  writeFileSync(script, concatScript(sources, pieces));
  const partial = `${out}.partial.mp4`;
  run([
    ...['-f', 'concat', '-safe', '0', '-i', script],
    ...['-vf', `settb=1/${REAL_FPS},setpts=N,trim=end_frame=${total},format=yuv420p,${needleFilter(r)}`],
    ...['-fps_mode', 'passthrough'],
    ...REAL_ENCODES[r.encode],
    ...['-pix_fmt', 'yuv420p', '-an', partial],
  ]);
  renameSync(partial, out);
  return out;
}

/** Where each piece of the hay starts (frames): the hay's own cuts, for the events oracle. */
export function pieceStarts() {
  return hay().pieces.map((p) => p.at);
}
