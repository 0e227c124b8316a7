/**
 * What the fallback engine learns before decoding: the packets it picks frames from, and which
 * frames are reference frames. Oracles are ffprobe's decoded frame list and picture types.
 */
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import {
  frameAt,
  listAllPackets,
  listPacketsNear,
  probeDetails,
  referenceHints,
  seconds,
} from '../../src/engine/ffprobe.js';
import { expectedIndex, frameTimes, indexClip } from '../helpers/fixtures.js';

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
      .map((line) => line.split(','))
      .map(([pts, type]) => [BigInt(pts as string), type as string]),
  );
}

describe('reference hints from NAL headers', () => {
  // With one B-frame between references there is no B-pyramid: exactly the B-frames are
  // non-reference, in both encoders, which gives an oracle independent of the NAL reader.
  for (const codec of ['h264', 'hevc'] as const) {
    it(`${codec} in mp4: non-reference exactly where the picture type is B`, async () => {
      const clip = await indexClip({ seconds: 4, gop: 25, bframes: 1, codec });
      const d = await probeDetails(clip);
      expect(d.nal?.codec).toBe(codec);
      const packets = await listAllPackets(clip, d);
      const types = pictureTypes(clip);
      const hints = await referenceHints(clip, d, packets, packets.pts);
      expect(hints).toEqual(packets.pts.map((p) => types.get(p) !== 'B'));
      expect(hints.filter((h) => h === false).length).toBeGreaterThan(packets.pts.length / 3);
    });
  }

  it('gives no hint where the container or scan type does not allow one', async () => {
    const clip = await indexClip({ seconds: 2, container: 'mkv' });
    const d = await probeDetails(clip);
    const packets = await listAllPackets(clip, d);
    expect(d.nal).toBeNull();
    expect(new Set(await referenceHints(clip, d, packets, packets.pts))).toEqual(new Set([undefined]));
  });
});

describe('listing packets near the targets', () => {
  it('picks the frame the decoder displays at every target, as a whole-file listing does', async () => {
    const clip = await indexClip({ seconds: 40, gop: 37, bframes: 3 });
    const d = await probeDetails(clip);
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

  it('declines when the packet runs cannot prove coverage (Matroska has no exact durations)', async () => {
    const clip = await indexClip({ seconds: 12, fps: '30000/1001', container: 'mkv' });
    const d = await probeDetails(clip);
    expect(await listPacketsNear(clip, d, [1000, 5000])).toBeNull();
  });
});
