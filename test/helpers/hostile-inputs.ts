/**
 * Inputs that FFmpeg would follow to other files (DESIGN §5a "Containers a server opens"), built
 * at test time, and the canary they point at: a solid magenta video (and its segments, pictures)
 * outside any server's data directory. A sheet that shows magenta shows the canary.
 *
 * Two canaries: `files` are real media (proof that a form is a real threat: opened as any
 * container, FFmpeg follows it to them), `fifos` are named pipes at the same kind of paths whose
 * every open for reading is counted (proof that a restricted open opened nothing else: FFmpeg
 * blocks opening a pipe until a writer comes, and the watcher is that writer).
 */
import { execFile } from 'node:child_process';
import { closeSync, constants, openSync } from 'node:fs';
import { copyFile, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Image } from './frames.js';

const execFileP = promisify(execFile);

const ffmpeg = (args: string[]) => execFileP('ffmpeg', ['-v', 'error', '-nostdin', '-y', ...args]);

/** The canary's picture: solid magenta, a colour no sheet theme and no test clip uses. */
export const CANARY_RGB = [255, 0, 255] as const;
/** Its length, seconds (no other clip here lasts as long). */
export const CANARY_SECONDS = 10;

export interface CanaryPaths {
  /** H.264 in MP4, MPEG-TS and Matroska: what playlists name as segments. */
  mp4: string;
  ts: string;
  mkv: string;
  /** One frame as a picture. */
  jpg: string;
  png: string;
  /** `frame-%03d.jpg`: an image2 pattern that matches three pictures of it. */
  pattern: string;
}

/** Makes the canary media in `dir`. */
export async function makeCanary(dir: string): Promise<CanaryPaths> {
  await mkdir(dir, { recursive: true });
  const p: CanaryPaths = {
    mp4: join(dir, 'canary.mp4'),
    ts: join(dir, 'canary.ts'),
    mkv: join(dir, 'canary.mkv'),
    jpg: join(dir, 'canary.jpg'),
    png: join(dir, 'canary.png'),
    pattern: join(dir, 'frame-%03d.jpg'),
  };
  const source = `color=c=magenta:s=160x120:r=10:d=${CANARY_SECONDS}`;
  await ffmpeg(['-f', 'lavfi', '-i', source, '-c:v', 'libx264', '-pix_fmt', 'yuv420p', p.mp4]);
  await Promise.all([
    ffmpeg(['-i', p.mp4, '-c', 'copy', p.ts]),
    ffmpeg(['-i', p.mp4, '-c', 'copy', p.mkv]),
    ffmpeg(['-i', p.mp4, '-frames:v', '1', p.jpg]),
    ffmpeg(['-i', p.mp4, '-frames:v', '1', p.png]),
  ]);
  for (const n of [1, 2, 3]) await copyFile(p.jpg, join(dir, `frame-00${n}.jpg`));
  return p;
}

export interface FifoCanary {
  paths: CanaryPaths;
  /** Opens for reading seen so far, by path. */
  opened: string[];
  stop(): void;
}

/**
 * Named pipes at canary-like paths (`canary.mp4`, `canary.ts`, ...), watched every 10 ms: a writer
 * can open a pipe without blocking only while a reader has it open (or waits in `open`), so every
 * reader FFmpeg starts is seen, then released with an empty stream.
 */
export async function fifoCanary(dir: string): Promise<FifoCanary> {
  await mkdir(dir, { recursive: true });
  const paths: CanaryPaths = {
    mp4: join(dir, 'canary.mp4'),
    ts: join(dir, 'canary.ts'),
    mkv: join(dir, 'canary.mkv'),
    jpg: join(dir, 'canary.jpg'),
    png: join(dir, 'canary.png'),
    pattern: join(dir, 'frame-%03d.jpg'),
  };
  const pipes = [
    paths.mp4,
    paths.ts,
    paths.mkv,
    paths.jpg,
    paths.png,
    ...[1, 2, 3].map((n) => join(dir, `frame-00${n}.jpg`)),
  ];
  await execFileP('mkfifo', pipes);
  const opened: string[] = [];
  const timer = setInterval(() => {
    for (const pipe of pipes) {
      let fd: number;
      try {
        fd = openSync(pipe, constants.O_WRONLY | constants.O_NONBLOCK);
      } catch {
        continue; // ENXIO: no reader
      }
      opened.push(pipe);
      closeSync(fd);
    }
  }, 10);
  return { paths, opened, stop: () => clearInterval(timer) };
}

export interface HostileInput {
  /** What it is, for messages. */
  kind: string;
  /** The name it is uploaded under. */
  filename: string;
  bytes: Buffer;
}

const text = (s: string) => Buffer.from(s, 'utf8');

/** An HLS playlist of one segment. */
const hls = (segment: string, extra = '') =>
  text(`#EXTM3U\n${extra}#EXT-X-TARGETDURATION:10\n#EXTINF:10,\n${segment}\n#EXT-X-ENDLIST\n`);

/**
 * Every form of "a file that names other files" this suite knows, pointing at `c`: playlists,
 * manifests, lists, image sequences and pictures, session descriptions and plain text, under
 * video-like names (each name used once, so all can be written side by side). Lists name the
 * canary relative to themselves where FFmpeg refuses absolute paths: written next to the canary
 * they are a real threat locally; uploaded, they name nothing (the work directory holds no canary).
 * Opened as any container, FFmpeg follows many of them; a server refuses every one.
 */
