/**
 * What the fallback engine learns before decoding: the packets it picks frames from, and which
 * frames are reference frames. Oracles are ffprobe's decoded frame list and picture types.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { ListedPackets } from '../../src/core/packet-log.js';
import { chooseVideoStream } from '../../src/core/probe.js';
import { pictureHints } from '../../src/engine/ffmpeg/nal.js';
import { listHintPackets } from '../../src/engine/ffmpeg/packet-log.js';
import { frameAt, listAllPackets, listPacketsNear, seconds } from '../../src/engine/ffmpeg/packets.js';
import { probeFile, videoDetails } from '../../src/engine/ffmpeg/probe.js';
import {
  COVER_ART,
  coverArtClip,
  falseSyncClip,
  indexClip,
  longHeaderMkv,
  paffMp4,
  TWO_VIDEO_STREAMS,
  truncatedMp4,
  twoVideoStreamsClip,
  undecodableClip,
  underDeclaredPs,
} from '../helpers/fixtures.js';
import { expectedIndex, frameTimes, packetExtent } from '../helpers/oracle.js';

/** Picture type (I, P, B) of each decoded frame, by pts. */
function pictureTypes(path: string): Map<bigint, string> {
  const out = execFileSync(
    'ffprobe',
    ['-v', 'error', '-select_streams', 'v:0', '-show_entries', 'frame=pts,pict_type', '-of', 'csv=p=0', path],
    { encoding: 'utf8' },
  );
  return new Map(
    out
      .trim()
      .split('\n')
      // A frame's side data (an SEI) adds a line of its own, without a pts.
      .filter((line) => /^-?\d+,/.test(line))
      .map((line) => line.split(','))
      .map(([pts, type]) => [BigInt(pts as string), type as string]),
  );
}

describe('probe facts', () => {
  it('reports every video stream: cover art flagged, frame counts, display sizes, disposition', async () => {
    const cover = (await probeFile(await coverArtClip())).info;
    expect(cover.videoStreams.map((v) => [v.index, v.attachedPic, v.width, v.height])).toEqual([
      [COVER_ART.cover.stream, true, COVER_ART.cover.width, COVER_ART.cover.height],
      [COVER_ART.video.stream, false, COVER_ART.video.width, COVER_ART.video.height],
    ]);
    const two = (await probeFile(await twoVideoStreamsClip())).info;
    const o = TWO_VIDEO_STREAMS;
    expect(two.videoStreams.map((v) => [v.index, v.isDefault, v.frames, v.decodes])).toEqual([
      [o.topShot.stream, true, o.topShot.frames, true],
      [o.video.stream, true, o.seconds * 25, true],
    ]);
    expect(two.hasAudio).toBe(true);
  });

  it.each(['zeroed-bitstream', 'unknown-codec'] as const)(
    '%s: a video stream whose frames never decode is reported as such, its audio is not',
    async (kind) => {
      const info = (await probeFile(await undecodableClip(kind))).info;
      expect(info.videoStreams.length).toBeGreaterThan(0);
      expect(info.videoStreams.every((v) => !v.decodes)).toBe(true);
      expect(info.hasAudio).toBe(true);
    },
  );

  // The oracle: ffprobe's whole packet list (pts + duration of every packet wholly in the file).
  it.each([
    ['an MP4 whose index lists 20 s, cut at 40 %', truncatedMp4],
    ['an MKV declaring 1331 s for 12 s', longHeaderMkv],
    ['an MPEG-PS declaring 0.16 s for 3 s', underDeclaredPs],
  ])('%s: readable ends within a frame of the packet list', async (_, make) => {
    const path = await make();
    const info = (await probeFile(path)).info;
    const video = info.videoStreams[0];
    expect(video).toBeDefined();
    const oracle = await packetExtent(path, [video?.index ?? 0]);
    expect(oracle.end).not.toBeNull();
    expect(Math.abs((video?.readableEnd ?? Number.NaN) - (oracle.end ?? 0))).toBeLessThanOrEqual(0.05);
    // The fixture lies: its declared duration is far from its content.
    expect(Math.abs((oracle.end ?? 0) - info.duration)).toBeGreaterThan(1);
    if (info.hasAudio) {
      // These fixtures carry their audio as stream 1, after the video.
      const audioOracle = await packetExtent(path, [1]);
      expect(Math.abs((info.audioEnd ?? Number.NaN) - (audioOracle.end ?? 0))).toBeLessThanOrEqual(0.05);
    }
  });
});

