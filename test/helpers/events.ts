/**
 * Event clips for the zoom hints (DESIGN §10): 100 s, 320x180 at 30 fps, with known events at
 * known frames, each encoded several ways (cached in fixtures/.cache like every fixture).
 *
 * A 3x3 run over 100 s has 2 sheets of cells at 3, 8, 14, 19, 25, 31, 36, 42, 47 | 53, 58, 64,
 * 69, 75, 81, 86, 92, 97 s (labels `0:03` ...), so 19 gaps (window edges and the sheet-to-sheet gap
 * included). Each event sits well inside one gap, at least 1.5 s from a cell:
 *
 * - a click in the audio at 1.5 s (the window-start gap, 0:00 .. 0:03);
 * - a hard cut (scene A -> B) at frame 165 (5.5 s: 0:03 .. 0:08);
 * - a one-frame white flash at frame 495 (16.5 s: 0:14 .. 0:19);
 * - a half-second burst of motion in the still scene, frames 990-1004 (33 s: 0:31 .. 0:36);
 * - a hard cut (B -> C) at frame 1515 (50.5 s: the sheet-to-sheet gap 0:47 .. 0:53; off the
 *   fixed-GOP encode's keyframe grid: a cut that falls on a regular keyframe is invisible to the
 *   packet signals, the keyframe is as large as any other);
 * - a tiny change that stays, a 6x6 px mark at frame 2160 (72 s: 0:69 .. 0:75 i.e. `1:09` .. `1:15`).
 *
 * The camera-like variants add sensor noise to every frame (so the still scene still costs
 * bytes, as a real camera's does); the screen-recording variant is flat colours without noise,
 * frames dropped where nothing changes (VFR, at least 2 frames a second, as screen recorders
 * write).
 */
import { once } from 'node:events';
import { writeFile } from 'node:fs/promises';
import { prng } from '../../fixtures/prng.mjs';
import { BITEXACT, cached, FFMPEG, run, withTemp } from './fixtures.js';

export const EVENT_CLIP = { seconds: 100, fps: 30, width: 320, height: 180 } as const;

export type EventKind = 'click' | 'cut' | 'flash' | 'burst' | 'tiny';

export interface ClipEvent {
  kind: EventKind;
  /** First frame of the event (30 fps), or the audio time for a click. */
  seconds: number;
  /** The gap holding it: the labels of its two cells, as `zoom_hints` writes them. */
  gap: { start: string; end: string };
}

export const EVENTS: readonly ClipEvent[] = [
  { kind: 'click', seconds: 1.5, gap: { start: '0:00', end: '0:03' } },
  { kind: 'cut', seconds: 165 / 30, gap: { start: '0:03', end: '0:08' } },
  { kind: 'flash', seconds: 495 / 30, gap: { start: '0:14', end: '0:19' } },
  { kind: 'burst', seconds: 990 / 30, gap: { start: '0:31', end: '0:36' } },
  { kind: 'cut', seconds: 1515 / 30, gap: { start: '0:47', end: '0:53' } },
  { kind: 'tiny', seconds: 2160 / 30, gap: { start: '1:09', end: '1:15' } },
];

const FRAMES = { cut1: 165, flash: 495, burstFrom: 990, burstTo: 1004, cut2: 1515, tiny: 2160 } as const;

export type EventEncoding = 'h264-scenecut' | 'h264-fixed-gop' | 'hevc' | 'vfr-screen';
export const EVENT_ENCODINGS: readonly EventEncoding[] = [
  'h264-scenecut',
  'h264-fixed-gop',
  'hevc',
  'vfr-screen',
];