export async function hostileInputs(
  c: CanaryPaths,
  /** Where the pictures' bytes are read (the real canary, when `c` names pipes). */
  pictures: CanaryPaths = c,
): Promise<HostileInput[]> {
  const dash = text(`<?xml version="1.0"?>
<MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT10S" minBufferTime="PT1S" profiles="urn:mpeg:dash:profile:isoff-on-demand:2011">
<Period><AdaptationSet mimeType="video/mp4"><Representation id="1" bandwidth="1000" width="160" height="120" codecs="avc1.42c00d">
<BaseURL>file://${c.mp4}</BaseURL></Representation></AdaptationSet></Period></MPD>
`);
  const sdp = text(
    'v=0\no=- 0 0 IN IP4 127.0.0.1\ns=x\nc=IN IP4 127.0.0.1\nt=0 0\nm=video 5004 RTP/AVP 96\na=rtpmap:96 H264/90000\n',
  );
  const [jpg, png] = await Promise.all([readFile(pictures.jpg), readFile(pictures.png)]);
  return [
    // The reported bug: one control byte in a comment line, and the "is it text" check let it by.
    { kind: 'HLS with a control byte', filename: 'holiday.mp4', bytes: hls(c.ts, '#\x01 holiday\n') },
    { kind: 'HLS, .ts segment', filename: 'clip.mp4', bytes: hls(c.ts) },
    { kind: 'HLS, .mp4 segment (file URL)', filename: 'movie.mp4', bytes: hls(`file://${c.mp4}`) },
    { kind: 'HLS, .mkv segment', filename: 'clip.mkv', bytes: hls(c.mkv) },
    { kind: 'HLS named .m3u8', filename: 'list.m3u8', bytes: hls(c.ts) },
    { kind: 'HLS named .ts', filename: 'video.ts', bytes: hls(c.ts) },
    {
      kind: 'HLS with binary bytes',
      filename: 'holiday-2.mp4',
      // Not UTF-8, control bytes, and an MP4 box header at the end (a NUL before the playlist's
      // lines would stop FFmpeg's HLS probe, so the binary comes in comments).
      bytes: Buffer.concat([
        hls(c.ts, '#\x01\x02\n'),
        Buffer.from([0x23, 0x80, 0xff, 0xfe, 0x0a, 0x23, 0, 0, 0, 0x18]),
        Buffer.from('ftypisom\n'),
      ]),
    },
    { kind: 'DASH manifest', filename: 'video.mp4', bytes: dash },
    { kind: 'DASH manifest named .mpd', filename: 'manifest.mpd', bytes: dash },
    { kind: 'ffconcat list', filename: 'list.mp4', bytes: text('ffconcat version 1.0\nfile canary.mp4\n') },
    {
      kind: 'ffconcat list named .ffconcat',
      filename: 'list.ffconcat',
      bytes: text('ffconcat version 1.0\nfile canary.mkv\n'),
    },
    { kind: 'concat list', filename: 'list.txt', bytes: text(`file '${c.mp4}'\nfile '${c.ts}'\n`) },
    { kind: 'SDP session', filename: 'session.sdp', bytes: sdp },
    { kind: 'SDP session named .mp4', filename: 'stream.mp4', bytes: sdp },
    {
      kind: 'text',
      filename: 'notes.mp4',
      bytes: text('This is not a video, only some text named like one.\n'),
    },
    // Pictures: an image (or an image2 sequence) is not a video container.
    { kind: 'single JPEG named .mp4', filename: 'photo.mp4', bytes: jpg },
    { kind: 'single PNG named .mp4', filename: 'image.mp4', bytes: png },
    { kind: 'single JPEG named .jpg', filename: 'photo.jpg', bytes: jpg },
    // Next to the canary's frame-001..003.jpg, an image2 pattern that matches them.
    { kind: 'image2 pattern', filename: 'frame-%03d.jpg', bytes: jpg },
  ];
}

/**
 * A real 4 s video (solid green, 160x120) in Matroska with an attachment holding an HLS playlist
 * that names the canary: it must open as `matroska,webm` and show only its own picture.
 */
export async function matroskaWithPlaylist(dir: string, c: CanaryPaths): Promise<string> {
  await mkdir(dir, { recursive: true });
  const playlist = join(dir, 'attached.m3u8');
  await writeFile(playlist, hls(c.ts));
  const out = join(dir, 'with-playlist.mkv');
  await ffmpeg([
    '-f',
    'lavfi',
    '-i',
    'color=c=green:s=160x120:r=10:d=4',
    '-c:v',
    'libx264',
    '-pix_fmt',
    'yuv420p',
    '-attach',
    playlist,
    '-metadata:s:t',
    'mimetype=application/vnd.apple.mpegurl',
    out,
  ]);
  return out;
}

/** The share of an image's pixels within `tolerance` of `rgb` on every channel. */
export function shareNear(img: Image, rgb: readonly [number, number, number], tolerance = 70): number {
  let hits = 0;
  const n = img.width * img.height;
  for (let i = 0; i < n; i++) {
    const p = i * 4;
    const near =
      Math.abs((img.data[p] as number) - rgb[0]) <= tolerance &&
      Math.abs((img.data[p + 1] as number) - rgb[1]) <= tolerance &&
      Math.abs((img.data[p + 2] as number) - rgb[2]) <= tolerance;
    if (near) hits++;
  }
  return hits / n;
}

/** The share of an image's pixels that are the canary's magenta. */
export const canaryShare = (img: Image): number => shareNear(img, CANARY_RGB);

/** The picture of the test's own videos (`color=c=green`). */
export const GREEN_RGB = [0, 128, 0] as const;