/** The render details of the clip's first video stream. */
async function details(path: string) {
  const probed = await probeFile(path);
  return videoDetails(probed, probed.info.videoStreams[0]?.index ?? -1);
}

describe('the reference reach', () => {
  it("reads an H.264 stream's reference frames from its SPS (avcC, Annex B) and reaches as the rule says", async () => {
    const { cases } = JSON.parse(
      readFileSync(new URL('../../fixtures/vectors/reference-reach.json', import.meta.url), 'utf8'),
    ) as { cases: Array<{ codec: string; spsRefs: number | null; delay: number; expect: number }> };
    // x264 asked for 1 reference frame writes 1 without B-frames; a B-pyramid makes it 4, delay 2.
    const clips = [
      { container: 'mp4', refs: 1, bframes: 0, delay: 0 },
      { container: 'ts', refs: 1, bframes: 0, delay: 0 },
      { container: 'mp4', refs: 4, bframes: 2, delay: 2 },
    ] as const;
    for (const { container, refs, bframes, delay } of clips) {
      const clip = await indexClip({ seconds: 2, gop: 25, bframes, refs, container });
      const d = videoDetails(await probeFile(clip), 0);
      expect(d.h264?.sps?.maxNumRefFrames).toBe(refs);
      expect(d.reorderDelay).toBe(delay);
      // The rule's case for these inputs, in frames of 1/25 s (the native engine's test,
      // crates/vidsheet-core/src/video/reach.rs, reads the same from a 1-reference clip).
      const rule = cases.find((c) => c.codec === 'h264' && c.spsRefs === refs && c.delay === delay);
      expect(rule).toBeDefined();
      expect(d.referenceReach * 25).toBeCloseTo(rule?.expect ?? Number.NaN, 9);
    }
  });
});

describe('reference hints from NAL headers', () => {
  // With one B-frame between references there is no B-pyramid: exactly the B-frames are
  // non-reference, in both encoders, which gives an oracle independent of the NAL reader.
  for (const codec of ['h264', 'hevc'] as const) {
    it(`${codec} in mp4: non-reference exactly where the picture type is B`, async () => {
      const clip = await indexClip({ seconds: 4, gop: 25, bframes: 1, codec });
      const d = await details(clip);
      expect(d.nal?.codec).toBe(codec);
      const packets = await listAllPackets(clip, d);
      const types = pictureTypes(clip);
      const hints = (await pictureHints(clip, d, packets, packets.pts)).map((h) => h.reference);
      expect(hints).toEqual(packets.pts.map((p) => types.get(p) !== 'B'));
      expect(hints.filter((h) => h === false).length).toBeGreaterThan(packets.pts.length / 3);
    });
  }

  it('tells a true random-access point from a sync sample in name only', async () => {
    // x264 with infinite keyint: only the first picture is an IDR; the scene cuts are non-IDR
    // I-frames the index (and a recovery point SEI) nevertheless call sync samples.
    const clip = await falseSyncClip();
    const d = await details(clip);
    const packets = await listAllPackets(clip, d);
    const types = pictureTypes(clip);
    expect(packets.keyframes.length).toBeGreaterThanOrEqual(10);
    expect(packets.keyframes.every((k) => types.get(k) === 'I')).toBe(true);
    const hints = await pictureHints(clip, d, packets, packets.keyframes);
    expect(hints.map((h) => h.randomAccess)).toEqual(packets.keyframes.map((_, i) => i === 0));
  });

  it('gives no hint where the container or scan type does not allow one', async () => {
    const clip = await indexClip({ seconds: 2, container: 'mkv' });
    const d = await details(clip);
    const packets = await listAllPackets(clip, d);
    expect(d.nal).toBeNull();
    const hints = await pictureHints(clip, d, packets, packets.pts);
    expect(new Set(hints.map((h) => h.reference))).toEqual(new Set([undefined]));
  });
});