/** A scene: textured blocks (camera) or flat windows (screen), rgb24. */
function scene(seed: number, screen: boolean): Buffer {
  const { width: w, height: h } = EVENT_CLIP;
  const rnd = prng(seed);
  const img = Buffer.alloc(w * h * 3);
  const base = [rnd() * 200 + 30, rnd() * 200 + 30, rnd() * 200 + 30];
  for (let y = 0; y < h; y++)
    for (let x = 0; x < w; x++) {
      const q = (y * w + x) * 3;
      for (let c = 0; c < 3; c++) img[q + c] = Math.round((base[c] as number) * (0.6 + (0.4 * x) / w));
    }
  // Blocks: windows on a screen, objects in a scene.
  for (let k = 0; k < 12; k++) {
    const [bx, by, bw, bh] = [rnd() * w, rnd() * h, 20 + rnd() * 80, 15 + rnd() * 60].map(Math.floor) as [
      number,
      number,
      number,
      number,
    ];
    const colour = [rnd() * 255, rnd() * 255, rnd() * 255];
    for (let y = by; y < Math.min(h, by + bh); y++)
      for (let x = bx; x < Math.min(w, bx + bw); x++) {
        const q = (y * w + x) * 3;
        const stripe = screen ? 0 : ((x + y) >> 2) & 1 ? 18 : 0;
        for (let c = 0; c < 3; c++) img[q + c] = Math.min(255, (colour[c] as number) + stripe);
      }
  }
  return img;
}

/** Frame n of the clip. */
function frameAt(n: number, scenes: Buffer[], screen: boolean, noise: Uint8Array): Buffer {
  const { width: w, height: h } = EVENT_CLIP;
  if (n === FRAMES.flash) return Buffer.alloc(w * h * 3, 255);
  const which = n < FRAMES.cut1 ? 0 : n < FRAMES.cut2 ? 1 : 2;
  const img = Buffer.from(scenes[which] as Buffer);
  if (!screen) {
    // Sensor noise, different every frame: a still camera scene still costs bytes.
    const off = (n * 7919) % (noise.length - img.length);
    for (let i = 0; i < img.length; i++)
      img[i] = Math.max(0, Math.min(255, (img[i] as number) + (noise[off + i] as number) - 3));
  }
  if (n >= FRAMES.burstFrom && n <= FRAMES.burstTo) {
    // A dark square crossing the frame in half a second.
    const step = n - FRAMES.burstFrom;
    const x0 = 10 + step * 18;
    for (let y = 60; y < 108; y++)
      for (let x = x0; x < Math.min(w, x0 + 48); x++) img.fill(20, (y * w + x) * 3, (y * w + x) * 3 + 3);
  }
  if (n >= FRAMES.tiny) {
    for (let y = 20; y < 26; y++)
      for (let x = 250; x < 256; x++) img.fill(250, (y * w + x) * 3, (y * w + x) * 3 + 2);
  }
  return img;
}

/** Mono 48 kHz s16le: a quiet noise floor and a 5 ms click at 1.5 s. */
function audio(): Buffer {
  const rate = 48_000;
  const n = rate * EVENT_CLIP.seconds;
  const out = Buffer.alloc(n * 2);
  const rnd = prng(0xc11c);
  const click = Math.round(1.5 * rate);
  for (let i = 0; i < n; i++) {
    let v = (rnd() - 0.5) * 0.04;
    if (i >= click && i < click + 240) v = i % 2 ? 0.9 : -0.9;
    out.writeInt16LE(Math.round(v * 32767), i * 2);
  }
  return out;
}

const ENCODERS: Record<EventEncoding, string[]> = {
  // x264's defaults: scene-cut detection on, keyint 250 (min 25), B-frames.
  'h264-scenecut': ['-c:v', 'libx264', '-preset', 'veryfast', '-pix_fmt', 'yuv420p'],
  // A fixed GOP: a keyframe every 2 s and never elsewhere.
  'h264-fixed-gop': [
    ...['-c:v', 'libx264', '-preset', 'veryfast', '-pix_fmt', 'yuv420p'],
    ...['-x264-params', 'scenecut=0:keyint=60:min-keyint=60'],
  ],
  hevc: [
    '-c:v',
    'libx265',
    '-preset',
    'veryfast',
    '-x265-params',
    'log-level=error',
    '-tag:v',
    'hvc1',
    '-pix_fmt',
    'yuv420p',
  ],
  // Frames where nothing changed are dropped (at most 15 in a row), timestamps kept: VFR.
  'vfr-screen': [
    ...['-vf', 'mpdecimate=max=15', '-fps_mode', 'vfr'],
    ...['-c:v', 'libx264', '-preset', 'veryfast', '-pix_fmt', 'yuv420p'],
  ],
};

