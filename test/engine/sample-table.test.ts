/**
 * The fallback reads an MP4/MOV sample table itself for the zoom hints (src/engine/ffmpeg/
 * sample-table.ts) instead of listing the packets with ffprobe, which reads every packet's bytes.
 * Judged against ffprobe's listing of the same stream (FFmpeg's index, with the native engine's
 * rule for samples whose bytes lie past the end of the file) on the edit lists FFmpeg's muxer and
 * `-c copy` write, and against the native engine's log of a render: the two engines' packets
 * must be the same, packet for packet. Tables it does not model are declined, and the render's
 * listing is then ffprobe's.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { ListedPackets } from '../../src/core/packet-log.js';
import { listHintPackets } from '../../src/engine/ffmpeg/packet-log.js';
import { sampleTablePackets } from '../../src/engine/ffmpeg/sample-table.js';
import { ffmpegEngine } from '../../src/engine/ffmpeg.js';
import { ENGINES } from '../helpers/cli.js';
import {
  BITEXACT,
  cached,
  coverArtClip,
  editListMp4,
  FFMPEG,
  run,
  TRIMMED_EDIT_MP4,
  trimmedEditMp4,
  truncatedMp4,
} from '../helpers/fixtures.js';
import { details, ffprobeListing, nativeEngine, overviewLog, packetsOf } from '../helpers/packet-logs.js';

const work = mkdtempSync(join(tmpdir(), 'vs-sample-table-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const SOURCE = ['-f', 'lavfi', '-i', 'testsrc2=size=160x120:rate=25:duration=12'];
const X264 = ['-c:v', 'libx264', '-g', '50', '-pix_fmt', 'yuv420p'];

/** A clip made by ffmpeg from `args` (inputs first, then output options). */
const made = (name: string, ext: string, args: string[]) =>
  cached(`sample-table-${name}`, ext, args, (out) => run('ffmpeg', [...FFMPEG, ...args, ...BITEXACT, out]));

/** The B-frame clip the `-c copy` variants are cut from. */
const bframes = () => made('bframes', 'mp4', [...SOURCE, ...X264, '-bf', '3']);
/** A copy of the B-frame clip with `options` (an edit list FFmpeg's muxer writes for them). */
const copied = (name: string, before: string[], after: string[]) =>
  bframes().then((src) => made(name, 'mp4', [...before, '-i', src, '-c', 'copy', ...after]));

/** Clips whose tables the reading models, each with what its edit list is there for. */
const READ: Array<[string, () => Promise<string>]> = [
  ['B-frames: one edit from the first frame shown (composition offsets)', bframes],
  [
    'no B-frames: one edit from 0, no composition offsets',
    () => made('nobf', 'mp4', [...SOURCE, ...X264, '-bf', '0']),
  ],
  ['cut inside a GOP (-ss with -c copy): samples before the edit', () => copied('cut', ['-ss', '3.3'], [])],
  ['cut short (-t with -c copy): samples after the edit', () => copied('short', [], ['-t', '7.3'])],
  ['an empty edit first (-output_ts_offset)', () => copied('offset', [], ['-output_ts_offset', '1.5'])],
  ['MJPEG in MOV: every sample a keyframe', () => made('mjpeg', 'mov', [...SOURCE, '-c:v', 'mjpeg'])],
  ['HEVC presented for 2.27 s of 8.08 s (editListMp4)', editListMp4],
  ['cut off at 40 % of the file, moov first (truncatedMp4)', truncatedMp4],
  ['presented for 5 s of 12 s with 2 s GOPs: the index ends early (trimmedEditMp4)', trimmedEditMp4],
  ['a cover picture first: the stream numbers do not follow the tracks (coverArtClip)', coverArtClip],
];

const plain = (l: ListedPackets) => ({ times: [...l.times], sizes: [...l.sizes], keys: [...l.keys] });

describe("the fallback's reading of an MP4/MOV sample table for the hints", () => {
  for (const [name, make] of READ) {
    it(`lists what FFmpeg's index holds, whole and within a span: ${name}`, async () => {
      const clip = await make();
      const d = await details(clip);
      const whole = await sampleTablePackets(clip, d);
      expect(whole, 'declined').toBeDefined();
      if (!whole) return;
      expect(plain(whole)).toEqual(ffprobeListing(clip, d));
      expect(whole.times.length).toBeGreaterThan(40);
      expect([...whole.spans]).toEqual([Number.NEGATIVE_INFINITY, Number.POSITIVE_INFINITY]);
      const span = { fromMs: 1_000, toMs: 2_200 };
      const part = await sampleTablePackets(clip, d, span);
      expect(plain(part as ListedPackets)).toEqual(ffprobeListing(clip, d, span));
      expect([...(part as ListedPackets).spans]).toEqual([1, 2.2]);
    });
  }

  it('keeps the samples before a cut edit, before the first frame shown', async () => {
    // What the cut case rests on: the -ss cut keeps its GOP's pictures before 3.3 s in the file,
    // decoded and discarded, so they come before 0 on the labels' clock.
    const cut = await copied('cut', ['-ss', '3.3'], []);
    const log = (await sampleTablePackets(cut, await details(cut))) as ListedPackets;
    expect(Math.min(...log.times)).toBeLessThan(-0.5);
    expect(log.keys[0]).toBe(1);
  });

  it("ends where FFmpeg's index ends: after the second keyframe reaching the edit's end", async () => {
    const clip = await trimmedEditMp4();
    const log = (await sampleTablePackets(clip, await details(clip))) as ListedPackets;
    const keyframes = [...log.times].filter((_, i) => log.keys[i] === 1);
    const { presented, gop, seconds } = TRIMMED_EDIT_MP4;
    // Keyframes every 2 s; those at 6 s and 8 s reach the edit's end (5 s), the second ends it.
    const last = Math.ceil(presented / gop) * gop + gop;
    expect(keyframes.length).toBe(last / gop + 1);
    expect(Math.abs((keyframes.at(-1) as number) - last)).toBeLessThan(0.2);
    expect(log.keys.at(-1)).toBe(1);
    expect(log.times.length).toBeLessThan(seconds * 25 * 0.75);
  });

  it('declines the tables it does not model, and the render lists them with ffprobe', async () => {
    const fragmented = await made('fragmented', 'mp4', [
      ...SOURCE,
      ...X264,
      ...['-movflags', 'frag_keyframe+empty_moov'],
    ]);
    const negative = await made('negative-offsets', 'mp4', [
      ...SOURCE,
      ...X264,
      ...['-bf', '3', '-movflags', 'negative_cts_offsets'],
    ]);
    for (const clip of [fragmented, negative]) {
      const d = await details(clip);
      expect(await sampleTablePackets(clip, d)).toBeUndefined();
      const log = await overviewLog(ffmpegEngine, clip, work);
      expect(plain(log)).toEqual(plain(await listHintPackets(clip, d)));
      expect(log.times.length).toBe(300);
    }
  });
});

describe.runIf(ENGINES.includes('native') && ENGINES.includes('ffmpeg'))(
  "both engines' packets for the hints",
  () => {
    for (const [name, make] of READ) {
      // A window's span: test/engine/hint-keyframes.test.ts (these clips are shorter than the margin).
      it(`are the same: ${name}`, async () => {
        const clip = await make();
        const fallback = await overviewLog(ffmpegEngine, clip, work);
        expect(fallback.times.length).toBeGreaterThan(40);
        expect(packetsOf(fallback)).toEqual(packetsOf(await overviewLog(nativeEngine(), clip, work)));
      }, 60_000);
    }
  },
);
