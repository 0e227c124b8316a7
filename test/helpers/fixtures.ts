/**
 * Fixture clips, synthesised with ffmpeg on demand and cached in `fixtures/.cache/` (gitignored).
 *
 * Every maker is keyed by a hash of its parameters (plus {@link FIXTURE_VERSION}), so a second run
 * reuses the file. A clip is written under a temporary name and renamed into place, and a lock file
 * keeps two vitest workers from building the same clip at once, so nobody ever sees half a file.
 *
 * Makers only: what a clip should show and where its data ends is the oracle's (oracle.ts).
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdir, open, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { INDEX_LAYOUT } from './frames.js';
import { encodePaffStream, GOP_DECODE_ORDER as PAFF_GOP } from './h264-fields.js';
import { encodeFieldStream, GOP_DECODE_ORDER } from './mpeg2-fields.js';

const execFileP = promisify(execFile);

/** Bump when a maker changes what it writes, so stale cache entries are not reused. */
export const FIXTURE_VERSION = 1;

/** Absolute path of the cache directory (`VIDSHEET_FIXTURE_CACHE` overrides it, e.g. to time a cold build). */
export const CACHE_DIR =
  process.env.VIDSHEET_FIXTURE_CACHE ?? fileURLToPath(new URL('../../fixtures/.cache/', import.meta.url));

// ---------------------------------------------------------------------------------------------
// Process and cache plumbing

interface RunOptions {
  /** Called with the child's stdin; must end it. */
  feed?: (stdin: NonNullable<ChildProcess['stdin']>) => Promise<void>;
}

/** Runs a command (no shell), rejecting with the tail of its stderr when it fails. */
export async function run(cmd: string, args: string[], opts: RunOptions = {}): Promise<void> {
  const child = spawn(cmd, args, { stdio: [opts.feed ? 'pipe' : 'ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (d: string) => {
    stderr = (stderr + d).slice(-4000);
  });
  const exited = new Promise<number | null>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => resolve(code));
  });
  let feedError: unknown;
  if (opts.feed && child.stdin) {
    const stdin = child.stdin;
    stdin.on('error', () => {}); // EPIPE when ffmpeg dies early; the exit code tells the story
    await opts.feed(stdin).catch((e: unknown) => {
      feedError = e;
      stdin.destroy();
    });
  }
  const code = await exited;
  if (code !== 0) throw new Error(`${cmd} ${args.join(' ')} exited with ${code}:\n${stderr}`);
  if (feedError) throw feedError;
}

/** Runs ffprobe and parses its JSON output. */
async function ffprobeJson(args: string[]): Promise<unknown> {
  const { stdout } = await execFileP('ffprobe', ['-v', 'error', '-of', 'json', ...args], {
    maxBuffer: 256 * 1024 * 1024,
  });
  return JSON.parse(stdout);
}

export const FFMPEG = ['-hide_banner', '-nostdin', '-loglevel', 'error', '-y'];
/** Keeps output bytes independent of the ffmpeg build's version string. */
export const BITEXACT = [
  '-fflags',
  '+bitexact',
  '-flags:v',
  '+bitexact',
  '-flags:a',
  '+bitexact',
  '-map_metadata',
  '-1',
];

/** Small fixture clips: fast H.264 in 4:2:0, which every engine decodes. */
const X264_FAST = ['-c:v', 'libx264', '-preset', 'ultrafast', '-pix_fmt', 'yuv420p'];

function hashOf(value: unknown): string {
  return createHash('sha256')
    .update(JSON.stringify({ v: FIXTURE_VERSION, value }))
    .digest('hex')
    .slice(0, 16);
}