/** The event clip in one encoding (MP4, AAC audio with the click). */
export function eventClip(encoding: EventEncoding): Promise<string> {
  const screen = encoding === 'vfr-screen';
  return cached(`events-${encoding}`, 'mp4', { EVENT_CLIP, FRAMES, encoding, v: 2 }, (out) =>
    withTemp('s16', async (pcm) => {
      await writeFile(pcm, audio());
      const { width: w, height: h, fps, seconds } = EVENT_CLIP;
      const scenes = [scene(11, screen), scene(22, screen), scene(33, screen)];
      const noise = new Uint8Array(w * h * 3 + 100_000);
      const rnd = prng(0x5eed);
      for (let i = 0; i < noise.length; i++) noise[i] = Math.floor(rnd() * 7);
      await run(
        'ffmpeg',
        [
          ...FFMPEG,
          ...['-f', 'rawvideo', '-pix_fmt', 'rgb24', '-s', `${w}x${h}`, '-r', String(fps), '-i', '-'],
          ...['-f', 's16le', '-ar', '48000', '-ac', '1', '-i', pcm],
          ...['-map', '0:v', '-map', '1:a'],
          ...ENCODERS[encoding],
          ...['-c:a', 'aac', '-b:a', '96k'],
          ...BITEXACT,
          out,
        ],
        {
          feed: async (stdin) => {
            for (let n = 0; n < fps * seconds; n++) {
              if (!stdin.write(frameAt(n, scenes, screen, noise))) await once(stdin, 'drain');
            }
            stdin.end();
          },
        },
      );
    }),
  );
}

export type EventContainer = 'mp4' | 'mkv' | 'webm' | 'ogg' | 'ts';
export const EVENT_CONTAINERS: readonly EventContainer[] = ['mp4', 'mkv', 'webm', 'ogg', 'ts'];

/**
 * The x264 scene-cut event clip in another container: MKV and MPEG-TS carry the same streams
 * (remuxed), WebM re-encodes to VP9 and Opus, Ogg to Theora and Vorbis (each with its encoder's
 * default keyframe placement).
 */
export async function eventClipIn(container: EventContainer): Promise<string> {
  const source = await eventClip('h264-scenecut');
  if (container === 'mp4') return source;
  const codecs: Record<Exclude<EventContainer, 'mp4'>, string[]> = {
    mkv: ['-c', 'copy'],
    ts: ['-c', 'copy'],
    webm: [
      ...['-c:v', 'libvpx-vp9', '-deadline', 'realtime', '-cpu-used', '8', '-b:v', '300k'],
      '-c:a',
      'libopus',
    ],
    ogg: ['-c:v', 'libtheora', '-q:v', '6', '-c:a', 'libvorbis'],
  };
  const ext = container === 'ogg' ? 'ogv' : container;
  return cached(`events-in-${container}`, ext, { source, codecs: codecs[container], v: 1 }, (out) =>
    run('ffmpeg', [...FFMPEG, '-i', source, ...codecs[container], ...BITEXACT, out]),
  );
}

/**
 * The x264 scene-cut event clip three times in a row (300 s, remuxed): long enough that a window
 * in its middle leaves most of it beyond core/zoom.ts PACKET_MARGIN_S; its second copy's cuts
 * are at 105.5 s and 150.5 s.
 */
export async function longEventClip(): Promise<string> {
  const source = await eventClip('h264-scenecut');
  return cached('events-thrice', 'mp4', { source, v: 1 }, (out) =>
    run('ffmpeg', [...FFMPEG, '-stream_loop', '2', '-i', source, '-c', 'copy', ...BITEXACT, out]),
  );
}
