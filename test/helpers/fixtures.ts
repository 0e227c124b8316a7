/**
 * Fixture clips, synthesised with ffmpeg on demand and cached in `fixtures/.cache/` (gitignored).
 *
 * Every maker is keyed by a hash of its parameters (plus {@link FIXTURE_VERSION}), so a second run
 * reuses the file. A clip is written under a temporary name and renamed into place, and a lock file
 * keeps two vitest workers from building the same clip at once, so nobody ever sees half a file.
 *
 * Oracles: {@link frameTimes} lists a clip's presentation times the way the engines must see them,
 * and {@link expectedIndex} applies the frame rule of DESIGN §2 (the last frame whose time is <= t).
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdir, open, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { INDEX_LAYOUT } from './frames.js';

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
async function run(cmd: string, args: string[], opts: RunOptions = {}): Promise<void> {
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

const FFMPEG = ['-hide_banner', '-nostdin', '-loglevel', 'error', '-y'];
/** Keeps output bytes independent of the ffmpeg build's version string. */
const BITEXACT = [
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
async function cached(
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
async function withTemp<T>(ext: string, fn: (path: string) => Promise<T>): Promise<T> {
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
      args.push('-sc_threshold', '0', '-x264-params', 'b-adapt=0');
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

/**
 * Broken inputs, built from valid small clips. Names (each also the file's base name suffix):
 * truncated-{10,50,90}.mp4 (moov at the end, so all of it is lost),
 * truncated-faststart-{10,50,90}.mp4 (moov first, mdat cut), zeroed-middle.mp4 (faststart, 10% of
 * the bytes around the middle zeroed), truncated-50.mkv, zeroed-middle.ts, random.mp4 (64 KiB of
 * pseudo-random bytes), empty.mp4, audio-only.mp4 (AAC in MP4, no video stream), text.mkv.
 */
export async function damagedFiles(): Promise<DamagedFile[]> {
  const [mp4, mp4Fast, mkv, ts] = await Promise.all([
    damageSource('mp4', false),
    damageSource('mp4', true),
    damageSource('mkv', false),
    damageSource('ts', false),
  ]);
  const specs: Array<Omit<DamagedFile, 'path'> & { make: () => Promise<string> }> = [
    ...[10, 50, 90].map((p) => ({
      name: `truncated-${p}.mp4`,
      expect: 'unreadable' as const,
      description: `an mp4 with its index (moov) at the end, cut at ${p}% of its bytes`,
      make: () => derived(`truncated-${p}`, 'mp4', mp4, truncate(p / 100)),
    })),
    ...[10, 50, 90].map((p) => ({
      name: `truncated-faststart-${p}.mp4`,
      expect: 'partial' as const,
      description: `a faststart mp4 (moov first) cut at ${p}% of its bytes: the later frames are missing`,
      make: () => derived(`truncated-faststart-${p}`, 'mp4', mp4Fast, truncate(p / 100)),
    })),
    {
      name: 'zeroed-middle.mp4',
      expect: 'partial',
      description: 'a faststart mp4 with 45%..55% of its bytes zeroed',
      make: () => derived('zeroed-middle', 'mp4', mp4Fast, zeroMiddle),
    },
    {
      name: 'truncated-50.mkv',
      expect: 'partial',
      description: 'a Matroska file cut at 50% of its bytes',
      make: () => derived('truncated-50', 'mkv', mkv, truncate(0.5)),
    },
    {
      name: 'zeroed-middle.ts',
      expect: 'partial',
      description: 'an MPEG-TS with 45%..55% of its bytes zeroed',
      make: () => derived('zeroed-middle', 'ts', ts, zeroMiddle),
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
            '-f',
            'lavfi',
            '-i',
            'sine=frequency=440:sample_rate=48000:duration=3',
            '-c:a',
            'aac',
            '-b:a',
            '64k',
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
  return Promise.all(specs.map(async ({ make, ...rest }) => ({ ...rest, path: await make() })));
}

// ---------------------------------------------------------------------------------------------
// The frame-time oracle

/** A clip's video frames as the engines must see them. */
export interface FrameTimes {
  /** Presentation times in seconds relative to the container start time, display order. */
  times: number[];
  /** The same, exact: pts in `timeBase` units (best_effort_timestamp when pts is missing). */
  pts: bigint[];
  timeBase: { num: bigint; den: bigint };
  /** The format start_time (what ffprobe prints) in whole microseconds; 0 when unknown. */
  startUs: bigint;
}

/** Parses a decimal seconds string ('19208.400000', '-0.023220') into whole microseconds, exactly. */
export function secondsToUs(s: string): bigint {
  const m = /^(-?)(\d+)(?:\.(\d+))?$/.exec(s.trim());
  if (!m) throw new Error(`not a decimal number of seconds: ${s}`);
  const frac = (m[3] ?? '').padEnd(6, '0');
  // Beyond 6 decimals, round half up (ffprobe prints 6, so this is only for hand-written input).
  let us = BigInt(m[2] as string) * 1_000_000n + BigInt(frac.slice(0, 6));
  if (frac.length > 6 && Number(frac[6]) >= 5) us += 1n;
  return m[1] ? -us : us;
}

/**
 * Decodes the video stream with ffprobe (`-show_frames`) and returns each frame's presentation
 * time relative to the format start_time, in display order. `stream` is the absolute stream index
 * (default: the first video stream).
 */
export async function frameTimes(path: string, stream?: number): Promise<FrameTimes> {
  const select = stream === undefined ? 'v:0' : String(stream);
  const data = (await ffprobeJson([
    '-select_streams',
    select,
    '-show_frames',
    '-show_entries',
    'frame=pts,best_effort_timestamp:stream=index,time_base:format=start_time',
    path,
  ])) as {
    frames?: Array<{ pts?: number; best_effort_timestamp?: number }>;
    streams?: Array<{ time_base?: string }>;
    format?: { start_time?: string };
  };
  const tb = /^(\d+)\/(\d+)$/.exec(data.streams?.[0]?.time_base ?? '');
  if (!tb) throw new Error(`frameTimes: no time base for ${path}`);
  const timeBase = { num: BigInt(tb[1] as string), den: BigInt(tb[2] as string) };
  const startUs = data.format?.start_time ? secondsToUs(data.format.start_time) : 0n;
  const pts = (data.frames ?? [])
    .map((f) => f.pts ?? f.best_effort_timestamp)
    .filter((p): p is number => typeof p === 'number')
    .map((p) => BigInt(p))
    .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  // Seconds relative to the start, rounded to the nanosecond: for reading, not for comparisons.
  const times = pts.map(
    (p) => Number((p * timeBase.num * 1_000_000_000n) / timeBase.den - startUs * 1000n) / 1e9,
  );
  return { times, pts, timeBase, startUs };
}

/**
 * The index (display order) of the frame shown at `tSeconds` after the container start: the last
 * frame whose presentation time is <= t, or frame 0 when t is before the first frame. Compared
 * exactly in integers, with t rounded to whole microseconds (exact for millisecond cell times):
 * pts * tb.num * 1e6 <= (startUs + tUs) * tb.den.
 */
export function expectedIndex(ft: FrameTimes, tSeconds: number): number {
  const tUs = BigInt(Math.round(tSeconds * 1e6));
  const rhs = (ft.startUs + tUs) * ft.timeBase.den;
  let lo = 0;
  let hi = ft.pts.length - 1;
  let found = 0;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if ((ft.pts[mid] as bigint) * ft.timeBase.num * 1_000_000n <= rhs) {
      found = mid;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  return found;
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
