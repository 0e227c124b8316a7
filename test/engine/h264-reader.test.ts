/**
 * The fallback's H.264 reader (src/engine/ffmpeg/h264.ts over leading-bytes.ts): each packet's
 * first slice header, read in place from MP4 samples, Matroska blocks (header stripping too),
 * MPEG-TS PES packets and MPEG program streams, against FFmpeg's own
 * bitstream tracer (`trace_headers`) on the same packets; which packets are second fields; and the
 * log rule that lets an IDR entry ignore the frame-number gaps of the GOP a seek landed in.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { troubleWatch } from '../../src/engine/ffmpeg/decode-log.js';
import { type SliceInfo, secondFields, sliceInfo } from '../../src/engine/ffmpeg/h264.js';
import { blockHeader, mapFirstSlices, programAccessUnit } from '../../src/engine/ffmpeg/leading-bytes.js';
import type { VideoDetails } from '../../src/engine/ffmpeg/media.js';
import { probeFile, videoDetails } from '../../src/engine/ffmpeg/probe.js';
import { indexClip, paffMkv, paffMkvStripped, paffMp4, paffPs, paffTs } from '../helpers/fixtures.js';

const execFileP = promisify(execFile);

/**
 * FFmpeg's reading of each packet's first slice header, in decode order, and of the first
 * sequence parameter set's `max_num_ref_frames` (the extradata's, traced first when there is one).
 */
async function traced(path: string): Promise<{ slices: SliceInfo[]; maxNumRefFrames: number | null }> {
  const { stderr } = await execFileP(
    'ffmpeg',
    [
      ...['-hide_banner', '-nostats', '-loglevel', 'trace', '-i', path, '-map', '0:v', '-c', 'copy'],
      ...['-bsf:v', 'trace_headers', '-f', 'null', '-'],
    ],
    { maxBuffer: 1 << 28 },
  );
  const out: SliceInfo[] = [];
  let maxNumRefFrames: number | null = null;
  let current: Partial<SliceInfo & { read: boolean; inSlice: boolean }> | null = null;
  const value = (line: string) => Number(/= (\d+)$/.exec(line)?.[1]);
  for (const line of stderr.split('\n')) {
    if (!line.startsWith('[trace_headers')) continue;
    if (maxNumRefFrames === null && / max_num_ref_frames /.test(line)) maxNumRefFrames = value(line);
    if (line.includes('] Packet: ')) {
      current = {};
      continue;
    }
    if (!current || current.read) continue;
    if (line.endsWith('] Slice Header')) current.inSlice = true;
    else if (!current.inSlice) continue;
    else if (/ nal_unit_type /.test(line)) current.idr = value(line) === 5;
    else if (/ frame_num /.test(line)) {
      current.frameNum = value(line);
      current.field = null;
    } else if (/ field_pic_flag /.test(line)) current.field = value(line) ? 'top' : null;
    else if (/ bottom_field_flag /.test(line)) current.field = value(line) ? 'bottom' : 'top';
    else if (/ (idr_pic_id|pic_order_cnt_lsb) /.test(line)) {
      current.read = true;
      out.push({
        idr: current.idr as boolean,
        frameNum: current.frameNum as number,
        field: current.field ?? null,
      });
    }
  }
  return { slices: out, maxNumRefFrames };
}

/** Each packet's position and size, in decode order, as ffprobe lists them. */
async function listPackets(path: string): Promise<Array<{ pos: number; size: number }>> {
  const { stdout } = await execFileP('ffprobe', [
    ...['-v', 'error', '-select_streams', '0', '-show_entries', 'packet=pos,size', '-of', 'csv=p=0', path],
  ]);
  return stdout
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [size, pos] = line.split(',').map(Number) as [number, number];
      return { pos, size };
    });
}

/** This reader's view of each packet, in decode order (positions from ffprobe's listing). */
async function read(path: string, d: VideoDetails): Promise<Array<SliceInfo | null>> {
  const h = d.h264;
  const sps = h?.sps;
  if (!h || !sps) throw new Error('no H.264 SPS read from the extradata');
  const at = await listPackets(path);
  return mapFirstSlices(path, h.layout, h.lengthSize, at, (nal) => nal && sliceInfo(nal, sps));
}

