/**
 * The fallback's MPEG-2 picture reader (src/engine/ffmpeg/mpeg2.ts over leading-bytes.ts): which
 * MP4 samples hold one field picture, and which, against FFmpeg's own bitstream tracer
 * (`trace_headers`) on the same packets; and that a field-coded stream lists one frame per field
 * pair. The native engine's reader (video/fields.rs) has its own unit tests.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { type SliceInfo, secondFields } from '../../src/engine/ffmpeg/h264.js';
import { mapPackets } from '../../src/engine/ffmpeg/leading-bytes.js';
import { readLoneField } from '../../src/engine/ffmpeg/mpeg2.js';
import { listAllPackets } from '../../src/engine/ffmpeg/packets.js';
import { probeFile, videoDetails } from '../../src/engine/ffmpeg/probe.js';
import { cached, FIELD_MP4, fieldPicturesMp4, run, withTemp } from '../helpers/fixtures.js';

const execFileP = promisify(execFile);
const FFMPEG = ['-hide_banner', '-loglevel', 'error', '-nostdin', '-y'];

/** The field MP4's fields joined by FFmpeg's MPEG-2 parser (via a TS) into one sample per frame. */
const joinedFieldsMp4 = () =>
  cached('field-pictures-joined', 'mp4', { v: 1 }, async (out) => {
    const fields = await fieldPicturesMp4();
    await withTemp('ts', async (ts) => {
      await run('ffmpeg', [...FFMPEG, '-i', fields, '-map', '0:v', '-c', 'copy', ts]);
      await run('ffmpeg', [...FFMPEG, '-i', ts, '-map', '0:v', '-c', 'copy', out]);
    });
  });

/** Interlaced MPEG-2 coded as frame pictures (field DCT and motion), the common kind. */
const framePicturesMp4 = () =>
  cached('mpeg2-frame-pictures', 'mp4', { v: 1 }, (out) =>
    run('ffmpeg', [
      ...[...FFMPEG, '-f', 'lavfi', '-i', 'testsrc2=s=352x288:r=25:d=3'],
      ...['-c:v', 'mpeg2video', '-flags', '+ildct+ilme', '-top', '1', '-g', '12', '-bf', '2', out],
    ]),
  );

/** FFmpeg's reading of each packet: its pictures' temporal_reference and picture_structure. */
async function traced(path: string): Promise<Array<Array<{ temporal: number; structure: number }>>> {
  const { stderr } = await execFileP(
    'ffmpeg',
    [
      ...['-hide_banner', '-nostats', '-loglevel', 'trace', '-i', path, '-map', '0:v', '-c', 'copy'],
      ...['-bsf:v', 'trace_headers', '-f', 'null', '-'],
    ],
    { maxBuffer: 1 << 28 },
  );
  const packets: Array<Array<{ temporal: number; structure: number }>> = [];
  const value = (line: string) => Number(/= (\d+)$/.exec(line)?.[1]);
  for (const line of stderr.split('\n')) {
    if (!line.includes('[trace_headers')) continue;
    if (/\] Packet: /.test(line)) packets.push([]);
    else if (/\btemporal_reference\b/.test(line))
      packets.at(-1)?.push({ temporal: value(line), structure: 3 });
    else if (/\bpicture_structure\b/.test(line)) {
      const picture = packets.at(-1)?.at(-1);
      if (picture) picture.structure = value(line);
    }
  }
  return packets;
}

/** The reader's view of each packet, in decode order (positions from ffprobe's listing). */
async function read(path: string): Promise<Array<SliceInfo | null>> {
  const { stdout } = await execFileP('ffprobe', [
    ...['-v', 'error', '-select_streams', '0', '-show_entries', 'packet=pos,size', '-of', 'csv=p=0', path],
  ]);
  const at = stdout
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [size, pos] = line.split(',').map(Number) as [number, number];
      return { pos, size };
    });
  return mapPackets(path, 'sample', at, (r) => r && readLoneField(r));
}

describe('MPEG-2 pictures read in place from MP4 samples', () => {
  it.each([
    ['each field its own sample', fieldPicturesMp4, true],
    ['both fields in one sample', joinedFieldsMp4, false],
    ['frame pictures', framePicturesMp4, false],
  ])(
    '%s: every sample as trace_headers reads it, second fields told',
    async (_, make, lone) => {
      const path = await make();
      const mine = await read(path);
      const theirs = (await traced(path)).map((pictures): SliceInfo | null => {
        const [first] = pictures;
        if (!first) return null;
        if (pictures.length !== 1 || ![1, 2].includes(first.structure)) return null;
        return { idr: false, frameNum: first.temporal, field: first.structure === 1 ? 'top' : 'bottom' };
      });
      expect(mine.length).toBeGreaterThan(50);
      expect(mine).toEqual(theirs);
      // The field fixture is pairs in decode order, first field then second; no frame is a field.
      expect(secondFields(mine)).toEqual(mine.map((_, i) => lone && i % 2 === 1));
    },
    120_000,
  );

  it('a field-coded MP4 lists each field pair once, at its first field time', async () => {
    const path = await fieldPicturesMp4();
    const d = videoDetails(await probeFile(path), 0);
    const packets = await listAllPackets(path, d);
    // ffprobe's samples in decode order are first field, second field, ...: the frames are the
    // first fields' times (the last GOP's P frame is stamped 6.0 s, after its one B frame).
    const { stdout } = await execFileP('ffprobe', [
      ...['-v', 'error', '-select_streams', '0', '-show_entries', 'packet=pts', '-of', 'csv=p=0', path],
    ]);
    const samples = stdout.split('\n').filter(Boolean).map(BigInt);
    expect(samples).toHaveLength(2 * FIELD_MP4.seconds * FIELD_MP4.fps);
    const firsts = samples.filter((_, i) => i % 2 === 0).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    expect(packets.pts).toEqual(firsts);
  });
});