async function exists(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isFile();
  } catch {
    return false;
  }
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Takes `<path>.lock`, or waits for whoever holds it; returns false when the file appeared meanwhile. */
async function lock(path: string): Promise<boolean> {
  const lockPath = `${path}.lock`;
  for (;;) {
    if (await exists(path)) return false;
    try {
      const fh = await open(lockPath, 'wx');
      await fh.writeFile(String(process.pid));
      await fh.close();
      if (!(await exists(path))) return true;
      await rm(lockPath, { force: true }); // finished by someone else just before we locked
      return false;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
    const holder = Number.parseInt(await readFile(lockPath, 'utf8').catch(() => ''), 10);
    if (Number.isFinite(holder) && holder > 0 && !pidAlive(holder)) {
      await rm(lockPath, { force: true }); // a crashed run's leftover
      continue;
    }
    await sleep(100);
  }
}

const inFlight = new Map<string, Promise<string>>();

/**
 * Returns `fixtures/.cache/<name>-<hash>.<ext>`, building it with `build(tmpPath)` when absent.
 * `build` writes to the temporary path it is given (same extension), which is then renamed.
 */
export async function cached(
  name: string,
  ext: string,
  params: unknown,
  build: (tmpPath: string) => Promise<void>,
): Promise<string> {
  const path = join(CACHE_DIR, `${name}-${hashOf({ name, ext, params })}.${ext}`);
  const pending = inFlight.get(path);
  if (pending) return pending;
  const job = (async () => {
    if (await exists(path)) return path;
    await mkdir(CACHE_DIR, { recursive: true });
    if (!(await lock(path))) return path;
    const tmp = join(CACHE_DIR, `${name}.tmp-${process.pid}-${randomBytes(4).toString('hex')}.${ext}`);
    try {
      await build(tmp);
      await rename(tmp, path);
    } finally {
      await rm(tmp, { force: true });
      await rm(`${path}.lock`, { force: true });
    }
    return path;
  })();
  inFlight.set(path, job);
  job.catch(() => inFlight.delete(path));
  return job;
}

/** A temporary file in the cache dir, removed after `fn`. */
export async function withTemp<T>(ext: string, fn: (path: string) => Promise<T>): Promise<T> {
  await mkdir(CACHE_DIR, { recursive: true });
  const tmp = join(CACHE_DIR, `scratch.tmp-${process.pid}-${randomBytes(4).toString('hex')}.${ext}`);
  try {
    return await fn(tmp);
  } finally {
    await rm(tmp, { force: true });
  }
}

// ---------------------------------------------------------------------------------------------
// The index clip

export type Container = 'mp4' | 'mkv' | 'ts';

export interface IndexClipOptions {
  /** Frame rate: a number (25) or an exact rational string ('30000/1001'). Default 25. */
  fps?: number | string;
  /** Length in seconds; the clip has round(seconds * fps) frames (at most 4096). */
  seconds: number;
  /** Coded width and height (even). For rotate 90/270 the displayed frame is height x width. */
  width?: number;
  height?: number;
  /** Keyframe interval in frames (also keyint_min; scene cuts off). Default 250. */
  gop?: number;
  /** B-frames (x264 --bframes with b-adapt 0, so they really happen). Default 3. */
  bframes?: number;
  /** Default 'mp4'. */
  container?: Container;
  /** Default 'h264' (libx264); 'hevc' uses libx265. */
  codec?: 'h264' | 'hevc';
  /**
   * MPEG-TS only: timestamps start here (`-output_ts_offset`). The muxer keeps its default 1.4 s
   * mux delay on top, so the format start_time is about startOffsetSeconds + 1.4.
   */
  startOffsetSeconds?: number;
  /**
   * MP4 only: a display matrix (written by a `-metadata:s:v:0 rotate=N` stream-copy remux). The
   * pixels are stored pre-rotated so that the *displayed* frame (after ffmpeg's autorotate) shows
   * the normal upright index pattern. In ffmpeg 5.1, rotate=90 gives ffprobe `rotation: 90`
   * (displayed = stored turned 90° counter-clockwise) and rotate=270 gives `rotation: -90`
   * (clockwise; what a phone held upright writes).
   */
  rotate?: 90 | 270;
  /** Sample aspect ratio stored in the stream, e.g. '2:1' (a 320x240 frame displays 640x240). */
  sar?: string;
  /**
   * H.264 only: x264's open GOPs (every keyframe but the first a recovery-point I-frame, not an
   * IDR, whose leading B-frames reference the GOP before), the legitimate kind cameras write.
   */
  openGop?: boolean;
  /**
   * H.264 only: x264's reference frames (`ref`; the preset's, 1, by default). x264 writes at
   * least 4 in the SPS when B-frames make a pyramid.
   */
  refs?: number;
  /** Default 'yuv420p'. */
  pixFmt?: 'yuv420p' | 'yuv420p10le';
  /** Adds a quiet 440 Hz sine track (AAC, 48 kHz mono, amplitude 1/8). Default false. */
  audio?: boolean;
}

function parseFps(fps: number | string): { num: number; den: number; value: number } {
  if (typeof fps === 'number') {
    if (!(fps > 0)) throw new Error(`bad fps ${fps}`);
    // Keep exact decimals such as 23.976 exact by scaling to thousandths.
    const den = Number.isInteger(fps) ? 1 : 1000;
    return { num: Math.round(fps * den), den, value: fps };
  }
  const m = /^(\d+)\/(\d+)$/.exec(fps);
  if (!m) throw new Error(`bad fps ${fps}`);
  const num = Number(m[1]);
  const den = Number(m[2]);
  return { num, den, value: num / den };
}

/**
 * For each pixel of the displayed frame (dw x dh): -1 for the grey band, else the block number.
 * Boundaries are snapped to even pixels so 4:2:0 chroma does not smear them.
 */
function displayBlockMap(dw: number, dh: number): Int8Array {
  const { cols, rows, blockFraction } = INDEX_LAYOUT;
  const even = (v: number) => 2 * Math.round(v / 2);
  const colEdges = Array.from({ length: cols + 1 }, (_, c) => even((c * dw) / cols));
  const blockH = even(dh * blockFraction);
  const rowEdges = Array.from({ length: rows + 1 }, (_, r) => even((r * blockH) / rows));
  const map = new Int8Array(dw * dh).fill(-1);
  for (let y = 0; y < blockH; y++) {
    let row = 0;
    while (y >= (rowEdges[row + 1] as number)) row++;
    for (let x = 0; x < dw; x++) {
      let col = 0;
      while (x >= (colEdges[col + 1] as number)) col++;
      map[y * dw + x] = row * cols + col;
    }
  }
  return map;
}

/** The block map in stored (coded) orientation, so that after display rotation it is upright. */
function storedBlockMap(w: number, h: number, rotate: 0 | 90 | 270): Int8Array {
  if (rotate === 0) return displayBlockMap(w, h);
  const dw = h;
  const dh = w;
  const disp = displayBlockMap(dw, dh);
  const map = new Int8Array(w * h);
  for (let sy = 0; sy < h; sy++) {
    for (let sx = 0; sx < w; sx++) {
      // rotation +90 (counter-clockwise): stored (sx, sy) lands at (sy, w-1-sx);
      // rotation -90 (clockwise): at (h-1-sy, sx).
      const dx = rotate === 90 ? sy : h - 1 - sy;
      const dy = rotate === 90 ? w - 1 - sx : sx;
      map[sy * w + sx] = disp[dy * dw + dx] as number;
    }
  }
  return map;
}

/**
 * A clip whose frame n (display order, 0-based) shows n in the block pattern described in
 * `frames.ts` (see {@link INDEX_LAYOUT}). Frames are generated here as rgb24 and piped to ffmpeg.
 */
export function indexClip(opts: IndexClipOptions): Promise<string> {
  const o = {
    fps: opts.fps ?? 25,
    seconds: opts.seconds,
    width: opts.width ?? 320,
    height: opts.height ?? 240,
    gop: opts.gop ?? 250,
    bframes: opts.bframes ?? 3,
    container: opts.container ?? 'mp4',
    codec: opts.codec ?? 'h264',
    startOffsetSeconds: opts.startOffsetSeconds ?? null,
    rotate: opts.rotate ?? 0,
    sar: opts.sar ?? null,
    pixFmt: opts.pixFmt ?? 'yuv420p',
    audio: opts.audio ?? false,
    // Only when asked for: the options name the cached file, and older clips keep their names.
    ...(opts.openGop ? { openGop: true } : {}),
    ...(opts.refs !== undefined ? { refs: opts.refs } : {}),
  } as const;
  const fps = parseFps(o.fps);
  const frames = Math.round(o.seconds * fps.value);
  if (frames < 1 || frames > 2 ** INDEX_LAYOUT.bits)
    throw new Error(`indexClip: ${frames} frames out of range`);
  if (o.width % 2 || o.height % 2) throw new Error('indexClip: width and height must be even');
  if (o.rotate && o.container !== 'mp4') throw new Error('indexClip: rotate needs container mp4');
  if (o.startOffsetSeconds !== null && o.container !== 'ts') {
    throw new Error('indexClip: startOffsetSeconds needs container ts');
  }
  const base = [o.codec, o.container, `${o.width}x${o.height}`, o.rotate ? `rot${o.rotate}` : ''].filter(
    Boolean,
  );
  return cached(`index-${base.join('-')}`, o.container, o, async (out) => {
    const encoded = o.rotate ? out.replace(/\.mp4$/, '.norot.mp4') : out;
    const { width: w, height: h } = o;
    const map = storedBlockMap(w, h, o.rotate);
    const grey = INDEX_LAYOUT.grey;
    const feed = async (stdin: NonNullable<ChildProcess['stdin']>) => {
      const frame = Buffer.alloc(w * h * 3);
      for (let n = 0; n < frames; n++) {
        for (let p = 0, q = 0; p < w * h; p++, q += 3) {
          const k = map[p] as number;
          const v = k < 0 ? grey : (n >> k) & 1 ? 255 : 0;
          frame[q] = v;
          frame[q + 1] = v;
          frame[q + 2] = v;
        }
        // A fresh copy per write: the stream may still hold the previous buffer.
        if (!stdin.write(Buffer.from(frame))) await once(stdin, 'drain');
      }
      stdin.end();
    };
    const args = [...FFMPEG, '-f', 'rawvideo', '-pix_fmt', 'rgb24', '-s', `${w}x${h}`];
    args.push('-r', `${fps.num}/${fps.den}`, '-i', '-');
    if (o.audio) {
      args.push('-f', 'lavfi', '-i', `sine=frequency=440:sample_rate=48000:duration=${frames / fps.value}`);
    }
    args.push('-map', '0:v');
    if (o.audio) args.push('-map', '1:a', '-c:a', 'aac', '-b:a', '64k');
    if (o.sar) args.push('-vf', `setsar=${o.sar.replace(':', '/')}`);
    args.push('-pix_fmt', o.pixFmt, '-fps_mode', 'passthrough');
    if (o.codec === 'h264') {
      args.push('-c:v', 'libx264', '-preset', 'veryfast', '-crf', '16');
      args.push('-bf', String(o.bframes), '-g', String(o.gop), '-keyint_min', String(o.gop));
      const x264 = [
        'b-adapt=0',
        ...('openGop' in o ? ['open-gop=1'] : []),
        ...('refs' in o ? [`ref=${o.refs}`] : []),
      ];
      args.push('-sc_threshold', '0', '-x264-params', x264.join(':'));
    } else {
      const x265 = [
        `keyint=${o.gop}`,
        `min-keyint=${o.gop}`,
        'scenecut=0',
        `bframes=${o.bframes}`,
        'b-adapt=0',
        'log-level=error',
      ];
      args.push('-c:v', 'libx265', '-preset', 'veryfast', '-crf', '18', '-x265-params', x265.join(':'));
      if (o.container === 'mp4') args.push('-tag:v', 'hvc1');
    }
    if (o.container === 'ts' && o.startOffsetSeconds !== null) {
      args.push('-output_ts_offset', String(o.startOffsetSeconds));
    }
    args.push(...BITEXACT, encoded);
    try {
      await run('ffmpeg', args, { feed });
      if (o.rotate) {
        // ffmpeg 5.1 ignores the rotate tag when encoding; a stream copy turns it into a display matrix.
        await run('ffmpeg', [
          ...FFMPEG,
          '-i',
          encoded,
          '-map',
          '0',
          '-c',
          'copy',
          '-metadata:s:v:0',
          `rotate=${o.rotate}`,
          ...BITEXACT,
          out,
        ]);
      }
    } finally {
      if (encoded !== out) await rm(encoded, { force: true });
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Audio clips

/** Sample rate of {@link audioClip}. */
export const AUDIO_RATE = 48_000;

/** What {@link audioClip} contains; everything else is digital silence. Times in seconds. */
export const AUDIO_EVENTS = {
  /** 3 kHz sine burst, phase 0 at its start. */
  tone: { start: 5.0, end: 5.05, frequency: 3000, amplitude: 0.9 },
  /** A rectangular click: `samples` samples at +amplitude. */
  click: { start: 12.0, samples: 48, amplitude: 0.99 },
  /** 100 Hz hum, phase 0 at its start. */
  hum: { start: 14.5, end: 15.5, frequency: 100, amplitude: 0.05 },
  /** Clip length. */
  duration: 20,
} as const;

/** Float sample value to s16, as the PCM is written. */
export const toS16 = (v: number): number => Math.max(-32768, Math.min(32767, Math.round(v * 32767)));

/** The exact mono s16 PCM of {@link audioClip} (also what a test expects to decode back). */
export function audioClipSamples(): Int16Array {
  const { tone, click, hum, duration } = AUDIO_EVENTS;
  const pcm = new Int16Array(duration * AUDIO_RATE);
  const at = (t: number) => Math.round(t * AUDIO_RATE);
  for (let i = at(tone.start); i < at(tone.end); i++) {
    const t = (i - at(tone.start)) / AUDIO_RATE;
    pcm[i] = toS16(tone.amplitude * Math.sin(2 * Math.PI * tone.frequency * t));
  }
  for (let i = at(click.start); i < at(click.start) + click.samples; i++) pcm[i] = toS16(click.amplitude);
  for (let i = at(hum.start); i < at(hum.end); i++) {
    const t = (i - at(hum.start)) / AUDIO_RATE;
    pcm[i] = toS16(hum.amplitude * Math.sin(2 * Math.PI * hum.frequency * t));
  }
  return pcm;
}

/**
 * A 20 s clip (160x90 flat colour, 10 fps, H.264) whose 48 kHz mono audio is
 * {@link audioClipSamples}: silence plus the {@link AUDIO_EVENTS}.
 *
 * Default `container: 'mkv'`: PCM s16le, bit-exact (decodes back to the very samples). `'mp4'`:
 * AAC 192 kb/s, whose edit list hides the encoder delay but which smears the click and adds
 * low-level noise around each event.
 */
export function audioClip(opts: { container?: 'mkv' | 'mp4' } = {}): Promise<string> {
  const container = opts.container ?? 'mkv';
  return cached(`audio-${container}`, container, { container, events: AUDIO_EVENTS }, (out) =>
    withTemp('s16le', async (pcmPath) => {
      const pcm = audioClipSamples();
      await writeFile(pcmPath, Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength));
      const audioCodec = container === 'mkv' ? ['-c:a', 'pcm_s16le'] : ['-c:a', 'aac', '-b:a', '192k'];
      await run('ffmpeg', [
        ...FFMPEG,
        '-f',
        'lavfi',
        '-i',
        `color=c=0x2a4d69:s=160x90:r=10:d=${AUDIO_EVENTS.duration}`,
        '-f',
        's16le',
        '-ar',
        String(AUDIO_RATE),
        '-ac',
        '1',
        '-i',
        pcmPath,
        '-map',
        '0:v',
        '-map',
        '1:a',
        ...X264_FAST,
        ...audioCodec,
        ...BITEXACT,
        out,
      ]);
    }),
  );
}

function smallVideoArgs(seconds: number): string[] {
  return ['-f', 'lavfi', '-i', `testsrc2=s=160x90:r=10:d=${seconds}`];
}

/** A 10 s clip (160x90 testsrc2, 10 fps, H.264, mp4) with an all-zero AAC track (48 kHz mono). */
export function silentAudioClip(): Promise<string> {
  return cached('silent-audio', 'mp4', {}, (out) =>
    run('ffmpeg', [
      ...FFMPEG,
      ...smallVideoArgs(10),
      '-f',
      'lavfi',
      '-i',
      'anullsrc=channel_layout=mono:sample_rate=48000',
      '-t',
      '10',
      '-map',
      '0:v',
      '-map',
      '1:a',
      ...X264_FAST,
      '-c:a',
      'aac',
      '-b:a',
      '64k',
      ...BITEXACT,
      out,
    ]),
  );
}

/** A 10 s clip (160x90 testsrc2, 10 fps, H.264, mp4) with no audio stream at all. */
export function noAudioClip(): Promise<string> {
  return cached('no-audio', 'mp4', {}, (out) =>
    run('ffmpeg', [...FFMPEG, ...smallVideoArgs(10), ...X264_FAST, ...BITEXACT, out]),
  );
}

// ---------------------------------------------------------------------------------------------
// Cheap clips of a given length

export interface PlainClipOptions {
  /** Default 64. */
  width?: number;
  /** Default 36. */
  height?: number;
  /** Default 5. */
  fps?: number;
  /** Default 'mp4'. */
  container?: Container;
  /** Adds a 440 Hz AAC track. Default false. */
  audio?: boolean;
}

/**
 * A cheap `testsrc2` clip of exactly `seconds` (64x36, 5 fps, H.264 ultrafast, keyframe every
 * 10 s), for sheet-count and window tests. 200 s builds in about a second.
 */
export function plainClip(seconds: number, opts: PlainClipOptions = {}): Promise<string> {
  const o = {
    seconds,
    width: opts.width ?? 64,
    height: opts.height ?? 36,
    fps: opts.fps ?? 5,
    container: opts.container ?? 'mp4',
    audio: opts.audio ?? false,
  };
  return cached(`plain-${seconds}s`, o.container, o, (out) => {
    const args = [
      ...FFMPEG,
      '-f',
      'lavfi',
      '-i',
      `testsrc2=s=${o.width}x${o.height}:r=${o.fps}:d=${seconds}`,
    ];
    if (o.audio) {
      args.push('-f', 'lavfi', '-i', `sine=frequency=440:sample_rate=48000:duration=${seconds}`);
      args.push('-map', '0:v', '-map', '1:a', '-c:a', 'aac', '-b:a', '32k');
    }
    args.push('-c:v', 'libx264', '-preset', 'ultrafast', '-g', String(o.fps * 10), '-pix_fmt', 'yuv420p');
    args.push(...BITEXACT, out);
    return run('ffmpeg', args);
  });
}

/**
 * Colour noise, every pixel black or a full primary, new every frame (320x180, 5 fps, no audio):
 * sheets of it compress as badly as a JPEG can, so a 6x6 sheet is about 750 KB (the inline
 * images' shrink path). About 16 MB per 100 s.
 */
export function noiseClip(seconds: number): Promise<string> {
  const o = { seconds, width: 320, height: 180, fps: 5 };
  const bit = "'255*gt(random(1),0.5)'";
  return cached(`noise-${seconds}s`, 'mp4', o, (out) =>
    run('ffmpeg', [
      ...FFMPEG,
      '-f',
      'lavfi',
      '-i',
      `nullsrc=s=${o.width}x${o.height}:r=${o.fps}:d=${seconds},format=gbrp,geq=r=${bit}:g=${bit}:b=${bit}`,
      '-c:v',
      'libx264',
      '-preset',
      'ultrafast',
      '-crf',
      '30',
      '-g',
      String(o.fps * 10),
      '-pix_fmt',
      'yuv420p',
      ...BITEXACT,
      out,
    ]),
  );
}

/**
 * A 30-minute clip that is slow to sheet on purpose, yet small (160x90), for jobs that must outlive
 * a short deadline. What costs is the frame count, not the frames' size, and the two engines need
 * different clips:
 * - `fps: 150`: 270,000 frames in one GOP (no scene-cut keyframes either), so the native engine
 *   must decode them all in order on one thread (about 8 s of CPU on an idle machine), with no
 *   keyframe to split the work over parallel decoders. At 25 fps with a keyframe a minute the
 *   native job took 2.9 s on an idle runner, and a 3 s deadline was a coin toss.
 * - `fps: 25` (45,000 frames, a keyframe every 60 s, 14 MB): minutes with the fallback (one ffmpeg
 *   per cell, each decoding from its keyframe), whose ffprobe pass over every packet still ends
 *   within seconds, so the deadline finds the fallback's ffmpeg children running.
 */
export function slowDecodeClip(fps: 25 | 150): Promise<string> {
  const seconds = 1800;
  const gop = fps === 25 ? 1500 : seconds * fps;
  const o = { seconds, width: 160, height: 90, fps, gop, scenecut: fps === 25, crf: 45 };
  return cached('slow-decode-1800s', 'mp4', o, (out) =>
    run('ffmpeg', [
      ...FFMPEG,
      '-f',
      'lavfi',
      '-i',
      `testsrc2=s=${o.width}x${o.height}:r=${o.fps}:d=${o.seconds}`,
      '-c:v',
      'libx264',
      '-preset',
      'ultrafast',
      '-crf',
      String(o.crf),
      '-g',
      String(o.gop),
      ...(o.scenecut ? [] : ['-sc_threshold', '0']),
      '-pix_fmt',
      'yuv420p',
      ...BITEXACT,
      out,
    ]),
  );
}

// ---------------------------------------------------------------------------------------------
// Damaged inputs

export interface DamagedFile {
  /** Also the file's base name, e.g. 'truncated-50.mp4'. */
  name: string;
  path: string;
  /**
   * What a reader should make of it, measured with ffmpeg 5.1:
   * - 'unreadable': no decodable video (probe fails or finds no video stream);
   * - 'partial': probes as a normal video but some frames cannot be decoded.
   */
  expect: 'unreadable' | 'partial';
  description: string;
}

/** Deterministic pseudo-random bytes (xorshift32). */
function pseudoRandomBytes(n: number, seed: number): Buffer {
  const out = Buffer.alloc(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    out[i] = x & 0xff;
  }
  return out;
}

/** A valid 4 s source (320x180 testsrc2, 25 fps, H.264 with B-frames, AAC) for damaging. */
function damageSource(container: Container, faststart: boolean): Promise<string> {
  return cached(`damage-src${faststart ? '-faststart' : ''}`, container, { container, faststart }, (out) => {
    const args = [...FFMPEG, '-f', 'lavfi', '-i', 'testsrc2=s=320x180:r=25:d=4'];
    args.push('-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=48000:duration=4');
    args.push('-map', '0:v', '-map', '1:a', '-c:v', 'libx264', '-preset', 'veryfast', '-g', '25');
    args.push('-pix_fmt', 'yuv420p', '-c:a', 'aac', '-b:a', '64k');
    if (faststart) args.push('-movflags', '+faststart');
    args.push(...BITEXACT, out);
    return run('ffmpeg', args);
  });
}

/** Derives a damaged file from a source's bytes. */
function derived(name: string, ext: string, source: string, damage: (b: Buffer) => Buffer): Promise<string> {
  return cached(`damaged-${name}`, ext, { source }, async (out) => {
    await writeFile(out, damage(await readFile(source)));
  });
}

const truncate = (fraction: number) => (b: Buffer) => b.subarray(0, Math.floor(b.length * fraction));
const zeroMiddle = (b: Buffer) => {
  const c = Buffer.from(b);
  c.fill(0, Math.floor(c.length * 0.45), Math.floor(c.length * 0.55));
  return c;
};

/** A damaged input and how to make it (see {@link DAMAGED}). */
export interface DamagedSpec extends Omit<DamagedFile, 'path'> {
  /** Builds the file (cached) and returns its path. */
  make: () => Promise<string>;
}

/** A damaged copy of a {@link damageSource}. */
const damagedFrom =
  (name: string, container: Container, faststart: boolean, damage: (b: Buffer) => Buffer) => async () =>
    derived(name, container, await damageSource(container, faststart), damage);

/**
 * Broken inputs, built from valid small clips. Names (each also the file's base name suffix):
 * truncated-{10,50,90}.mp4 (moov at the end, so all of it is lost),
 * truncated-faststart-{10,50,90}.mp4 (moov first, mdat cut), zeroed-middle.mp4 (faststart, 10% of
 * the bytes around the middle zeroed), truncated-50.mkv, zeroed-middle.ts, random.mp4 (64 KiB of
 * pseudo-random bytes), empty.mp4, audio-only.mp4 (AAC in MP4, no video stream), text.mkv.
 */
export const DAMAGED: readonly DamagedSpec[] = [
  ...[10, 50, 90].map((p) => ({
    name: `truncated-${p}.mp4`,
    expect: 'unreadable' as const,
    description: `an mp4 with its index (moov) at the end, cut at ${p}% of its bytes`,
    make: damagedFrom(`truncated-${p}`, 'mp4', false, truncate(p / 100)),
  })),
  ...[10, 50, 90].map((p) => ({
    name: `truncated-faststart-${p}.mp4`,
    expect: 'partial' as const,
    description: `a faststart mp4 (moov first) cut at ${p}% of its bytes: the later frames are missing`,
    make: damagedFrom(`truncated-faststart-${p}`, 'mp4', true, truncate(p / 100)),
  })),
  {
    name: 'zeroed-middle.mp4',
    expect: 'partial',
    description: 'a faststart mp4 with 45%..55% of its bytes zeroed',
    make: damagedFrom('zeroed-middle', 'mp4', true, zeroMiddle),
  },
  {
    name: 'truncated-50.mkv',
    expect: 'partial',
    description: 'a Matroska file cut at 50% of its bytes',
    make: damagedFrom('truncated-50', 'mkv', false, truncate(0.5)),
  },
  {
    name: 'zeroed-middle.ts',
    expect: 'partial',
    description: 'an MPEG-TS with 45%..55% of its bytes zeroed',
    make: damagedFrom('zeroed-middle', 'ts', false, zeroMiddle),
  },
  {
    name: 'random.mp4',
    expect: 'unreadable',
    description: '64 KiB of pseudo-random bytes',
    make: () =>
      cached('damaged-random', 'mp4', {}, (out) => writeFile(out, pseudoRandomBytes(65536, 0x5eed))),
  },
  {
    name: 'empty.mp4',
    expect: 'unreadable',
    description: 'an empty file',
    make: () => cached('damaged-empty', 'mp4', {}, (out) => writeFile(out, Buffer.alloc(0))),
  },
  {
    name: 'audio-only.mp4',
    expect: 'unreadable',
    description: 'a valid AAC-in-MP4 (m4a) file with no video stream',
    make: () =>
      cached('damaged-audio-only', 'mp4', {}, (out) =>
        run('ffmpeg', [
          ...FFMPEG,
          ...['-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=48000:duration=3'],
          ...['-c:a', 'aac', '-b:a', '64k'],
          ...BITEXACT,
          out,
        ]),
      ),
  },
  {
    name: 'text.mkv',
    expect: 'unreadable',
    description: 'a text file',
    make: () =>
      cached('damaged-text', 'mkv', {}, (out) =>
        writeFile(out, 'This is not a video.\nJust a few lines of text, named .mkv.\n'),
      ),
  },
];

/** Every {@link DAMAGED} file, made. */
export function damagedFiles(): Promise<DamagedFile[]> {
  return Promise.all(DAMAGED.map(async ({ make, ...rest }) => ({ ...rest, path: await make() })));
}

// ---------------------------------------------------------------------------------------------
// Small probes tests need

/** ffprobe JSON of a file's streams and format (with side data). */
export function probe(path: string): Promise<unknown> {
  return ffprobeJson(['-show_streams', '-show_format', path]);
}

/** Decodes a file's first audio stream to mono s16le at `rate` Hz (no resampling when it matches). */
export async function decodeAudioS16(path: string, rate = AUDIO_RATE): Promise<Int16Array> {
  const { stdout } = await execFileP(
    'ffmpeg',
    [
      ...FFMPEG,
      '-i',
      path,
      '-map',
      '0:a:0',
      '-ac',
      '1',
      '-ar',
      String(rate),
      '-f',
      's16le',
      '-c:a',
      'pcm_s16le',
      '-',
    ],
    { encoding: 'buffer', maxBuffer: 512 * 1024 * 1024 },
  );
  const copy = Buffer.from(stdout); // aligned copy for the Int16Array view
  return new Int16Array(copy.buffer, copy.byteOffset, copy.byteLength / 2);
}

/**
 * Decodes video frames as rgb24 scaled to `width` x `height`, one Buffer per frame, in display order
 * (ffmpeg applies the display matrix). `ss` seeks first (`-ss` before `-i`), `frames` limits the count.
 */
export async function decodeFrames(
  path: string,
  opts: { width: number; height: number; ss?: number; frames?: number },
): Promise<Buffer[]> {
  const args = [...FFMPEG];
  if (opts.ss !== undefined) args.push('-ss', opts.ss.toFixed(6));
  args.push('-i', path, '-map', '0:v:0', '-fps_mode', 'passthrough');
  if (opts.frames !== undefined) args.push('-frames:v', String(opts.frames));
  args.push(
    '-vf',
    `scale=${opts.width}:${opts.height}:flags=area`,
    '-f',
    'rawvideo',
    '-pix_fmt',
    'rgb24',
    '-',
  );
  const { stdout } = await execFileP('ffmpeg', args, { encoding: 'buffer', maxBuffer: 1024 * 1024 * 1024 });
  const size = opts.width * opts.height * 3;
  const out: Buffer[] = [];
  for (let o = 0; o + size <= stdout.length; o += size) out.push(stdout.subarray(o, o + size));
  return out;
}

// ---------------------------------------------------------------------------------------------
// Files whose container or bitstream lies (issue 13: engine truth on real-world files)
//
// Each maker below reproduces one class of real-world file the engines got wrong. They are built
// from the index pattern (see `frames.ts`), so a sheet cell can be read back and compared with a
// sequential decode ({@link decodedIndices}), and their lie is checked while building, so a change
// in ffmpeg/x264 behaviour fails loudly here instead of silently making a test pass.

/** What a pattern frame shows; see {@link feedPattern}. */
interface PatternSpec {
  width: number;
  height: number;
  frames: number;
  /** The number frame n shows (default n). Values must stay below 2 ** INDEX_LAYOUT.bits. */
  value?: (n: number) => number;
  /** Frames painted as a negative: a hard scene cut for the encoder; reads back as 4095 - value. */
  inverted?: (n: number) => boolean;
  /**
   * Static noise (0..63) on every area, the same in every frame: block and band means stay far from
   * the read threshold, but intra coding gets expensive, so the encoder leans on its references.
   */
  textured?: boolean;
}

/** Feeds `spec.frames` rgb24 pattern frames to a child's stdin (input args: {@link rawPatternInput}). */
function feedPattern(spec: PatternSpec): (stdin: NonNullable<ChildProcess['stdin']>) => Promise<void> {
  const { width: w, height: h } = spec;
  const map = displayBlockMap(w, h);
  const noise = spec.textured ? pseudoRandomBytes(w * h, 0x7e57) : null;
  if (noise) for (let i = 0; i < noise.length; i++) noise[i] = (noise[i] as number) & 63;
  return async (stdin) => {
    const frame = Buffer.alloc(w * h * 3);
    for (let n = 0; n < spec.frames; n++) {
      const value = spec.value ? spec.value(n) : n;
      const invert = spec.inverted?.(n) ?? false;
      for (let p = 0, q = 0; p < w * h; p++, q += 3) {
        const k = map[p] as number;
        const t = noise ? (noise[p] as number) : 0;
        let v: number;
        if (k < 0) v = noise ? INDEX_LAYOUT.grey - 32 + t : INDEX_LAYOUT.grey;
        else v = (value >> k) & 1 ? 255 - t : t;
        if (invert) v = 255 - v;
        frame[q] = v;
        frame[q + 1] = v;
        frame[q + 2] = v;
      }
      if (!stdin.write(Buffer.from(frame))) await once(stdin, 'drain');
    }
    stdin.end();
  };
}

/** ffmpeg input arguments for {@link feedPattern} frames on stdin at `rate` (e.g. '25', '1/5'). */
function rawPatternInput(spec: PatternSpec, rate: string): string[] {
  return ['-f', 'rawvideo', '-pix_fmt', 'rgb24', '-s', `${spec.width}x${spec.height}`, '-r', rate, '-i', '-'];
}

// --- Minimal ISO BMFF (MP4) reading and rewriting --------------------------------------------

interface Mp4Box {
  type: string;
  /** Offset of the box header. */
  start: number;
  /** Offset of the payload (after the 8- or 16-byte header). */
  body: number;
  end: number;
}

/** Boxes whose payload is only child boxes: rewritten by recursion in {@link mp4Rebuild}. */
const MP4_CONTAINERS = new Set(['moov', 'trak', 'mdia', 'minf', 'stbl', 'edts', 'mvex', 'dinf', 'udta']);

function mp4Children(buf: Buffer, start: number, end: number): Mp4Box[] {
  const boxes: Mp4Box[] = [];
  let at = start;
  while (at + 8 <= end) {
    let size = buf.readUInt32BE(at);
    const type = buf.toString('latin1', at + 4, at + 8);
    let body = at + 8;
    if (size === 1) {
      size = Number(buf.readBigUInt64BE(at + 8));
      body = at + 16;
    } else if (size === 0) {
      size = end - at;
    }
    if (size < body - at || at + size > end) throw new Error(`mp4: box ${type} at ${at} overruns its parent`);
    boxes.push({ type, start: at, body, end: at + size });
    at += size;
  }
  return boxes;
}

const mp4File = (buf: Buffer): Mp4Box => ({ type: '', start: 0, body: 0, end: buf.length });

/** The first box along `path` below `parent`; throws when one is missing. */
function mp4Child(buf: Buffer, parent: Mp4Box, ...path: string[]): Mp4Box {
  let box = parent;
  for (const type of path) {
    const next = mp4Children(buf, box.body, box.end).find((b) => b.type === type);
    if (!next) throw new Error(`mp4: no ${type} box in ${box.type || 'the file'}`);
    box = next;
  }
  return box;
}

/** The tracks whose handler is `handler` ('vide', 'soun'). */
function mp4Tracks(buf: Buffer, handler: string): Mp4Box[] {
  const moov = mp4Child(buf, mp4File(buf), 'moov');
  return mp4Children(buf, moov.body, moov.end).filter((trak) => {
    if (trak.type !== 'trak') return false;
    const hdlr = mp4Child(buf, trak, 'mdia', 'hdlr');
    return buf.toString('latin1', hdlr.body + 8, hdlr.body + 12) === handler;
  });
}

/** Each sample of a track (decode order): its byte offset and size, from stsz, stsc and stco/co64. */
function mp4Samples(buf: Buffer, trak: Mp4Box): Array<{ offset: number; size: number }> {
  const stbl = mp4Child(buf, trak, 'mdia', 'minf', 'stbl');
  const kids = mp4Children(buf, stbl.body, stbl.end);
  const get = (type: string) => kids.find((k) => k.type === type);
  const stsz = get('stsz');
  const stsc = get('stsc');
  const co = get('stco') ?? get('co64');
  if (!stsz || !stsc || !co) throw new Error('mp4: sample table without stsz, stsc or stco');
  const fixed = buf.readUInt32BE(stsz.body + 4);
  const count = buf.readUInt32BE(stsz.body + 8);
  const sizes = Array.from({ length: count }, (_, i) => fixed || buf.readUInt32BE(stsz.body + 12 + 4 * i));
  const chunkCount = buf.readUInt32BE(co.body + 4);
  const chunks = Array.from({ length: chunkCount }, (_, i) =>
    co.type === 'co64'
      ? Number(buf.readBigUInt64BE(co.body + 8 + 8 * i))
      : buf.readUInt32BE(co.body + 8 + 4 * i),
  );
  const runs = Array.from({ length: buf.readUInt32BE(stsc.body + 4) }, (_, i) => ({
    firstChunk: buf.readUInt32BE(stsc.body + 8 + 12 * i),
    perChunk: buf.readUInt32BE(stsc.body + 12 + 12 * i),
  }));
  const samples: Array<{ offset: number; size: number }> = [];
  for (const [c, chunkOffset] of chunks.entries()) {
    const run = runs.filter((r) => r.firstChunk <= c + 1).at(-1);
    if (!run) throw new Error('mp4: stsc does not cover chunk 1');
    let offset = chunkOffset;
    for (let k = 0; k < run.perChunk && samples.length < count; k++) {
      const size = sizes[samples.length] as number;
      samples.push({ offset, size });
      offset += size;
    }
  }
  if (samples.length !== count)
    throw new Error(`mp4: ${samples.length} samples in chunks, stsz says ${count}`);
  return samples;
}

function mp4Box(type: string, body: Buffer): Buffer {
  const header = Buffer.alloc(8);
  header.writeUInt32BE(8 + body.length, 0);
  header.write(type, 4, 'latin1');
  return Buffer.concat([header, body]);
}

/** A version-0 full box whose payload is 32-bit words. */
function mp4FullBox(type: string, words: number[]): Buffer {
  const body = Buffer.alloc(4 + 4 * words.length);
  for (const [i, w] of words.entries()) body.writeUInt32BE(w, 4 + 4 * i);
  return mp4Box(type, body);
}

/**
 * Rebuilds the payload of `box` (the file for {@link mp4File}): each child `replace` returns a
 * Buffer for is swapped in, containers are rebuilt recursively with fresh sizes, the rest copied.
 */
function mp4Rebuild(buf: Buffer, box: Mp4Box, replace: (child: Mp4Box) => Buffer | undefined): Buffer {
  const parts = mp4Children(buf, box.body, box.end).map((child) => {
    const swapped = replace(child);
    if (swapped) return swapped;
    if (MP4_CONTAINERS.has(child.type)) return mp4Box(child.type, mp4Rebuild(buf, child, replace));
    return buf.subarray(child.start, child.end);
  });
  return Buffer.concat(parts);
}

/** Throws unless the file is ftyp.., mdat, moov (index at the end), so moov may change size freely. */
function assertMoovLast(buf: Buffer): void {
  const types = mp4Children(buf, 0, buf.length).map((b) => b.type);
  if (types.at(-1) !== 'moov' || !types.includes('mdat')) {
    throw new Error(`mp4: expected the moov box after mdat, got ${types.join(',')}`);
  }
}

// --- 1. Sync samples that are not random-access points --------------------------------------

/** Geometry of {@link falseSyncClip}. */
export const FALSE_SYNC = {
  seconds: 14,
  fps: 25,
  width: 320,
  height: 240,
  /** Every `cycle` frames a scene of `invertedLength` negative frames starts at phase `invertedFrom`. */
  cycle: 25,
  invertedFrom: 5,
  invertedLength: 6,
} as const;

/**
 * H.264 Annex-B-free SEI NAL unit (4-byte length prefix) claiming a recovery point at this very
 * picture: payload type 6, size 1, recovery_frame_cnt 0, exact_match 1, broken_link 0, then the
 * payload's alignment bits and the rbsp trailing bits.
 */
const RECOVERY_POINT_SEI = Buffer.from('00000005060601c480', 'hex');

/**
 * A 14 s, 320x240 H.264 4:4:4 clip with B-frames that decodes cleanly from the start, but whose
 * index lies about random access, like the phone/editor file of issue 13.
 *
 * Why it is hostile: the pattern flips to a negative for 6 frames every second, so x264 (infinite
 * keyint, min-keyint 1000, scenecut on) codes each cut as a *non-IDR* I-frame, and keeps up to 16
 * references across it: after the flip back, the P/B frames still predict from the frames before
 * the negative scene, which sit behind the I-frame. The MP4 is then rewritten so that its stss
 * lists every I-frame as a sync sample, and each non-IDR I-frame carries a recovery-point SEI
 * claiming it is a clean entry point. A seek to such a "sync sample" (what `ffmpeg -ss` and
 * `av_seek_frame` do) decodes the following frames without their references: FFmpeg fills the
 * frame_num gap with grey (logged only at debug level) or logs `Missing reference picture`, and
 * outputs garbage: with ffmpeg 5.1, all 9 cells of a 3x3 overview are wrong (8 grey, 1 an older
 * picture). Only frame 0 is a true random-access point (the only NAL of type 5). The negative
 * frames read back as 4095 - n; {@link decodedIndices} is the oracle for either.
 */
export function falseSyncClip(): Promise<string> {
  const o = FALSE_SYNC;
  return cached('false-sync', 'mp4', { ...o, sei: RECOVERY_POINT_SEI.toString('hex') }, (out) =>
    withTemp('mp4', async (encoded) => {
      const spec: PatternSpec = {
        width: o.width,
        height: o.height,
        frames: o.seconds * o.fps,
        textured: true,
        inverted: (n) => n % o.cycle >= o.invertedFrom && n % o.cycle < o.invertedFrom + o.invertedLength,
      };
      const x264 = 'keyint=infinite:min-keyint=1000:scenecut=1000:ref=16:b-adapt=0';
      await run(
        'ffmpeg',
        [
          ...FFMPEG,
          ...rawPatternInput(spec, String(o.fps)),
          ...['-pix_fmt', 'yuv444p', '-c:v', 'libx264', '-preset', 'veryfast', '-crf', '16'],
          ...['-bf', '3', '-x264-params', x264, '-fps_mode', 'passthrough', ...BITEXACT, encoded],
        ],
        { feed: feedPattern(spec) },
      );
      // Which samples are I-frames, and which of those are not IDR, from a sequential decode.
      const select = ['-select_streams', 'v:0'];
      const { packets } = (await ffprobeJson([
        ...[...select, '-show_packets', '-show_entries', 'packet=pts', encoded],
      ])) as { packets: Array<{ pts: number }> };
      const { frames } = (await ffprobeJson([
        ...[...select, '-show_frames', '-show_entries', 'frame=pts,pict_type,key_frame', encoded],
      ])) as { frames: Array<{ pts: number; pict_type: string; key_frame: number }> };
      const data = { packets, frames };
      const iFrames = new Set(data.frames.filter((f) => f.pict_type === 'I').map((f) => f.pts));
      const nonIdr = new Set(
        data.frames.filter((f) => f.pict_type === 'I' && f.key_frame === 0).map((f) => f.pts),
      );
      if (nonIdr.size < 10) {
        throw new Error(`falseSyncClip: x264 made only ${nonIdr.size} non-IDR I-frames, expected >= 10`);
      }
      const buf = await readFile(encoded);
      assertMoovLast(buf);
      const [trak] = mp4Tracks(buf, 'vide');
      if (!trak) throw new Error('falseSyncClip: no video track');
      const samples = mp4Samples(buf, trak);
      if (samples.length !== data.packets.length) throw new Error('falseSyncClip: samples != packets');
      // New mdat: every sample in decode order, the non-IDR I-frames prefixed with the lying SEI.
      const head = buf.subarray(0, mp4Child(buf, mp4File(buf), 'mdat').start);
      const payloads: Buffer[] = [];
      const offsets: number[] = [];
      const sync: number[] = [];
      let at = head.length + 8;
      for (const [i, s] of samples.entries()) {
        const pts = data.packets[i]?.pts ?? Number.NaN;
        const bytes = buf.subarray(s.offset, s.offset + s.size);
        const payload = nonIdr.has(pts) ? Buffer.concat([RECOVERY_POINT_SEI, bytes]) : bytes;
        if (iFrames.has(pts)) sync.push(i + 1);
        payloads.push(payload);
        offsets.push(at);
        at += payload.length;
      }
      const tables: Record<string, Buffer> = {
        stsz: mp4FullBox('stsz', [0, payloads.length, ...payloads.map((p) => p.length)]),
        stsc: mp4FullBox('stsc', [1, 1, 1, 1]), // one sample per chunk
        stco: mp4FullBox('stco', [offsets.length, ...offsets]),
        stss: mp4FullBox('stss', [sync.length, ...sync]),
      };
      const moov = mp4Child(buf, mp4File(buf), 'moov');
      const newMoov = mp4Box(
        'moov',
        mp4Rebuild(buf, moov, (b) => tables[b.type]),
      );
      await writeFile(out, Buffer.concat([head, mp4Box('mdat', Buffer.concat(payloads)), newMoov]));
    }),
  );
}

// --- 2. Stream choice ------------------------------------------------------------------------

/** Streams of {@link twoVideoStreamsClip}: the top shot comes first, so "stream 0" is wrong too. */
export const TWO_VIDEO_STREAMS = {
  seconds: 10,
  topShot: { stream: 0, width: 1280, height: 720, frames: 2, values: [4000, 4001] },
  video: { stream: 1, width: 640, height: 360 },
  audioStream: 2,
} as const;

/**
 * A phone-like MP4: the real video (index pattern, 640x360, 25 fps, 10 s, with AAC audio) plus a
 * 1280x720 "top shot" video stream of the same duration holding only 2 frames (showing 4000 and
 * 4001), stored first, both with the default disposition. "The largest picture" (the old
 * fallback's choice) and "the first video stream" both pick the top shot; the stream rule (never
 * cover art, prefer default, then a moving picture over a still) must pick the real video.
 * (`av_find_best_stream` happens to pick the real video here, on ffmpeg 5.1.)
 */
export function twoVideoStreamsClip(): Promise<string> {
  const o = TWO_VIDEO_STREAMS;
  return cached('two-video-streams', 'mp4', o, async (out) => {
    const main = await indexClip({
      seconds: o.seconds,
      width: o.video.width,
      height: o.video.height,
      audio: true,
    });
    await withTemp('mp4', async (top) => {
      const spec: PatternSpec = {
        width: o.topShot.width,
        height: o.topShot.height,
        frames: o.topShot.frames,
        value: (n) => o.topShot.values[n] as number,
      };
      // Two frames 5 s apart: the stream lasts as long as the real video.
      const rate = `${o.topShot.frames}/${o.seconds}`;
      await run('ffmpeg', [...FFMPEG, ...rawPatternInput(spec, rate), ...X264_FAST, ...BITEXACT, top], {
        feed: feedPattern(spec),
      });
      await run('ffmpeg', [
        ...[...FFMPEG, '-i', top, '-i', main, '-map', '0:v', '-map', '1:v', '-map', '1:a', '-c', 'copy'],
        ...['-disposition:v:0', 'default', '-disposition:v:1', 'default', ...BITEXACT, out],
      ]);
    });
  });
}

/** Streams of {@link coverArtClip}. */
export const COVER_ART = {
  seconds: 8,
  cover: { stream: 0, width: 1280, height: 720, value: 4000 },
  video: { stream: 1, width: 320, height: 240 },
} as const;

/**
 * An MP4 whose first stream is cover art (an attached PNG picture, 1280x720, showing 4000) and
 * whose second is the real video (index pattern, 320x240, 8 s). ffmpeg writes cover art into
 * moov/udta after the tracks; the udta box is moved before them so the demuxer lists the picture
 * as stream 0, as some taggers do. The cover must never be chosen, although it is larger.
 */
export function coverArtClip(): Promise<string> {
  const o = COVER_ART;
  return cached('cover-art', 'mp4', o, async (out) => {
    const video = await indexClip({ seconds: o.seconds, width: o.video.width, height: o.video.height });
    await withTemp('png', (cover) =>
      withTemp('mp4', async (muxed) => {
        const spec: PatternSpec = {
          width: o.cover.width,
          height: o.cover.height,
          frames: 1,
          value: () => o.cover.value,
        };
        await run('ffmpeg', [...FFMPEG, ...rawPatternInput(spec, '1'), '-c:v', 'png', ...BITEXACT, cover], {
          feed: feedPattern(spec),
        });
        await run('ffmpeg', [
          ...[...FFMPEG, '-i', cover, '-i', video, '-map', '0', '-map', '1:v', '-c', 'copy'],
          ...['-disposition:v:0', 'attached_pic', ...BITEXACT, muxed],
        ]);
        const buf = await readFile(muxed);
        assertMoovLast(buf);
        const moov = mp4Child(buf, mp4File(buf), 'moov');
        const kids = mp4Children(buf, moov.body, moov.end);
        if (!kids.some((k) => k.type === 'udta')) throw new Error('coverArtClip: ffmpeg wrote no udta');
        const rank = (t: string) => (t === 'mvhd' ? 0 : t === 'udta' ? 1 : 2);
        const reordered = [...kids].sort((a, b) => rank(a.type) - rank(b.type));
        const newMoov = mp4Box('moov', Buffer.concat(reordered.map((k) => buf.subarray(k.start, k.end))));
        await writeFile(out, Buffer.concat([buf.subarray(0, moov.start), newMoov]));
      }),
    );
  });
}

/** One video stream of {@link twoProgramsTs} or {@link twoTracksMkv}: frame n shows `base + n`. */
interface PatternStream {
  width: number;
  height: number;
  fps: number;
  frames: number;
  base: number;
}

/**
 * What {@link twoProgramsTs} holds per variant: two programs of one video stream each (stream
 * `shown` is the one a player and `ffmpeg -i` show), their clock `offset` seconds on.
 * - `twin`: two like programs, 320x240 25 fps; the second runs 3 frames longer (programs of one
 *   broadcast never end on the same frame), so any comparison of frame counts prefers it. A
 *   player shows the first program.
 * - `larger`: the second program is 640x360 and the first runs 3 frames longer: the larger picture.
 */
export const TWO_PROGRAMS_TS = {
  offset: 30_000,
  twin: {
    streams: [
      { width: 320, height: 240, fps: 25, frames: 200, base: 0 },
      { width: 320, height: 240, fps: 25, frames: 203, base: 2048 },
    ],
    shown: 0,
  },
  larger: {
    streams: [
      { width: 320, height: 240, fps: 25, frames: 203, base: 0 },
      { width: 640, height: 360, fps: 25, frames: 200, base: 2048 },
    ],
    shown: 1,
  },
} as const satisfies Record<'twin' | 'larger', { streams: readonly PatternStream[]; shown: number }> & {
  offset: number;
};

/** Encodes pattern streams to temporary MP4s (x264, a keyframe a second) and hands their paths on. */
async function withPatternStreams<T>(
  streams: readonly PatternStream[],
  fn: (paths: string[]) => Promise<T>,
  done: string[] = [],
): Promise<T> {
  const [first, ...rest] = streams;
  if (!first) return fn(done);
  return withTemp('mp4', async (encoded) => {
    const spec: PatternSpec = {
      width: first.width,
      height: first.height,
      frames: first.frames,
      value: (n) => first.base + n,
    };
    await run(
      'ffmpeg',
      [
        ...[...FFMPEG, ...rawPatternInput(spec, String(first.fps)), ...X264_FAST],
        ...['-g', String(first.fps), ...BITEXACT, encoded],
      ],
      { feed: feedPattern(spec) },
    );
    return withPatternStreams(rest, fn, [...done, encoded]);
  });
}

/**
 * A broadcast-like MPEG-TS with two programs (own PMTs and PIDs, program numbers 1 and 2), each one
 * pattern video stream, stream i in program i + 1 (see {@link TWO_PROGRAMS_TS}). No disposition
 * marks either: the transport stream has none.
 */
export function twoProgramsTs(variant: 'twin' | 'larger'): Promise<string> {
  const o = { offset: TWO_PROGRAMS_TS.offset, ...TWO_PROGRAMS_TS[variant] };
  return cached(`two-programs-${variant}`, 'ts', o, (out) =>
    withPatternStreams(o.streams, (inputs) =>
      run('ffmpeg', [
        ...[...FFMPEG, ...inputs.flatMap((i) => ['-i', i]), '-map', '0:v', '-map', '1:v', '-c', 'copy'],
        ...['-program', 'program_num=1:title=One:st=0', '-program', 'program_num=2:title=Two:st=1'],
        ...['-output_ts_offset', String(o.offset), '-f', 'mpegts', ...BITEXACT, out],
      ]),
    ),
  );
}

/**
 * What {@link twoProgramsAudioTs} holds: the `larger` two programs (the second's picture is the
 * video), each with its own sound (MP2, 48 kHz mono): program one a 440 Hz tone throughout,
 * program two a 1 kHz tone silenced from `quietFrom` s. FFmpeg demuxes program one's picture and
 * sound as streams 0 and 1, program two's as 2 and 3: the sound of the video's program is not the
 * file's first.
 */
export const TWO_PROGRAMS_AUDIO_TS = {
  offset: TWO_PROGRAMS_TS.offset,
  pictures: TWO_PROGRAMS_TS.larger,
  seconds: 8,
  tones: [440, 1000],
  quietFrom: 4,
  /** The stream indices of each program's picture and sound, as FFmpeg demuxes them. */
  video: [0, 2],
  audio: [1, 3],
} as const;

/** Two programs, each its picture and its sound (see {@link TWO_PROGRAMS_AUDIO_TS}). */
export function twoProgramsAudioTs(): Promise<string> {
  const o = TWO_PROGRAMS_AUDIO_TS;
  return cached('two-programs-audio', 'ts', o, (out) =>
    withPatternStreams(o.pictures.streams, (inputs) =>
      run('ffmpeg', [
        ...[...FFMPEG, ...inputs.flatMap((i) => ['-i', i])],
        ...o.tones.flatMap((f) => [
          '-f',
          'lavfi',
          '-i',
          `sine=frequency=${f}:sample_rate=48000:duration=${o.seconds}`,
        ]),
        ...['-filter_complex', `[3:a]volume=0:enable='gte(t,${o.quietFrom})'[quiet]`],
        ...['-map', '0:v', '-map', '1:v', '-map', '2:a', '-map', '[quiet]', '-c:v', 'copy', '-c:a', 'mp2'],
        ...['-program', 'program_num=1:title=One:st=0:st=2', '-program', 'program_num=2:title=Two:st=1:st=3'],
        ...['-output_ts_offset', String(o.offset), '-f', 'mpegts', ...BITEXACT, out],
      ]),
    ),
  );
}

/**
 * What {@link twoTracksMkv} holds: two video tracks of the same size, both flagged default (as
 * Matroska tracks are unless a muxer says otherwise), the second an angle at twice the frame rate,
 * so it holds twice the frames. A player and `ffmpeg -i` show the first.
 */
export const TWO_TRACKS_MKV = {
  streams: [
    { width: 320, height: 240, fps: 25, frames: 200, base: 0 },
    { width: 320, height: 240, fps: 50, frames: 400, base: 2048 },
  ],
  shown: 0,
} as const satisfies { streams: readonly PatternStream[]; shown: number };

/** See {@link TWO_TRACKS_MKV}. */
export function twoTracksMkv(): Promise<string> {
  const o = TWO_TRACKS_MKV;
  return cached('two-tracks', 'mkv', o, (out) =>
    withPatternStreams(o.streams, (inputs) =>
      run('ffmpeg', [
        ...[...FFMPEG, ...inputs.flatMap((i) => ['-i', i]), '-map', '0:v', '-map', '1:v', '-c', 'copy'],
        ...['-disposition:v:0', 'default', '-disposition:v:1', 'default', ...BITEXACT, out],
      ]),
    ),
  );
}

// --- 3. Containers whose declared duration is not the content's --------------------------------

/**
 * A faststart MP4 (index first) of 20 s (index pattern 320x240 25 fps, AAC audio) cut at 40 % of
 * its bytes: the index still lists 20 s of samples, the file holds about 8 s of them.
 */
export function truncatedMp4(): Promise<string> {
  const o = { seconds: 20, keep: 0.4 };
  return cached('truncated-index', 'mp4', o, async (out) => {
    const src = await indexClip({ seconds: o.seconds, audio: true });
    await withTemp('mp4', async (fast) => {
      await run('ffmpeg', [
        ...FFMPEG,
        '-i',
        src,
        '-map',
        '0',
        '-c',
        'copy',
        '-movflags',
        '+faststart',
        ...BITEXACT,
        fast,
      ]);
      const b = await readFile(fast);
      if (mp4Children(b, 0, b.length).findIndex((x) => x.type === 'moov') > 2) {
        throw new Error('truncatedMp4: moov is not at the front');
      }
      await writeFile(out, b.subarray(0, Math.floor(b.length * o.keep)));
    });
  });
}

/** What {@link longHeaderMkv}'s header claims, in seconds. */
export const LONG_HEADER_DECLARED_SECONDS = 1331;

/**
 * A complete 12 s Matroska file (index pattern 320x240 25 fps, AAC audio) whose Segment Info
 * Duration and per-track DURATION tags were replaced by 1331 s, like a header copied from a longer
 * original. Its cues stop at 12 s, so a seek near the declared end finds nothing there.
 */
export function longHeaderMkv(): Promise<string> {
  const declared = LONG_HEADER_DECLARED_SECONDS;
  return cached('long-header', 'mkv', { seconds: 12, declared }, async (out) => {
    const src = await indexClip({ seconds: 12, container: 'mkv', audio: true });
    const b = Buffer.from(await readFile(src));
    // TimestampScale (0x2AD7B1) must be the default 1 ms for Duration to be in milliseconds.
    if (b.indexOf(Buffer.from('2ad7b1830f4240', 'hex')) < 0)
      throw new Error('longHeaderMkv: unexpected TimestampScale');
    // Duration (0x4489) as an 8-byte float, inside Info near the start of the file.
    const id = Buffer.from('448988', 'hex');
    const at = b.indexOf(id);
    if (at < 0 || at > 4096 || b.indexOf(id, at + 1) >= 0)
      throw new Error('longHeaderMkv: Duration not found once');
    b.writeDoubleBE(declared * 1000, at + 3);
    const h = Math.floor(declared / 3600);
    const m = Math.floor((declared % 3600) / 60);
    const s = declared % 60;
    const tag = `${[h, m, s].map((v) => String(v).padStart(2, '0')).join(':')}.000000000`;
    for (const match of b.toString('latin1').matchAll(/\d\d:\d\d:\d\d\.\d{9}/g)) {
      b.write(tag, match.index, 'latin1'); // same length, so no EBML size changes
    }
    await writeFile(out, b);
  });
}

/** What {@link underDeclaredPs} holds. */
export const UNDER_DECLARED_PS = { seconds: 3, tailFrames: 4, fps: 25, width: 720, height: 576 } as const;

/**
 * An MPEG program stream whose declared duration is far shorter than its content: 3 s of MPEG-2
 * video (frames 0..74) followed by a second program that restarts the clock and repeats frames
 * 0..3 as large intra frames. FFmpeg estimates a PS's duration from the timestamps in its last
 * ~250 kB, which here belong to the restarted tail, so it declares 0.16 s for 3 s of video (the
 * issue's VOB declared 0.13 s for 1.08 s; 3 s keeps the gap above DESIGN's 1 s tolerance). The
 * repeated frames show the same numbers as the ones they shadow, so the frame displayed at any
 * time reads the same whichever copy a decoder shows.
 */
export function underDeclaredPs(): Promise<string> {
  const o = UNDER_DECLARED_PS;
  return cached('under-declared', 'mpg', o, (out) =>
    withTemp('mpg', (head) =>
      withTemp('mpg', async (tail) => {
        const body: PatternSpec = { width: o.width, height: o.height, frames: o.seconds * o.fps };
        await run(
          'ffmpeg',
          [
            ...[...FFMPEG, ...rawPatternInput(body, String(o.fps)), '-c:v', 'mpeg2video', '-b:v', '2M'],
            ...['-g', '12', '-bf', '2', ...BITEXACT, '-f', 'mpeg', head],
          ],
          { feed: feedPattern(body) },
        );
        const restart: PatternSpec = {
          width: o.width,
          height: o.height,
          frames: o.tailFrames,
          textured: true,
        };
        await run(
          'ffmpeg',
          [
            ...[...FFMPEG, ...rawPatternInput(restart, String(o.fps)), '-c:v', 'mpeg2video', '-q:v', '1'],
            ...['-g', '1', '-bf', '0', ...BITEXACT, '-f', 'mpeg', tail],
          ],
          { feed: feedPattern(restart) },
        );
        const tailBytes = await readFile(tail);
        // libavformat reads the last 250000 bytes for the end timestamps (DURATION_MAX_READ_SIZE).
        if (tailBytes.length < 300_000)
          throw new Error(`underDeclaredPs: tail only ${tailBytes.length} bytes`);
        await writeFile(out, Buffer.concat([await readFile(head), tailBytes]));
      }),
    ),
  );
}

/** The duration {@link fragmentedMp4Huge} declares, seconds: 2^31 ticks of a 15 kHz clock. */
export const FRAGMENTED_HUGE_DECLARED_SECONDS = 2 ** 31 / 15_000;

/**
 * A fragmented MP4 (`frag_keyframe+empty_moov`) holding 1 s of the index pattern (320x240 25 fps,
 * keyframe every 12 frames), whose mvhd, tkhd and mdhd durations were set to 143165.577 s (39 h),
 * the value of issue 13's file. The fragments hold the truth; the header must not be believed.
 */
export function fragmentedMp4Huge(): Promise<string> {
  const declared = FRAGMENTED_HUGE_DECLARED_SECONDS;
  return cached('fragmented-huge', 'mp4', { seconds: 1, gop: 12, declared }, async (out) => {
    const src = await indexClip({ seconds: 1, gop: 12 });
    await withTemp('mp4', async (frag) => {
      await run('ffmpeg', [
        ...[...FFMPEG, '-i', src, '-map', '0', '-c', 'copy'],
        ...['-movflags', 'frag_keyframe+empty_moov', ...BITEXACT, frag],
      ]);
      const b = Buffer.from(await readFile(frag));
      const file = mp4File(b);
      const mvhd = mp4Child(b, file, 'moov', 'mvhd');
      const [trak] = mp4Tracks(b, 'vide');
      if (!trak) throw new Error('fragmentedMp4Huge: no video track');
      const tkhd = mp4Child(b, trak, 'tkhd');
      const mdhd = mp4Child(b, trak, 'mdia', 'mdhd');
      // Full boxes: version byte first; v0 has 32-bit times, v1 64-bit.
      const setDuration = (box: Mp4Box, v0: number, v1: number, ticks: number) => {
        const version = b.readUInt8(box.body);
        if (version === 1) b.writeBigUInt64BE(BigInt(ticks), box.body + v1);
        else b.writeUInt32BE(ticks, box.body + v0);
      };
      const timescale = (box: Mp4Box) => b.readUInt32BE(box.body + (b.readUInt8(box.body) === 1 ? 20 : 12));
      const movieTicks = Math.round(declared * timescale(mvhd));
      setDuration(mvhd, 16, 24, movieTicks);
      setDuration(tkhd, 20, 28, movieTicks);
      setDuration(mdhd, 16, 24, Math.round(declared * timescale(mdhd)));
      await writeFile(out, b);
    });
  });
}

// --- 4. No decodable video -------------------------------------------------------------------

export type UndecodableKind = 'zeroed-bitstream' | 'unknown-codec';

/**
 * A well-formed container with a valid AAC track and a video stream no frame of which decodes:
 * - 'zeroed-bitstream' (mp4): every H.264 sample kept at its size, its NAL length intact, and its
 *   payload zeroed (NAL type 0, which decoders skip), so the index, the size and avcC still
 *   describe a 320x240 video, but no picture ever comes out;
 * - 'unknown-codec' (mkv): the track's CodecID rewritten to `V_VIDSHEET/NONE`, which no FFmpeg
 *   knows (codec `none`, no decoder).
 */
export function undecodableClip(kind: UndecodableKind = 'zeroed-bitstream'): Promise<string> {
  if (kind === 'unknown-codec') {
    return cached('undecodable-codec', 'mkv', { seconds: 6 }, async (out) => {
      const src = await indexClip({ seconds: 6, container: 'mkv', audio: true });
      const b = Buffer.from(await readFile(src));
      const id = Buffer.from('V_MPEG4/ISO/AVC', 'latin1');
      const at = b.indexOf(id);
      if (at < 0 || b.indexOf(id, at + 1) >= 0) throw new Error('undecodableClip: CodecID not found once');
      b.write('V_VIDSHEET/NONE', at, 'latin1'); // same length: no EBML size changes
      await writeFile(out, b);
    });
  }
  return cached('undecodable-zeroed', 'mp4', { seconds: 6 }, async (out) => {
    const src = await indexClip({ seconds: 6, audio: true });
    const b = Buffer.from(await readFile(src));
    const [trak] = mp4Tracks(b, 'vide');
    if (!trak) throw new Error('undecodableClip: no video track');
    for (const s of mp4Samples(b, trak)) {
      b.writeUInt32BE(s.size - 4, s.offset);
      b.fill(0, s.offset + 4, s.offset + s.size);
    }
    await writeFile(out, b);
  });
}

// --- 4a. Field pictures (issue 24) ----------------------------------------------------------

/** What {@link fieldPicturesMp4} holds: 352x288 25 fps, every frame two field samples. */
export const FIELD_MP4 = { seconds: 6, fps: 25, width: 352, height: 288 } as const;

/**
 * Field-coded MPEG-2 in MP4 with each field picture its own sample, as some broadcast and camera
 * muxers store it: 300 samples of 20 ms for 150 frames (closed GOPs I B B P B B P B B P B P, coded
 * by mpeg2-fields.ts). A frame is shown at its first field's time; its second field's sample sits
 * 20 ms later and is no frame of its own. Only the I field's sample is a sync sample.
 *
 * The picture: a bright bar 4 blocks wide that moves 2 blocks (16 px) every field over a
 * horizontal ramp, so neighbouring frames differ everywhere the bar passes, and the frame number
 * in binary along the top.
 */
export function fieldPicturesMp4(): Promise<string> {
  const o = FIELD_MP4;
  return cached('field-pictures', 'mp4', o, async (out) => {
    const cols = o.width / 8;
    const es = encodeFieldStream({
      width: o.width,
      height: o.height,
      frames: o.seconds * o.fps,
      picture: (frame, field) => ({
        y: (col, row) => {
          if (row < 3) return col < 40 && (frame >> (7 - Math.floor(col / 5))) & 1 ? 235 : 16;
          const bar = (((col - 2 * (2 * frame + field)) % cols) + cols) % cols < 4;
          return bar ? 235 : 40 + 4 * col;
        },
        cb: (_col, row) => 88 + ((row * 10 + frame * 3) % 80),
        cr: (col) => 88 + ((col * 5) % 80),
      }),
    });
    await withTemp('m2v', async (m2v) => {
      await writeFile(m2v, es);
      await withTemp('mp4', async (framed) => {
        // The raw stream has no timestamps: each packet (a frame, both fields: FFmpeg's parser
        // pairs them) is stamped from the GOP's decode order, in the raw demuxer's 1/1200000.
        const tick = 1_200_000 / o.fps;
        const gop = GOP_DECODE_ORDER.length;
        let display = String(GOP_DECODE_ORDER.at(-1));
        for (let i = gop - 2; i >= 0; i--)
          display = `if(eq(mod(N,${gop}),${i}),${GOP_DECODE_ORDER[i]},${display})`;
        const pts = `(${gop}*floor(N/${gop})+${display})*${tick}`.replaceAll(',', '\\,');
        await run('ffmpeg', [
          ...[...FFMPEG, '-f', 'mpegvideo', '-i', m2v, '-c', 'copy'],
          ...['-bsf:v', `setts=pts=${pts}:dts=(N-1)*${tick}:duration=${tick}`],
          ...BITEXACT,
          framed,
        ]);
        await writeFile(out, splitFieldSamples(await readFile(framed)));
      });
    });
  });
}

/**
 * An MP4 of frame samples that each hold two field pictures, rewritten with each field its own
 * sample: half the duration each, the frame's composition offset for both, the sync flag on the
 * first field only. The media data stays where it is (one sample per chunk).
 */
function splitFieldSamples(buf: Buffer): Buffer {
  assertMoovLast(buf);
  const [trak] = mp4Tracks(buf, 'vide');
  if (!trak) throw new Error('splitFieldSamples: no video track');
  const stbl = mp4Child(buf, trak, 'mdia', 'minf', 'stbl');
  const stts = mp4Child(buf, stbl, 'stts');
  const ctts = mp4Child(buf, stbl, 'ctts');
  const stss = mp4Child(buf, stbl, 'stss');
  if (buf.readUInt32BE(stts.body + 4) !== 1) throw new Error('splitFieldSamples: expected one stts entry');
  const delta = buf.readUInt32BE(stts.body + 12);
  if (delta % 2) throw new Error('splitFieldSamples: odd frame duration');
  const offsets: number[] = [];
  for (let i = 0; i < buf.readUInt32BE(ctts.body + 4); i++)
    for (let k = 0; k < buf.readUInt32BE(ctts.body + 8 + 8 * i); k++)
      offsets.push(buf.readUInt32BE(ctts.body + 12 + 8 * i));
  const syncs = new Set(
    Array.from({ length: buf.readUInt32BE(stss.body + 4) }, (_, i) =>
      buf.readUInt32BE(stss.body + 8 + 4 * i),
    ),
  );
  const samples = mp4Samples(buf, trak);
  if (offsets.length !== samples.length)
    throw new Error('splitFieldSamples: ctts does not cover every sample');
  const fields: Array<{ offset: number; size: number; cts: number; sync: boolean }> = [];
  const picture = Buffer.from([0, 0, 1, 0]);
  for (const [i, s] of samples.entries()) {
    const data = buf.subarray(s.offset, s.offset + s.size);
    const second = data.indexOf(picture, data.indexOf(picture) + 4);
    if (data.indexOf(picture) < 0 || second < 0)
      throw new Error(`splitFieldSamples: sample ${i} is not a field pair`);
    const cts = offsets[i] as number;
    fields.push({ offset: s.offset, size: second, cts, sync: syncs.has(i + 1) });
    fields.push({ offset: s.offset + second, size: s.size - second, cts, sync: false });
  }
  const tables: Record<string, Buffer> = {
    stts: mp4FullBox('stts', [1, fields.length, delta / 2]),
    ctts: mp4FullBox('ctts', [fields.length, ...fields.flatMap((f) => [1, f.cts])]),
    stsz: mp4FullBox('stsz', [0, fields.length, ...fields.map((f) => f.size)]),
    stsc: mp4FullBox('stsc', [1, 1, 1, 1]),
    stco: mp4FullBox('stco', [fields.length, ...fields.map((f) => f.offset)]),
    stss: mp4FullBox('stss', [
      fields.filter((f) => f.sync).length,
      ...fields.flatMap((f, i) => (f.sync ? [i + 1] : [])),
    ]),
  };
  const moov = mp4Child(buf, mp4File(buf), 'moov');
  const head = buf.subarray(0, moov.start);
  return Buffer.concat([
    head,
    mp4Box(
      'moov',
      mp4Rebuild(buf, moov, (b) => tables[b.type]),
    ),
  ]);
}

// --- 4b. H.264 field pictures (PAFF, issue 24) -----------------------------------------------

/**
 * What the PAFF fixtures hold: 320x160 25 fps H.264, every frame two field pictures of 20 ms
 * (top first), closed GOPs of 15 with B-frames; the transport stream's clock `offset` seconds on.
 */
export const PAFF = { seconds: 6, fps: 25, width: 320, height: 160, offset: 600 } as const;

/**
 * PAFF H.264 in MP4, each field picture its own sample (as AVCHD remuxes and some muxers store it):
 * the elementary stream of h264-fields.ts muxed by FFmpeg, stamped by the field: a frame's top
 * field at its display time, its bottom field 20 ms later, decode times one frame (two fields)
 * behind so the B-frames reorder. The picture: a bright bar 40 px wide that moves 16 px every
 * field over a horizontal ramp, so neighbouring frames differ everywhere the bar passes, and the
 * frame number in binary along the top.
 */
export function paffMp4(): Promise<string> {
  const o = PAFF;
  return cached('paff-h264', 'mp4', o, async (out) => {
    const es = encodePaffStream({
      width: o.width,
      height: o.height,
      frames: o.seconds * o.fps,
      field: (frame, field) => (plane, x, y) => {
        if (plane === 1) return 88 + ((Math.floor(y / 8) * 10 + frame * 3) % 80);
        if (plane === 2) return 88 + ((Math.floor(x / 8) * 5) % 80);
        if (y < 16) return (frame >> (7 - Math.floor(x / 40))) & 1 ? 235 : 16;
        const bar = (((x - 16 * (2 * frame + field)) % o.width) + o.width) % o.width < 40;
        return bar ? 235 : 40 + Math.floor((x * 160) / o.width);
      },
    });
    await withTemp('264', async (raw) => {
      await writeFile(raw, es);
      // The raw demuxer's packets are the fields in decode order (N), in its 1/1200000 clock.
      const tick = 1_200_000 / o.fps / 2;
      const gop = PAFF_GOP.length;
      const frame = 'floor(N/2)';
      let display = String(PAFF_GOP.at(-1));
      for (let i = gop - 2; i >= 0; i--)
        display = `if(eq(mod(${frame},${gop}),${i}),${PAFF_GOP[i]},${display})`;
      const pts = `((${gop}*floor(${frame}/${gop})+${display})*2+mod(N,2))*${tick}`;
      const stamps = `pts=${pts}:dts=(N-2)*${tick}:duration=${tick}`.replaceAll(',', '\\,');
      await run('ffmpeg', [
        ...[...FFMPEG, '-f', 'h264', '-i', raw, '-c', 'copy', '-bsf:v', `setts=${stamps}`],
        ...BITEXACT,
        out,
      ]);
    });
  });
}

/**
 * The same PAFF H.264 in MPEG-TS, as broadcast carries it (1080i DVB): each field its own PES
 * packet, the clock `PAFF.offset` s on. (Remuxed from the MP4: FFmpeg 5.1 writes a TS with the
 * timestamps a `setts` filter set in the input's clock unconverted to the TS's 90 kHz.)
 */
export function paffTs(): Promise<string> {
  const o = PAFF;
  return cached('paff-h264', 'ts', o, async (out) => {
    await run('ffmpeg', [
      ...[...FFMPEG, '-i', await paffMp4(), '-map', '0:v', '-c', 'copy'],
      ...['-output_ts_offset', String(o.offset), '-f', 'mpegts', ...BITEXACT, out],
    ]);
  });
}

/**
 * The same PAFF H.264 in Matroska, as recorders that keep broadcast packets write it: each field
 * its own block (SimpleBlock, no lacing).
 */
export function paffMkv(): Promise<string> {
  return cached('paff-h264', 'mkv', PAFF, async (out) => {
    await run('ffmpeg', [...FFMPEG, '-i', await paffMp4(), '-map', '0:v', '-c', 'copy', ...BITEXACT, out]);
  });
}

/**
 * The same PAFF H.264 in an MPEG-2 program stream (`-f vob`, as DVD-style recorders write it):
 * each field its own packet once demuxed, but the stream is cut into 2 KiB packs regardless of
 * the fields, so a field starts in the middle of a PES packet's payload, after the previous
 * field's tail, and spans many PES packets.
 */
export function paffPs(): Promise<string> {
  return cached('paff-h264', 'vob', PAFF, async (out) => {
    await run('ffmpeg', [
      ...[...FFMPEG, '-i', await paffMp4(), '-map', '0:v', '-c', 'copy'],
      // A program stream carries Annex B; the PS muxer does not convert MP4's NAL units itself.
      ...['-bsf:v', 'h264_mp4toannexb', '-f', 'vob', ...BITEXACT, out],
    ]);
  });
}

/**
 * The PAFF MKV with header stripping (Matroska ContentCompression, algorithm 3): the bytes every
 * frame starts with (its access unit delimiter and the start of the next NAL unit's length) are
 * stored once in the track header and left out of every block, as mkvmerge's header removal
 * compression did. (mkvmerge now offers it for MPEG-4 part 2 only, so the file is rewritten here.)
 */
export function paffMkvStripped(): Promise<string> {
  return cached('paff-h264-stripped', 'mkv', PAFF, async (out) => {
    await writeFile(out, stripMatroskaHeaders(await readFile(await paffMkv())));
  });
}

/**
 * Progressive H.264 (the 12 s index clip of the transport stream tests, 25 fps with B-frames) in
 * an MPEG-2 program stream: its frames are smaller than a 2 KiB pack, so a PES packet holds
 * several, and the muxer stamps each with the time of the one whose start it holds first; most
 * frames' packets have no timestamp at all, and the decoder guesses their times.
 */
export function h264Ps(): Promise<string> {
  return cached('h264-ps', 'vob', { seconds: 12 }, async (out) => {
    const ts = await indexClip({ seconds: 12, container: 'ts', startOffsetSeconds: 19207 });
    await run('ffmpeg', [...FFMPEG, '-i', ts, '-map', '0:v', '-c', 'copy', '-f', 'vob', ...BITEXACT, out]);
  });
}

/** An EBML element of `buf` at `at`: its ID (marker bits kept), its size field and its data. */
function ebmlElement(buf: Buffer, at: number) {
  const width = (byte: number) => Math.clz32(byte) - 23;
  const idLength = width(buf[at] as number);
  // Sizes may be 8 bytes wide (more than readUIntBE takes); files here are far below 2^53.
  const uint = (from: number, length: number, marker: boolean) => {
    let v = marker ? (buf[from] as number) : (buf[from] as number) & (0xff >> length);
    for (let i = 1; i < length; i++) v = v * 256 + (buf[from + i] as number);
    return v;
  };
  const id = uint(at, idLength, true);
  const sizeAt = at + idLength;
  const sizeLength = width(buf[sizeAt] as number);
  const size = uint(sizeAt, sizeLength, false);
  const start = sizeAt + sizeLength;
  return { id, at, sizeAt, sizeLength, start, end: start + size };
}

/** The children of an EBML master element's data. */
function ebmlChildren(buf: Buffer, from: number, to: number) {
  const out: Array<ReturnType<typeof ebmlElement>> = [];
  for (let at = from; at < to; ) {
    const e = ebmlElement(buf, at);
    out.push(e);
    at = e.end;
  }
  return out;
}

/** An EBML size field of `length` bytes (the original field's width, so nothing else moves). */
function ebmlSize(size: number, length: number): Buffer {
  if (size >= 2 ** (7 * length) - 1) throw new Error(`EBML size ${size} does not fit ${length} bytes`);
  const b = Buffer.alloc(length);
  let v = size;
  for (let i = length - 1; i >= 0; i--, v = Math.floor(v / 256)) b[i] = v % 256;
  b[0] = (b[0] as number) | (0x100 >> length);
  return b;
}

/** An EBML Void element `total` bytes long (2 to 128). */
const ebmlVoid = (total: number) =>
  Buffer.concat([Buffer.from([0xec]), ebmlSize(total - 2, 1), Buffer.alloc(total - 2)]);

/**
 * `mkv` (one track, FFmpeg's layout: SeekHead, Void, Info, Tracks, Tags, Clusters of SimpleBlocks,
 * Cues) with header stripping: the longest prefix all frames share is left out of each block (a
 * Void after it keeps every position, so the Cues still hold) and declared in the track's
 * ContentEncodings, which take the place of the Tags (its SeekHead entry becomes a Void).
 */
function stripMatroskaHeaders(mkv: Buffer): Buffer {
  const buf = Buffer.from(mkv);
  const segment = ebmlChildren(buf, 0, buf.length).find((e) => e.id === 0x18538067);
  if (!segment) throw new Error('stripMatroskaHeaders: no Segment');
  const top = ebmlChildren(buf, segment.start, segment.end);
  const one = (id: number) => {
    const found = top.filter((e) => e.id === id);
    if (found.length !== 1)
      throw new Error(`stripMatroskaHeaders: ${found.length} elements ${id.toString(16)}`);
    return found[0] as ReturnType<typeof ebmlElement>;
  };
  const blocks = top
    .filter((e) => e.id === 0x1f43b675)
    .flatMap((c) => ebmlChildren(buf, c.start, c.end).filter((e) => e.id === 0xa3));
  // A SimpleBlock: track number (one byte here), 16-bit timecode, flags, then the frame.
  const frame = (b: { start: number; end: number }) => buf.subarray(b.start + 4, b.end);
  let prefix = frame(blocks[0] as ReturnType<typeof ebmlElement>);
  for (const b of blocks) {
    const f = frame(b);
    let n = 0;
    while (n < prefix.length && n < f.length && prefix[n] === f[n]) n++;
    prefix = prefix.subarray(0, n);
  }
  prefix = Buffer.from(prefix.subarray(0, 64));
  const k = prefix.length;
  if (k < 2) throw new Error('stripMatroskaHeaders: the frames share fewer than 2 leading bytes');
  for (const b of blocks) {
    buf.set(ebmlSize(b.end - b.start - k, b.sizeLength), b.sizeAt);
    buf.copyWithin(b.start + 4, b.start + 4 + k, b.end);
    buf.set(ebmlVoid(k), b.end - k);
  }
  // ContentEncodings > ContentEncoding > ContentCompression > (ContentCompAlgo 3, ContentCompSettings).
  const element = (id: number, data: Buffer) => {
    const idBytes = Buffer.alloc(4);
    idBytes.writeUInt32BE(id);
    const ID = idBytes.subarray(idBytes.findIndex((x) => x !== 0));
    return Buffer.concat([ID, ebmlSize(data.length, 1), data]);
  };
  const encodings = element(
    0x6d80,
    element(
      0x6240,
      element(0x5034, Buffer.concat([element(0x4254, Buffer.from([3])), element(0x4255, prefix)])),
    ),
  );
  const tracks = one(0x1654ae6b);
  const tags = one(0x1254c367);
  const track = ebmlChildren(buf, tracks.start, tracks.end).find((e) => e.id === 0xae);
  if (!track || tracks.end !== tags.at || tags.end - tags.at < encodings.length + 2)
    throw new Error('stripMatroskaHeaders: not the layout expected');
  // The SeekHead's entry for the Tags becomes a Void of the same length.
  const seekHead = one(0x114d9b74);
  const tagsSeek = ebmlChildren(buf, seekHead.start, seekHead.end).find((s) =>
    buf.subarray(s.start, s.end).includes(Buffer.from([0x53, 0xab, 0x84, 0x12, 0x54, 0xc3, 0x67])),
  );
  if (!tagsSeek) throw new Error('stripMatroskaHeaders: no SeekHead entry for the Tags');
  buf.set(ebmlVoid(tagsSeek.end - tagsSeek.at), tagsSeek.at);
  buf.set(ebmlSize(track.end - track.start + encodings.length, track.sizeLength), track.sizeAt);
  buf.set(ebmlSize(tracks.end - tracks.start + encodings.length, tracks.sizeLength), tracks.sizeAt);
  return Buffer.concat([
    buf.subarray(0, track.end),
    encodings,
    buf.subarray(track.end, tracks.end),
    ebmlVoid(tags.end - tags.at - encodings.length),
    buf.subarray(tags.end),
  ]);
}

// --- 5. Engine truth, round two (issue 24): real-world lies the first round did not cover -------

/** What {@link cutLongGopMxf} holds: the declared length, and how much of its data is left. */
export const CUT_MXF = { seconds: 13.44, keep: 0.027 } as const;

/**
 * A long-GOP MXF (MPEG-2, GOP 12 with 2 B-frames, 320x240 25 fps testsrc2) declaring 13.44 s,
 * cut at 2.7 % of its bytes: about 0.24 s of pictures are left, as in a partial XAVC/XDCAM copy.
 * After a seek past the data, FFmpeg's MXF demuxer stamps the first packets of the file with the
 * times the seek asked for (its index table), so a read "near the end" sees 3.4 s of data.
 */
export function cutLongGopMxf(): Promise<string> {
  return cached('cut-long-gop', 'mxf', CUT_MXF, async (out) => {
    await withTemp('mxf', async (full) => {
      await run('ffmpeg', [
        ...FFMPEG,
        ...['-f', 'lavfi', '-i', `testsrc2=s=320x240:r=25:d=${CUT_MXF.seconds}`],
        ...['-c:v', 'mpeg2video', '-g', '12', '-bf', '2', '-b:v', '1M', '-f', 'mxf'],
        ...BITEXACT,
        full,
      ]);
      const b = await readFile(full);
      await writeFile(out, b.subarray(0, Math.floor(b.length * CUT_MXF.keep)));
    });
  });
}

/**
 * What {@link partialWtv} holds: the recording's length, and where its data stops (a fraction of
 * the file, at a 4 KiB sector).
 */
export const PARTIAL_WTV = { seconds: 20, keep: 0.15 } as const;

/**
 * A Windows TV recording (WTV: MPEG-2 320x240 25 fps testsrc2 and MP2 audio) whose directory,
 * sector tables and duration say 20 s, while its media data stops at 15 % of the file: the sectors
 * from there through the last packet are zeroes, as in a recording copied while it was being
 * written. (A WTV cut short cannot be opened at all: FFmpeg's muxer writes the directory last.)
 */
export function partialWtv(): Promise<string> {
  return cached('partial', 'wtv', PARTIAL_WTV, async (out) => {
    await withTemp('wtv', async (full) => {
      await run('ffmpeg', [
        ...FFMPEG,
        ...['-f', 'lavfi', '-i', `testsrc2=s=320x240:r=25:d=${PARTIAL_WTV.seconds}`],
        ...['-f', 'lavfi', '-i', `sine=d=${PARTIAL_WTV.seconds}`],
        ...['-c:v', 'mpeg2video', '-b:v', '1M', '-c:a', 'mp2', '-f', 'wtv'],
        ...BITEXACT,
        full,
      ]);
      const packets = (await ffprobeJson(['-show_entries', 'packet=pos', full])) as {
        packets: Array<{ pos?: string }>;
      };
      const last = Math.max(...packets.packets.map((p) => Number(p.pos ?? 0)));
      const sector = 4096;
      const b = Buffer.from(await readFile(full));
      const from = Math.floor((b.length * PARTIAL_WTV.keep) / sector) * sector;
      const to = (Math.floor(last / sector) + 2) * sector;
      if (!(from < to && to < b.length))
        throw new Error('partialWtv: the data does not end before the directory');
      b.fill(0, from, to);
      await writeFile(out, b);
    });
  });
}

/** What {@link trimmedEditMp4} holds and presents, in seconds, and its keyframe interval. */
export const TRIMMED_EDIT_MP4 = { seconds: 12, presented: 5, gop: 2 } as const;

/**
 * An H.264 MP4 (160x120 25 fps testsrc2, B-frames, a keyframe every 2 s) whose one edit
 * presents the first 5 s of its 12 s: FFmpeg's index of it ends after the second keyframe that
 * reaches the edit's end (mov_fix_index), so the 8 s keyframe is its last sample and the rest of
 * the file is in no listing.
 */
export function trimmedEditMp4(): Promise<string> {
  const o = TRIMMED_EDIT_MP4;
  return cached('trimmed-edit', 'mp4', o, async (out) => {
    await withTemp('mp4', async (full) => {
      await run('ffmpeg', [
        ...FFMPEG,
        ...['-f', 'lavfi', '-i', `testsrc2=s=160x120:r=25:d=${o.seconds}`],
        ...['-c:v', 'libx264', '-g', String(o.gop * 25), '-bf', '3', '-pix_fmt', 'yuv420p'],
        ...BITEXACT,
        full,
      ]);
      const b = Buffer.from(await readFile(full));
      const [trak] = mp4Tracks(b, 'vide');
      if (!trak) throw new Error('trimmedEditMp4: no video track');
      const mvhd = mp4Child(b, mp4File(b), 'moov', 'mvhd');
      const elst = mp4Child(b, trak, 'edts', 'elst');
      if (b[mvhd.body] !== 0 || b[elst.body] !== 0 || b.readUInt32BE(elst.body + 4) !== 1)
        throw new Error('trimmedEditMp4: expected a version-0 mvhd and a one-entry elst');
      b.writeUInt32BE(o.presented * b.readUInt32BE(mvhd.body + 12), elst.body + 8);
      await writeFile(out, b);
    });
  });
}

/** What {@link editListMp4} holds: samples for `seconds`, an edit list presenting `presented`. */
export const EDIT_LIST_MP4 = { seconds: 8.08, presented: 2.27 } as const;

/**
 * An HEVC MP4 whose sample table holds 8.08 s of pictures (320x240 25 fps testsrc2, faststart)
 * and whose edit list, track and movie headers present only the first 2.27 s: the samples after
 * it are in the file but outside the presentation (FFmpeg flags them discard; no player shows
 * them), as in a clip trimmed by an editor that kept the media.
 */
export function editListMp4(): Promise<string> {
  return cached('edit-list-hevc', 'mp4', EDIT_LIST_MP4, async (out) => {
    await withTemp('mp4', async (full) => {
      await run('ffmpeg', [
        ...FFMPEG,
        ...['-f', 'lavfi', '-i', `testsrc2=s=320x240:r=25:d=${EDIT_LIST_MP4.seconds}`],
        ...['-c:v', 'libx265', '-preset', 'ultrafast', '-x265-params', 'log-level=error'],
        ...['-pix_fmt', 'yuv420p', '-tag:v', 'hvc1', '-movflags', '+faststart'],
        ...BITEXACT,
        full,
      ]);
      const b = Buffer.from(await readFile(full));
      const moov = mp4Child(b, mp4File(b), 'moov');
      const mvhd = mp4Child(b, moov, 'mvhd');
      if (b[mvhd.body] !== 0) throw new Error('editListMp4: mvhd is not version 0');
      const movieScale = b.readUInt32BE(mvhd.body + 12);
      const presented = (scale: number) => Math.round(EDIT_LIST_MP4.presented * scale);
      b.writeUInt32BE(presented(movieScale), mvhd.body + 16);
      const [trak] = mp4Tracks(b, 'vide');
      if (!trak) throw new Error('editListMp4: no video track');
      const tkhd = mp4Child(b, trak, 'tkhd');
      const mdhd = mp4Child(b, trak, 'mdia', 'mdhd');
      const elst = mp4Child(b, trak, 'edts', 'elst');
      if (
        b[tkhd.body] !== 0 ||
        b[mdhd.body] !== 0 ||
        b[elst.body] !== 0 ||
        b.readUInt32BE(elst.body + 4) !== 1
      )
        throw new Error('editListMp4: expected version-0 tkhd, mdhd and a one-entry elst');
      b.writeUInt32BE(presented(movieScale), tkhd.body + 20);
      b.writeUInt32BE(presented(b.readUInt32BE(mdhd.body + 12)), mdhd.body + 16);
      b.writeUInt32BE(presented(movieScale), elst.body + 8); // the one edit's segment duration
      await writeFile(out, b);
    });
  });
}

/** What {@link intraRefreshTs} holds: a 12 s recording, of which the part after `cut` is kept. */
export const INTRA_REFRESH_TS = { seconds: 12, keyint: 50, cut: 0.3 } as const;

/**
 * An H.264 transport stream with periodic intra refresh and no IDR after the first picture (x264
 * intra-refresh, 320x240 25 fps testsrc2, MP2 audio), whose first 30 % of packets are cut away:
 * it starts mid-refresh, as a capture joined mid-broadcast does, so a decoder shows nothing until
 * the next recovery point, 1.1 s in.
 */
export function intraRefreshTs(): Promise<string> {
  const o = INTRA_REFRESH_TS;
  return cached('intra-refresh-cut', 'ts', o, async (out) => {
    await withTemp('ts', async (full) => {
      await run('ffmpeg', [
        ...FFMPEG,
        ...['-f', 'lavfi', '-i', `testsrc2=s=320x240:r=25:d=${o.seconds}`],
        ...['-f', 'lavfi', '-i', `sine=frequency=440:sample_rate=48000:duration=${o.seconds}`],
        ...['-c:v', 'libx264', '-preset', 'ultrafast', '-x264-params', `intra-refresh=1:keyint=${o.keyint}`],
        ...['-bf', '0', '-pix_fmt', 'yuv420p', '-c:a', 'mp2', '-f', 'mpegts'],
        ...BITEXACT,
        full,
      ]);
      const b = await readFile(full);
      const from = Math.floor((b.length * o.cut) / 188) * 188; // on a TS packet boundary
      await writeFile(out, b.subarray(from));
    });
  });
}

/** What {@link hevcCutTs} holds: a 12 s recording, of which the part after `cut` is kept. */
export const HEVC_CUT_TS = { seconds: 12, keyint: 50, cut: 0.3 } as const;

/**
 * An HEVC transport stream (libx265, open GOPs of `keyint` pictures: CRA keyframes with leading
 * pictures; 320x240 25 fps testsrc2, MP2 audio) whose first 30 % of packets are cut away, as a
 * capture joined mid-broadcast: it opens mid-GOP. FFmpeg's HEVC decoder still shows the pictures
 * before the first keyframe (it invents their missing references) and drops the CRA's leading
 * pictures, so what a sequential decode shows is not what the packet list suggests.
 */
export function hevcCutTs(): Promise<string> {
  const o = HEVC_CUT_TS;
  return cached('hevc-cut', 'ts', o, async (out) => {
    await withTemp('ts', async (full) => {
      await run('ffmpeg', [
        ...FFMPEG,
        ...['-f', 'lavfi', '-i', `testsrc2=s=320x240:r=25:d=${o.seconds}`],
        ...['-f', 'lavfi', '-i', `sine=frequency=440:sample_rate=48000:duration=${o.seconds}`],
        ...['-c:v', 'libx265', '-preset', 'ultrafast', '-x265-params', `keyint=${o.keyint}:log-level=error`],
        ...['-pix_fmt', 'yuv420p', '-c:a', 'mp2', '-f', 'mpegts'],
        ...BITEXACT,
        full,
      ]);
      const b = await readFile(full);
      const from = Math.floor((b.length * o.cut) / 188) * 188; // on a TS packet boundary
      await writeFile(out, b.subarray(from));
    });
  });
}

/** What {@link dvbDropTs} holds: a 12 s recording, the part after `cut` kept, `drop` of its packets lost. */
export const DVB_DROP_TS = { seconds: 12, offset: 30_000, cut: 0.3, drop: [0.5, 0.53] } as const;

/**
 * A DVB-style capture with a reception drop: an MPEG-TS of three programs, each with its own PMT
 * and PIDs (one: H.264 25 fps testsrc2 with B-frames and MP2 audio; two: a radio service, MP2
 * audio only; three: a video PID its PMT lists that carries no data), its clock `offset` seconds on, the first
 * 30 % of its packets cut away (joined mid-broadcast) and then 3 % of its 188-byte packets
 * (50 %..53 % of those left) removed, as a receiver loses them.
 *
 * `secondVideo`: program three's PID carries a second service instead (testsrc, same size and
 * rate, other pictures), whose cut leaves its duration a frame longer than program one's while it
 * keeps a packet fewer: any count of frames prefers one program or the other by a frame.
 */
export function dvbDropTs(options: { secondVideo?: boolean } = {}): Promise<string> {
  const o = options.secondVideo ? { ...DVB_DROP_TS, secondVideo: 'testsrc' } : DVB_DROP_TS;
  const third = options.secondVideo
    ? `testsrc=s=320x240:r=25:d=${o.seconds}`
    : 'color=c=gray:s=320x240:r=25:d=0.04';
  const name = options.secondVideo ? 'dvb-capture-drop-two-videos' : 'dvb-capture-drop';
  return cached(name, 'ts', o, async (out) => {
    await withTemp('ts', async (full) => {
      await run('ffmpeg', [
        ...FFMPEG,
        ...['-f', 'lavfi', '-i', `testsrc2=s=320x240:r=25:d=${o.seconds}`],
        ...['-f', 'lavfi', '-i', `sine=frequency=440:sample_rate=48000:duration=${o.seconds}`],
        ...['-f', 'lavfi', '-i', third],
        ...['-map', '0:v', '-map', '1:a', '-map', '1:a', '-map', '2:v'],
        ...(options.secondVideo ? [] : ['-frames:v:1', '0']),
        ...['-c:v', 'libx264', '-preset', 'veryfast', '-g', '25', '-pix_fmt', 'yuv420p', '-c:a', 'mp2'],
        ...['-program', 'program_num=1:title=One:st=0:st=1', '-program', 'program_num=2:title=Two:st=2'],
        ...['-program', 'program_num=3:title=Three:st=3', '-output_ts_offset', String(o.offset)],
        ...['-f', 'mpegts', ...BITEXACT],
        full,
      ]);
      const b = await readFile(full);
      const kept = b.subarray(Math.floor((b.length * o.cut) / 188) * 188); // on a packet boundary
      const packets = kept.length / 188;
      const [from, to] = o.drop.map((f) => Math.floor(packets * f) * 188) as [number, number];
      await writeFile(out, Buffer.concat([kept.subarray(0, from), kept.subarray(to)]));
    });
  });
}

// --- 5. Where a cut MP4's data ends (issue 42) ------------------------------------------------

/** Each sample's duration (media time scale, decode order), from stts. */
function mp4Durations(buf: Buffer, trak: Mp4Box): number[] {
  const stts = mp4Child(buf, trak, 'mdia', 'minf', 'stbl', 'stts');
  const out: number[] = [];
  for (let i = 0; i < buf.readUInt32BE(stts.body + 4); i++) {
    const count = buf.readUInt32BE(stts.body + 8 + 8 * i);
    const delta = buf.readUInt32BE(stts.body + 12 + 8 * i);
    for (let k = 0; k < count; k++) out.push(delta);
  }
  return out;
}

/**
 * Rewrites an MP4 as ftyp, moov, mdat (the index first, as `-movflags +faststart` writes it), its
 * samples stored in the order `runs` gives (each a range of one track's samples in decode order;
 * every sample of every track exactly once), one sample per chunk. `tables` swaps further boxes
 * of a track's sample table, keyed by the track box's offset. Returns the file and each track's
 * sample offsets in it (keyed the same way).
 */
function mp4Relayout(
  buf: Buffer,
  runs: Array<{ trak: Mp4Box; from: number; to: number }>,
  tables: Map<number, Record<string, Buffer>> = new Map(),
): { file: Buffer; offsets: Map<number, number[]> } {
  const top = mp4File(buf);
  const ftyp = mp4Child(buf, top, 'ftyp');
  const moov = mp4Child(buf, top, 'moov');
  const placed = new Map<number, number[]>();
  const data: Buffer[] = [];
  let at = 0;
  for (const { trak, from, to } of runs) {
    const samples = mp4Samples(buf, trak);
    const offsets = placed.get(trak.start) ?? new Array<number>(samples.length);
    placed.set(trak.start, offsets);
    for (let i = from; i < to; i++) {
      const s = samples[i];
      if (!s || offsets[i] !== undefined) throw new Error(`mp4Relayout: sample ${i} missing or placed twice`);
      offsets[i] = at;
      data.push(buf.subarray(s.offset, s.offset + s.size));
      at += s.size;
    }
  }
  const traks = mp4Children(buf, moov.body, moov.end).filter((b) => b.type === 'trak');
  for (const trak of traks) {
    const offsets = placed.get(trak.start);
    if (!offsets || offsets.includes(undefined as unknown as number) || offsets.length === 0)
      throw new Error(`mp4Relayout: the track at ${trak.start} is not wholly placed`);
  }
  const moovAt = (base: number) =>
    mp4Box(
      'moov',
      mp4Rebuild(buf, moov, (child) => {
        if (child.type !== 'trak') return undefined;
        const offsets = (placed.get(child.start) as number[]).map((o) => base + o);
        const stco = mp4FullBox('stco', [offsets.length, ...offsets]);
        const swap: Record<string, Buffer> = {
          stsc: mp4FullBox('stsc', [1, 1, 1, 1]),
          stco,
          co64: stco,
          ...tables.get(child.start),
        };
        return mp4Box(
          'trak',
          mp4Rebuild(buf, child, (k) => swap[k.type]),
        );
      }),
    );
  // The index's size does not depend on the offsets it holds.
  const base = ftyp.end - ftyp.start + moovAt(0).length + 8;
  if (base + at >= 2 ** 32) throw new Error('mp4Relayout: too large for 32-bit chunk offsets');
  const mdat = Buffer.alloc(8);
  mdat.writeUInt32BE(8 + at, 0);
  mdat.write('mdat', 4, 'latin1');
  const file = Buffer.concat([buf.subarray(ftyp.start, ftyp.end), moovAt(base), mdat, ...data]);
  const offsets = new Map([...placed].map(([k, list]) => [k, list.map((o) => base + o)]));
  return { file, offsets };
}

/**
 * What {@link laggingAudioCutMp4} holds: `seconds` of 25 fps video and AAC audio; the file stores
 * the video's first `videoFirst` s, then all the audio, then the rest of the video, and is cut
 * inside the audio sample that starts at `audioKept` s or just after.
 */
export const LAGGING_AUDIO_MP4 = { seconds: 10, fps: 25, videoFirst: 6, audioKept: 1.5 } as const;

/**
 * A cut MP4 whose audio lies far behind its video in the file, as in FATE's h264/wwwq_cut.mp4
 * (index pattern 320x240, no B-frames, index first): the file holds the video to 6 s and the
 * audio to 1.5 s. FFmpeg's MP4 demuxer hands the samples of all streams out by time (by file
 * position within a second), so a read of both streams asks for the first missing audio sample
 * while the video is about a second ahead and stops there, at about 2.5 s; a read of the video
 * alone reaches 6 s.
 */
export function laggingAudioCutMp4(): Promise<string> {
  const o = LAGGING_AUDIO_MP4;
  return cached('lagging-audio-cut', 'mp4', o, async (out) => {
    const src = await readFile(await indexClip({ seconds: o.seconds, fps: o.fps, bframes: 0, audio: true }));
    const [video] = mp4Tracks(src, 'vide');
    const [audio] = mp4Tracks(src, 'soun');
    if (!video || !audio) throw new Error('laggingAudioCutMp4: expected a video and an audio track');
    const frames = mp4Samples(src, video).length;
    const split = o.videoFirst * o.fps;
    const audioSamples = mp4Samples(src, audio).length;
    const { file, offsets } = mp4Relayout(src, [
      { trak: video, from: 0, to: split },
      { trak: audio, from: 0, to: audioSamples },
      { trak: video, from: split, to: frames },
    ]);
    // The audio sample that starts at audioKept s or just after (media time), cut in its middle.
    const mdhd = mp4Child(src, audio, 'mdia', 'mdhd');
    const scale = src.readUInt32BE(mdhd.body + 12);
    let t = 0;
    const durations = mp4Durations(src, audio);
    const k = durations.findIndex((d) => {
      const starts = t;
      t += d;
      return starts >= o.audioKept * scale;
    });
    const at = offsets.get(audio.start)?.[k];
    const size = mp4Samples(src, audio)[k]?.size;
    if (k < 0 || at === undefined || size === undefined)
      throw new Error('laggingAudioCutMp4: no audio sample there');
    await writeFile(out, file.subarray(0, at + Math.floor(size / 2)));
  });
}

/** What {@link frameCutMp4} holds: `seconds` of 25 fps video, of which the first `frames` frames. */
export const FRAME_CUT_MP4 = { seconds: 20, fps: 25, frames: 225 } as const;

/**
 * An MP4 (index first, 320x240 index pattern, 25 fps, no B-frames) declaring 20 s, cut right
 * after its 225th frame's sample: the file ends exactly where a whole sample ends, and its data at
 * 9 s (that frame's 8.96 s plus its 40 ms).
 */
export function frameCutMp4(): Promise<string> {
  const o = FRAME_CUT_MP4;
  return cached('frame-cut', 'mp4', o, async (out) => {
    const src = await readFile(await indexClip({ seconds: o.seconds, fps: o.fps, bframes: 0 }));
    const [video] = mp4Tracks(src, 'vide');
    if (!video) throw new Error('frameCutMp4: no video track');
    const samples = mp4Samples(src, video);
    const { file, offsets } = mp4Relayout(src, [{ trak: video, from: 0, to: samples.length }]);
    const last = o.frames - 1;
    const end = (offsets.get(video.start)?.[last] ?? Number.NaN) + (samples[last]?.size ?? Number.NaN);
    if (!(end < file.length)) throw new Error('frameCutMp4: the cut is not inside the file');
    await writeFile(out, file.subarray(0, end));
  });
}

/**
 * What {@link longFrameMp4} holds: 15 fps video whose sample number `before` (0-based) lasts
 * `long` s, `after` more samples after it.
 */
export const LONG_FRAME_MP4 = { fps: 15, before: 34, long: 5.8 } as const;

/**
 * An MP4 (index first, 320x240 index pattern, no B-frames) of 15 fps pictures, one of which, the
 * 35th, lasts 5.8 s, as in FATE's hevc/two_first_slice.mp4 (a screen recording's still). `after`
 * frames of 1/15 s follow it; with `cut`, the file ends right after the long frame's sample (its
 * index still lists the frames after). The container declares the whole, long frame included.
 */
export function longFrameMp4(opts: { after: number; cut: boolean }): Promise<string> {
  const o = { ...LONG_FRAME_MP4, ...opts };
  const frames = o.before + 1 + o.after;
  return cached(`long-frame${o.cut ? '-cut' : ''}`, 'mp4', o, async (out) => {
    const src = Buffer.from(
      await readFile(await indexClip({ seconds: frames / o.fps, fps: o.fps, bframes: 0 })),
    );
    const [video] = mp4Tracks(src, 'vide');
    if (!video) throw new Error('longFrameMp4: no video track');
    const durations = mp4Durations(src, video);
    const step = durations[0] as number;
    if (durations.length !== frames || durations.some((d) => d !== step))
      throw new Error('longFrameMp4: expected evenly timed frames');
    const moov = mp4Child(src, mp4File(src), 'moov');
    const mvhd = mp4Child(src, moov, 'mvhd');
    const tkhd = mp4Child(src, video, 'tkhd');
    const mdhd = mp4Child(src, video, 'mdia', 'mdhd');
    if (src[mvhd.body] !== 0 || src[tkhd.body] !== 0 || src[mdhd.body] !== 0)
      throw new Error('longFrameMp4: expected version-0 mvhd, tkhd and mdhd');
    const mediaScale = src.readUInt32BE(mdhd.body + 12);
    const movieScale = src.readUInt32BE(mvhd.body + 12);
    const long = Math.round(o.long * mediaScale);
    const total = (frames - 1) * step + long;
    const movie = Math.round((total * movieScale) / mediaScale);
    src.writeUInt32BE(total, mdhd.body + 16);
    src.writeUInt32BE(movie, tkhd.body + 20);
    src.writeUInt32BE(movie, mvhd.body + 16);
    const edts = mp4Children(src, video.body, video.end).find((b) => b.type === 'edts');
    if (edts) {
      const elst = mp4Child(src, edts, 'elst');
      if (src[elst.body] !== 0 || src.readUInt32BE(elst.body + 4) !== 1)
        throw new Error('longFrameMp4: expected a one-entry version-0 elst');
      src.writeUInt32BE(movie, elst.body + 8);
    }
    const stts = mp4FullBox('stts', [
      o.after ? 3 : 2,
      ...[o.before, step, 1, long],
      ...(o.after ? [o.after, step] : []),
    ]);
    const samples = mp4Samples(src, video);
    const { file, offsets } = mp4Relayout(
      src,
      [{ trak: video, from: 0, to: frames }],
      new Map([[video.start, { stts }]]),
    );
    const end = o.cut
      ? (offsets.get(video.start)?.[o.before] ?? Number.NaN) + (samples[o.before]?.size ?? Number.NaN)
      : file.length;
    if (!(end <= file.length)) throw new Error('longFrameMp4: the cut is not inside the file');
    await writeFile(out, file.subarray(0, end));
  });
}