describe('H.264 slice headers read in place', () => {
  const subjects: Array<[string, () => Promise<string>, boolean]> = [
    ['PAFF MP4', paffMp4, true],
    ['PAFF TS', paffTs, true],
    ['PAFF MKV', paffMkv, true],
    // Each field starts mid-PES packet, after the previous one's tail, and spans many.
    ['PAFF PS', paffPs, true],
    // Each block lacks the 8 bytes its track header stores.
    ['PAFF MKV with header stripping', paffMkvStripped, true],
    ['progressive MP4', () => indexClip({ seconds: 4, gop: 25 }), false],
    ['progressive TS', () => indexClip({ seconds: 12, container: 'ts', startOffsetSeconds: 19207 }), false],
  ];
  it.each(subjects)(
    "%s: every packet as trace_headers reads it, second fields told, the SPS's reference frames",
    async (_, make, paff) => {
      const path = await make();
      const d = videoDetails(await probeFile(path), 0);
      const mine = await read(path, d);
      const theirs = await traced(path);
      expect(mine.length).toBeGreaterThan(50);
      expect(mine).toEqual(theirs.slices);
      expect(d.h264?.sps?.maxNumRefFrames).toBe(theirs.maxNumRefFrames);
      expect(theirs.maxNumRefFrames).not.toBeNull();
      expect(d.h264?.sps?.frameMbsOnly).toBe(!paff);
      // The PAFF fixtures are pairs in decode order, first field then second; no frame is a field.
      expect(secondFields(mine)).toEqual(mine.map((_, i) => paff && i % 2 === 1));
    },
    120_000,
  );

  it('a Matroska block header is skipped; a laced block is not read', () => {
    // Track 1 (one-byte number), timecode 0x0014, flags: keyframe.
    expect(blockHeader(Buffer.from([0x81, 0x00, 0x14, 0x80, 0, 0, 0, 2]))).toBe(4);
    // Track 200 (two-byte number 0x40c8), flags 0.
    expect(blockHeader(Buffer.from([0x40, 0xc8, 0x00, 0x00, 0x00, 0, 0, 0]))).toBe(5);
    // Xiph, fixed-size and EBML lacing: several frames, each sized in the block.
    for (const lacing of [0x02, 0x04, 0x06])
      expect(blockHeader(Buffer.from([0x81, 0, 0, lacing, 0]))).toBeNull();
    expect(blockHeader(Buffer.from([0x00, 0x81]))).toBeNull();
    expect(blockHeader(Buffer.from([0x81, 0x00]))).toBeNull();
  });

  it('a program stream access unit is read only where it alone starts in its PES packet', () => {
    const unit = (...bytes: number[]) => Buffer.from([0, 0, 1, ...bytes]);
    // An MPEG-2 PES packet of video stream 0xe0 (flags, a 5-byte PTS), and an MPEG-2 pack header.
    const pes = (...payload: Buffer[]) => {
      const data = Buffer.concat([Buffer.from([0x80, 0x80, 5, 0x21, 0, 1, 0, 1]), ...payload]);
      const head = Buffer.from([0, 0, 1, 0xe0, 0, 0]);
      head.writeUInt16BE(data.length, 4);
      return Buffer.concat([head, data]);
    };
    const pack = Buffer.from([0, 0, 1, 0xba, 0x44, 0, 4, 0, 4, 1, 1, 0x89, 0xc3, 0xf8]);
    const tail = Buffer.from([0x12, 0x34, 0x56]); // the previous unit's last bytes
    const aud = unit(0x09, 0x50);
    const sps = unit(0x67, 0x4d, 0x00, 0x1e);
    const firstSlice = unit(0x65, 0x88, 0x84); // first_mb_in_slice 0
    const nextSlice = unit(0x65, 0x44, 0x84); // first_mb_in_slice 1
    // The unit starts mid-payload; its slice is in the next PES packet, after a pack header.
    const spread = Buffer.concat([pes(tail, aud, sps), pack, pes(firstSlice, nextSlice)]);
    expect(programAccessUnit(spread)).toEqual(Buffer.concat([aud, sps, firstSlice, nextSlice]));
    // Two units start in the PES packet: which one is listed there cannot be told.
    expect(programAccessUnit(pes(aud, firstSlice, aud, firstSlice))).toBeNull();
    // Without delimiters, a new picture's first slice after the last one starts a unit.
    expect(programAccessUnit(pes(tail, nextSlice, firstSlice, nextSlice))).toEqual(
      Buffer.concat([firstSlice, nextSlice]),
    );
    expect(programAccessUnit(pes(tail, nextSlice, firstSlice, nextSlice, firstSlice))).toBeNull();
    // None starts in it (only the previous unit's tail), or it is cut short: nothing is read.
    expect(programAccessUnit(Buffer.concat([pes(tail), pes(aud, firstSlice)]))).toBeNull();
    expect(programAccessUnit(pes(tail, aud, firstSlice).subarray(0, 20))).toBeNull();
    // Not a video PES packet at the position.
    expect(programAccessUnit(Buffer.concat([pack, pes(aud, firstSlice)]))).toBeNull();
  });

  it('a long listing is read in turns: other work runs between its reads', async () => {
    const path = await paffTs();
    const d = videoDetails(await probeFile(path), 0);
    const h = d.h264;
    if (!h) throw new Error('no H.264 details');
    const packets = await listPackets(path);
    // 3000 reads of real packets, as an hour of broadcast would be many more.
    const at = Array.from({ length: 3000 }, (_, i) => packets[i % packets.length]);
    let read = 0;
    let seenAt: number | undefined;
    setImmediate(() => {
      seenAt = read;
    });
    const slices = await mapFirstSlices(path, h.layout, h.lengthSize, at, (nal) => {
      read++;
      return nal !== null;
    });
    expect(slices.every(Boolean)).toBe(true);
    // The event loop turned after the first batch, long before the last read.
    expect(seenAt).toBeGreaterThan(0);
    expect(seenAt).toBeLessThan(at.length / 2);
  });

  it('a field is second only after a first field of the other parity and the same frame_num', () => {
    const f = (frameNum: number, field: SliceInfo['field'], idr = false): SliceInfo => ({
      idr,
      frameNum,
      field,
    });
    expect(
      secondFields([
        f(0, 'top', true),
        f(0, 'bottom'), // pairs with the IDR top field
        f(1, 'top'),
        f(2, 'bottom'), // another frame_num: a lone field, then a first field
        f(2, 'top'), // pairs with it
        f(3, 'top'),
        f(3, 'top'), // same parity: a new first field
        null,
        f(4, 'bottom'), // nothing readable before it
        f(5, null),
        f(5, 'top'), // a frame never opens a pair
      ]),
    ).toEqual([false, true, false, false, true, false, false, false, false, false, false]);
  });
});

