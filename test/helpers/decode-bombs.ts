/**
 * Files that cost far more to decode than to send (issue 40, DESIGN §5a "Decode cost is bounded
 * before and during a job"): a picture over the pixel bound in the containers a server accepts,
 * a huge frame size declared in a VP9 header, more streams than `max_streams`, tracks that all
 * hold one large picture (under both limits: each decoded once costs a frame; decoded per track,
 * the probe used to cost one frame per track), and a legitimate picture that needs more memory
 * than a small worker limit. Built with ffmpeg and a byte patch, cached like every fixture.
 */
import { copyFile, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { createDeflate } from 'node:zlib';
import { cached, FFMPEG, plainClip, run, withTemp } from './fixtures.js';

/** The default `VIDSHEET_MAX_PIXELS` (8192x4320). */
export const MAX_PIXELS = 35_389_440;

/** One still picture of `w`x`h` (flat colour, so a few hundred KB at most) as PNG or JPEG. */
function picture(w: number, h: number, codec: 'png' | 'mjpeg', tmp: string, pixFmt?: string) {
  return run('ffmpeg', [
    ...FFMPEG,
    ...['-f', 'lavfi', '-i', `color=c=0x3060c0:s=${w}x${h}:d=1`],
    ...['-frames:v', '1', '-c:v', codec],
    ...(pixFmt ? ['-pix_fmt', pixFmt] : codec === 'mjpeg' ? ['-pix_fmt', 'yuvj420p'] : []),
    tmp,
  ]);
}

/**
 * `tracks` video tracks, each a 1 s still of the same `w`x`h` picture (PNG or MJPEG), in MOV or
 * AVI: the review's "many streams sharing one picture" with `tracks` > 1.
 */
export function stillTracks(opts: {
  w: number;
  h: number;
  codec: 'png' | 'mjpeg';
  container: 'mov' | 'avi';
  tracks?: number;
  pixFmt?: string;
}): Promise<string> {
  const { w, h, codec, container, tracks = 1, pixFmt } = opts;
  return cached(`bomb-${codec}-${container}`, container, opts, (out) =>
    withTemp(codec === 'png' ? 'png' : 'jpg', async (pic) => {
      await picture(w, h, codec, pic, pixFmt);
      const maps = Array.from({ length: tracks }, () => ['-map', '0']).flat();
      await run('ffmpeg', [...FFMPEG, '-r', '1', '-i', pic, ...maps, '-c', 'copy', out]);
    }),
  );
}

/** H.264 (MP4) or AV1 (Matroska), one frame of `w`x`h` really encoded. */
export function encodedFrame(codec: 'h264' | 'av1', w: number, h: number): Promise<string> {
  const ext = codec === 'h264' ? 'mp4' : 'mkv';
  const encoder = codec === 'h264' ? ['libx264', '-preset', 'ultrafast'] : ['libsvtav1', '-preset', '12'];
  return cached(`bomb-${codec}`, ext, { w, h }, (out) =>
    run('ffmpeg', [
      ...FFMPEG,
      ...['-f', 'lavfi', '-i', `color=c=0x3060c0:s=${w}x${h}:r=25:d=0.04`],
      ...['-frames:v', '1', '-c:v', ...encoder],
      out,
    ]),
  );
}

/**
 * A 64x48 VP9 key frame in IVF whose headers then declare `w`x`h` (the IVF header and the frame's
 * uncompressed header, profile 0: the frame size follows the frame marker, profile, flags, sync
 * code and 4 bits of colour config, bit 36). A decoder that believes it allocates the whole frame.
 */
export function vp9DeclaredSize(w: number, h: number): Promise<string> {
  return cached('bomb-vp9-declared', 'ivf', { w, h }, async (out) => {
    await run('ffmpeg', [
      ...FFMPEG,
      ...['-f', 'lavfi', '-i', 'testsrc2=s=64x48:r=25:d=0.04'],
      ...['-frames:v', '1', '-c:v', 'libvpx-vp9', '-deadline', 'realtime', out],
    ]);
    const bytes = await readFile(out);
    bytes.writeUInt16LE(Math.min(w, 0xffff), 12);
    bytes.writeUInt16LE(Math.min(h, 0xffff), 14);
    const frame = 32 + 12;
    writeBits(bytes, frame * 8 + 36, 16, w - 1);
    writeBits(bytes, frame * 8 + 52, 16, h - 1);
    await writeFile(out, bytes);
  });
}

function writeBits(bytes: Buffer, at: number, count: number, value: number): void {
  for (let i = 0; i < count; i++) {
    const bit = (value >> (count - 1 - i)) & 1;
    const pos = at + i;
    const index = pos >> 3;
    const mask = 0x80 >> (pos & 7);
    bytes[index] = bit ? (bytes[index] as number) | mask : (bytes[index] as number) & ~mask;
  }
}

/**
 * One video track whose first `small` frames are 64x64 and whose next `big` frames are `w`x`h`
 * of 16-bit RGBA (PNG in MOV, 1 fps): the probe decodes a small picture, the render the big ones.
 * Under a small worker memory limit, memory runs out in the middle of the render.
 */
export function growingPictures(opts: { w: number; h: number; small: number; big: number }): Promise<string> {
  const { w, h, small, big } = opts;
  return cached('bomb-growing', 'mov', opts, async (out) => {
    const dir = await mkdtemp(join(tmpdir(), 'vs-growing-'));
    try {
      const frame = (i: number) => join(dir, `f${String(i).padStart(4, '0')}.png`);
      await picture(64, 64, 'png', frame(1));
      await picture(w, h, 'png', frame(small + 1), 'rgba64be');
      for (let i = 2; i <= small; i++) await copyFile(frame(1), frame(i));
      for (let i = small + 2; i <= small + big; i++) await copyFile(frame(small + 1), frame(i));
      await run('ffmpeg', [
        ...FFMPEG,
        '-r',
        '1',
        '-f',
        'image2',
        '-i',
        join(dir, 'f%04d.png'),
        '-c',
        'copy',
        out,
      ]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
}

/**
 * A transport stream whose streams pass `max_streams` only after the probe has looked (the review's
 * "late" streams): 6 s of one 320x240 program, then a second program of `streams` 64x64 H.264
 * streams, its tables first seen there.
 */
export function lateStreams(streams: number): Promise<string> {
  return cached('bomb-late-streams', 'ts', { streams }, (out) =>
    withTemp('ts', (first) =>
      withTemp('ts', async (second) => {
        await run('ffmpeg', [
          ...FFMPEG,
          ...['-f', 'lavfi', '-i', 'testsrc2=s=320x240:r=25:d=6', '-c:v', 'libx264', '-preset', 'ultrafast'],
          ...['-f', 'mpegts', first],
        ]);
        const maps = Array.from({ length: streams }, () => ['-map', '0:v']).flat();
        await run('ffmpeg', [
          ...FFMPEG,
          ...[
            '-f',
            'lavfi',
            '-i',
            'testsrc=s=64x64:r=5:d=2',
            ...maps,
            '-c:v',
            'libx264',
            '-preset',
            'ultrafast',
          ],
          ...['-mpegts_start_pid', '0x400', '-mpegts_pmt_start_pid', '0x1400', '-mpegts_service_id', '9'],
          ...['-f', 'mpegts', second],
        ]);
        await writeFile(out, Buffer.concat([await readFile(first), await readFile(second)]));
      }),
    ),
  );
}

/** What FFmpeg's mov demuxer allocates and inflates for {@link compressedMovieHeader}: just under 2 GiB. */
export const CMOV_DECLARED = 0x7ff00000;

/**
 * The review's `cmov` bomb (DESIGN §5a): a MOV whose `moov` holds only a compressed movie header
 * (`cmov` > `dcom` 'zlib' + `cmvd`) declaring {@link CMOV_DECLARED} bytes, about 2 MB of zlib.
 * `readable`: the `moov` of a real 3 s clip, then a `free` box of zeros up to the declared size
 * (FFmpeg reads the clip); `empty`: zeros only (unreadable, after the whole inflate). Built in
 * process with node's zlib (a few seconds once, then cached).
 */
export function compressedMovieHeader(kind: 'readable' | 'empty'): Promise<string> {
  return cached(`bomb-cmov-${kind}`, 'mov', { declared: CMOV_DECLARED }, async (out) => {
    const top = kind === 'readable' ? topLevelBoxes(await readFile(await plainClip(3))) : emptyMovie();
    const moov = top.find((b) => b.type === 'moov')?.bytes ?? Buffer.alloc(0);
    const zlib = await deflatedZeros(moov, CMOV_DECLARED);
    const dcom = Buffer.concat([u32(12), Buffer.from('dcomzlib', 'latin1')]);
    const cmvd = Buffer.concat([
      u32(12 + zlib.length),
      Buffer.from('cmvd', 'latin1'),
      u32(CMOV_DECLARED),
      zlib,
    ]);
    const cmov = Buffer.concat([
      u32(8 + dcom.length + cmvd.length),
      Buffer.from('cmov', 'latin1'),
      dcom,
      cmvd,
    ]);
    const wrapped = Buffer.concat([u32(8 + cmov.length), Buffer.from('moov', 'latin1'), cmov]);
    await writeFile(out, Buffer.concat(top.map((b) => (b.type === 'moov' ? wrapped : b.bytes))));
  });
}

/** The same 3 s clip remuxed into a QuickTime MOV (an ordinary MOV a server must still open). */
export function plainMov(): Promise<string> {
  return cached('plain-mov', 'mov', { seconds: 3 }, async (out) =>
    run('ffmpeg', [...FFMPEG, '-i', await plainClip(3), '-c', 'copy', '-f', 'mov', out]),
  );
}

function u32(value: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(value);
  return b;
}

/** A file's top-level boxes (32-bit sizes, as ffmpeg writes a short clip). */
function topLevelBoxes(file: Buffer): Array<{ type: string; bytes: Buffer }> {
  const boxes: Array<{ type: string; bytes: Buffer }> = [];
  for (let i = 0; i + 8 <= file.length; ) {
    const size = file.readUInt32BE(i);
    if (size < 8) throw new Error(`unexpected box size ${size} at ${i}`);
    boxes.push({ type: file.toString('latin1', i + 4, i + 8), bytes: file.subarray(i, i + size) });
    i += size;
  }
  return boxes;
}

function emptyMovie(): Array<{ type: string; bytes: Buffer }> {
  const ftyp = Buffer.concat([
    u32(20),
    Buffer.from('ftypqt  ', 'latin1'),
    u32(0),
    Buffer.from('qt  ', 'latin1'),
  ]);
  return [
    { type: 'ftyp', bytes: ftyp },
    { type: 'moov', bytes: Buffer.alloc(0) },
  ];
}

/** zlib of `head`, then a `free` box of zeros up to `total` bytes in all. */
async function deflatedZeros(head: Buffer, total: number): Promise<Buffer> {
  const pad = total - head.length;
  const zeros = Buffer.alloc(16 * 1024 * 1024);
  async function* plain() {
    yield head;
    yield Buffer.concat([u32(pad), Buffer.from('free', 'latin1')]);
    for (let left = pad - 8; left > 0; left -= zeros.length)
      yield zeros.subarray(0, Math.min(left, zeros.length));
  }
  const chunks: Buffer[] = [];
  await pipeline(plain, createDeflate({ level: 9, memLevel: 9 }), async (deflated: AsyncIterable<Buffer>) => {
    for await (const chunk of deflated) chunks.push(chunk);
  });
  return Buffer.concat(chunks);
}