describe("the zoom hints' light listing", () => {
  // It must give the hints exactly what the frame rule's whole listing gives them (its cheaper
  // parse is one difference; the other, keyframes as the sample table flags them, not FFmpeg's
  // parser, shows only on files like test/engine/hint-keyframes.test.ts's), and every packet
  // ffprobe counts.
  const cases: Array<[string, () => Promise<string>]> = [
    ['h264 with B-frames', () => indexClip({ seconds: 6, gop: 25, bframes: 3 })],
    ['hevc with B-frames', () => indexClip({ seconds: 4, gop: 25, bframes: 1, codec: 'hevc' })],
    ['an MP4 cut short', () => truncatedMp4()],
    ['sync samples in name only', () => falseSyncClip()],
    ['cover art beside the video', () => coverArtClip()],
  ];
  for (const [name, make] of cases) {
    it(`equals the whole listing's log: ${name}`, async () => {
      const clip = await make();
      // The stream the engines render (core/probe.ts), not the cover art.
      const probed = await probeFile(clip);
      const d = videoDetails(probed, chooseVideoStream(probed.info.videoStreams)?.index ?? -1);
      const light = await listHintPackets(clip, d);
      expect(light).toEqual((await listAllPackets(clip, d)).log);
      const count = execFileSync(
        'ffprobe',
        [
          '-v',
          'error',
          '-select_streams',
          String(d.index),
          '-count_packets',
          '-show_entries',
          'stream=nb_read_packets',
          '-of',
          'csv=p=0',
          clip,
        ],
        { encoding: 'utf8' },
      );
      expect(light.times.length).toBe(Number(count.trim()));
      expect(light.keys.reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
    });
  }
});

describe("the zoom hints' listing of a window's part (RenderPlan hintPackets)", () => {
  it("holds exactly the whole listing's packets within the span, and little else", async () => {
    const clip = await indexClip({ seconds: 200, fps: 10, gop: 25, bframes: 3, width: 160, height: 120 });
    const d = await details(clip);
    const whole = await listHintPackets(clip, d);
    const part = await listHintPackets(clip, d, undefined, { fromMs: 70_000, toMs: 130_000 });
    const within = (l: ListedPackets) =>
      [...l.times].flatMap((t, i) => (t >= 70 && t <= 130 ? [[t, l.sizes[i], l.keys[i]]] : []));
    expect(within(part).length).toBeGreaterThan(550);
    expect(within(part)).toEqual(within(whole));
    // From the keyframe before the span's start less 2 s (2.5 s GOPs) to 2 s past its end.
    expect(Math.min(...part.times)).toBeGreaterThanOrEqual(70 - 2 - 2.5 - 0.2);
    expect(Math.max(...part.times)).toBeLessThanOrEqual(130 + 2 + 0.5);
    // Listed without a hole, and closed where the listing stopped short of the stream's ends.
    expect([...part.spans]).toEqual([Math.min(...part.times), Math.max(...part.times)]);
    expect([...whole.spans]).toEqual([Number.NEGATIVE_INFINITY, Number.POSITIVE_INFINITY]);
  });

  it('is open at an end the span leaves to the clip', async () => {
    const clip = await indexClip({ seconds: 200, fps: 10, gop: 25, bframes: 3, width: 160, height: 120 });
    const d = await details(clip);
    const part = await listHintPackets(clip, d, undefined, { toMs: 60_000 });
    expect(part.spans[0]).toBe(Number.NEGATIVE_INFINITY);
    expect(part.spans[1]).toBe(Math.max(...part.times));
    expect(part.times[0]).toBe(Math.min(...(await listHintPackets(clip, d)).times));
  });
});

describe('listing packets near the targets', () => {
  it('picks the frame the decoder displays at every target, as a whole-file listing does', async () => {
    const clip = await indexClip({ seconds: 40, gop: 37, bframes: 3 });
    const d = await details(clip);
    const oracle = await frameTimes(clip);
    const keyTimes = (await listAllPackets(clip, d)).keyframes.map((k) => seconds(k, d) - d.startTime);
    // The start, both sides of keyframes (the dts/pts shift of B-frames), lone and close
    // targets, the last frame's display interval and the end.
    const times = [0, 1, 999, 1000, 1040, 7_000, 7_010, 7_900, 25_000, 39_959, 39_999];
    for (const k of keyTimes.slice(1, 4)) times.push(Math.round(k * 1000) - 1, Math.round(k * 1000));
    const near = await listPacketsNear(clip, d, times);
    expect(near).not.toBeNull();
    const all = await listAllPackets(clip, d);
    expect(near?.pts.length).toBeLessThan(all.pts.length);
    for (const t of times) {
      const picked = near?.pts[frameAt(near.pts, d, t)];
      expect(picked, `t=${t} ms`).toBe(all.pts[frameAt(all.pts, d, t)]);
      expect(picked, `t=${t} ms`).toBe(oracle.pts[expectedIndex(oracle, t / 1000)]);
    }
  });

  it('a field pair cut by the end of a read interval is told as in a whole listing, whichever ffprobe run reads it (PAFF MP4)', async () => {
    const clip = await paffMp4();
    const d = await details(clip);
    const oracle = await frameTimes(clip);
    // Packet times (ms) in decode order. An anchor picture (I or P) is decoded before the B
    // pictures shown before it: no packet before its first field is shown after it, so a read
    // interval ending 10 ms after that field ends at its second field (ffprobe stops at the
    // first packet timed at or past an interval's end).
    const decodeOrder = execFileSync(
      'ffprobe',
      ['-v', 'error', '-select_streams', '0', '-show_entries', 'packet=pts_time', '-of', 'csv=p=0', clip],
      { encoding: 'utf8' },
    )
      .trim()
      .split('\n')
      .map((l) => Math.round(Number(l) * 1000));
    const anchors = decodeOrder.filter((t, i) => i % 2 === 0 && decodeOrder.slice(0, i).every((u) => u < t));
    // Spans 1.5 s apart or more (closer ones are read as one interval), each ending 10 ms after an anchor.
    const ends: number[] = [];
    for (const a of anchors) if (a >= 600 && a - (ends.at(-1) ?? -2000) >= 1600) ends.push(a + 10);
    const times = ends.map((e) => e - 500);
    expect(times.length).toBeGreaterThanOrEqual(3);
    for (const e of ends) {
      const listed = execFileSync(
        'ffprobe',
        [
          ...['-v', 'error', '-select_streams', '0', '-read_intervals', `${(e - 500) / 1000}%${e / 1000}`],
          ...['-show_entries', 'packet=pts_time', '-of', 'csv=p=0', clip],
        ],
        { encoding: 'utf8' },
      )
        .trim()
        .split('\n')
        .map((l) => Math.round(Number(l) * 1000));
      // The interval's last packet is the anchor's first field; its second field is not listed.
      expect(listed.at(-1)).toBe(e - 10);
      expect(listed).not.toContain(e + 10);
    }
    // Every interval in one ffprobe run, and each in a run of its own (every interval's end a
    // run's end): the same frames, each one the decoder shows, and each target's frame the one
    // a sequential decode shows there.
    const together = await listPacketsNear(clip, d, times);
    const apart = await listPacketsNear(clip, d, times, undefined, 1);
    expect(together).not.toBeNull();
    expect(apart?.pts).toEqual(together?.pts);
    const shown = new Set(oracle.pts);
    expect((apart?.pts ?? []).filter((p) => !shown.has(p))).toEqual([]);
    for (const t of [...times, ...ends.map((e) => e - 10)]) {
      const picked = apart?.pts[frameAt(apart.pts, d, t)];
      expect(picked, `t=${t} ms`).toBe(oracle.pts[expectedIndex(oracle, t / 1000)]);
    }
  });

  it('declines when the packet runs cannot prove coverage (Matroska has no exact durations)', async () => {
    const clip = await indexClip({ seconds: 12, fps: '30000/1001', container: 'mkv' });
    const d = await details(clip);
    expect(await listPacketsNear(clip, d, [1000, 5000])).toBeNull();
  });
});