describe('an IDR entry ignores the gaps of the GOP a seek landed in', () => {
  const d = { index: 0, indexed: false, demuxer: 'mpegts' } as VideoDetails;
  const packet = (pts: number) =>
    `[info] demuxer -> ist_index:0 type:video next_dts:NOPTS pkt_pts:${pts} pkt_pts_time:1 pkt_dts:${pts} `;
  const gap = '[h264 @ 0x55] [debug] Frame num gap 11 6';
  const idr =
    '[h264 @ 0x56] [debug] slice:1 F mb:0 I fix IDR frame:0 poc:65536/65536 ref:0/0 qp:4 loop:1:0:0 weight:0 ';
  const p =
    '[h264 @ 0x55] [debug] slice:1 F mb:0 P fix frame:1 poc:65544/65544 ref:1/1 qp:6 loop:1:0:0 weight:0 ';
  const watch = (idrEntry: bigint | null, lines: string[]) => {
    const w = troubleWatch(d, new Set([3600n, 7200n]), idrEntry);
    for (const line of lines) w.line(line);
    return w.found().invented;
  };

  it('gaps before the first IDR slice after the first packet do not count; after it they do', () => {
    // The bisecting seek lands before the entry (3600); with frame threads the gaps are logged after it.
    const landed = [packet(0), packet(3600), gap, gap, idr, p];
    expect(watch(3600n, landed)).toBe(false);
    expect(watch(3600n, [...landed, gap])).toBe(true);
    // The stream probe's own decode logs an IDR slice before the run reads any packet: not the
    // entry, so the landed GOP's gaps after it still do not count, and the entry's IDR opens them.
    expect(watch(3600n, [idr, packet(0), gap, packet(3600)])).toBe(false);
    expect(watch(3600n, [idr, packet(0), gap, packet(3600), idr, gap])).toBe(true);
  });

  it('a seek that lands past the entry never reads it: its gaps count, whatever IDR comes next', () => {
    expect(watch(3600n, [packet(5000), gap, packet(7200), idr, p])).toBe(true);
  });

  it('without an IDR entry every gap counts', () => {
    expect(watch(null, [packet(0), packet(3600), gap, idr, p])).toBe(true);
  });
});
