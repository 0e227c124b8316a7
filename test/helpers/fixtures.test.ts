import { execFile } from 'node:child_process';
import { stat } from 'node:fs/promises';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  AUDIO_EVENTS,
  AUDIO_RATE,
  audioClip,
  audioClipSamples,
  damagedFiles,
  decodeAudioS16,
  decodeFrames,
  indexClip,
  noAudioClip,
  plainClip,
  probe,
  silentAudioClip,
  toS16,
} from './fixtures.js';
import {
  composeGrid,
  decodeIndex,
  decodeJpeg,
  encodeJpeg,
  fromRgb24,
  fullRect,
  type Image,
  isBlack,
  meanColor,
} from './frames.js';
import { expectedIndex, frameTimes, secondsToUs } from './oracle.js';

const execFileP = promisify(execFile);
const BUILD_TIMEOUT = 120_000;

interface Stream {
  codec_type: string;
  pix_fmt?: string;
  sample_aspect_ratio?: string;
  width?: number;
  height?: number;
  side_data_list?: Array<{ side_data_type?: string; rotation?: number }>;
}
interface Probe {
  streams: Stream[];
  format: { start_time?: string; duration?: string };
}
const probeOf = async (path: string) => (await probe(path)) as Probe;

/** Frame types and key flags in display order. */
async function frameTypes(path: string): Promise<Array<{ type: string; key: boolean }>> {
  const { stdout } = await execFileP(
    'ffprobe',
    [
      '-v',
      'error',
      '-select_streams',
      'v:0',
      '-show_entries',
      'frame=pict_type,key_frame',
      '-of',
      'json',
      path,
    ],
    { maxBuffer: 64 * 1024 * 1024 },
  );
  const frames = (JSON.parse(stdout) as { frames: Array<{ pict_type: string; key_frame: number }> }).frames;
  return frames.map((f) => ({ type: f.pict_type, key: f.key_frame === 1 }));
}

/** The way a sheet cell sees a frame: scaled to 150x85 then JPEG quality 70, then decoded. */
function asCell(rgb: Buffer, w = 150, h = 85): Image {
  return decodeJpeg(encodeJpeg(fromRgb24(rgb, w, h), 70));
}

/**
 * Reads every frame of a clip the way a sheet shows it: scaled to w x h, laid out in a grid, one
 * JPEG quality 70 encode; returns the decoded indices in display order.
 */
async function readAllIndices(path: string, w = 150, h = 85) {
  const frames = await decodeFrames(path, { width: w, height: h });
  const { image, rects } = composeGrid(
    frames.map((f) => fromRgb24(f, w, h)),
    10,
  );
  const sheet = decodeJpeg(encodeJpeg(image, 70));
  return rects.map((r) => decodeIndex(sheet, r));
}

function expectSequential(reads: Array<{ index: number; confidence: number; bandLuma: number }>, n: number) {
  expect(reads.length).toBe(n);
  expect(reads.map((r) => r.index)).toEqual(Array.from({ length: n }, (_, i) => i));
  expect(Math.min(...reads.map((r) => r.confidence))).toBeGreaterThan(60);
  for (const r of reads) expect(Math.abs(r.bandLuma - 128)).toBeLessThan(16);
}

describe('indexClip (mp4, 25 fps, B-frames)', () => {
  let clip: string;
  beforeAll(async () => {
    clip = await indexClip({ seconds: 8, gop: 50 });
  }, BUILD_TIMEOUT);

  it('is cached: a second call returns the same file at once', async () => {
    const t0 = performance.now();
    expect(await indexClip({ seconds: 8, gop: 50 })).toBe(clip);
    expect(performance.now() - t0).toBeLessThan(200);
  });

  it('has B-frames and keyframes exactly every gop frames', async () => {
    const types = await frameTypes(clip);
    expect(types.length).toBe(200);
    expect(types.filter((f) => f.type === 'B').length).toBeGreaterThan(100);
    const keys = types.flatMap((f, i) => (f.key ? [i] : []));
    expect(keys).toEqual([0, 50, 100, 150]);
  });

  it('shows frame n at display position n, readable as a 150x85 JPEG q70 cell', async () => {
    expectSequential(await readAllIndices(clip), 200);
  });

  it('survives a dark label box over the bottom-left of the cell', async () => {
    const [frame] = await decodeFrames(clip, { width: 150, height: 85, ss: 137 / 25, frames: 1 });
    const img = fromRgb24(frame as Buffer, 150, 85);
    for (let y = 68; y < 85; y++) {
      for (let x = 0; x < 90; x++) img.data.fill(20, (y * 150 + x) * 4, (y * 150 + x) * 4 + 3);
    }
    const read = decodeIndex(decodeJpeg(encodeJpeg(img, 70)), fullRect(img));
    expect(read.index).toBe(137);
    expect(read.confidence).toBeGreaterThan(60);
  });

  it('has pts starting at 0 (the edit list hides the B-frame delay) and exact 40 ms steps', async () => {
    const ft = await frameTimes(clip);
    expect(ft.startUs).toBe(0n);
    expect(ft.timeBase).toEqual({ num: 1n, den: 12800n });
    expect(ft.pts.slice(0, 3)).toEqual([0n, 512n, 1024n]);
    expect(ft.times[199]).toBeCloseTo(7.96, 9);
  });

  it('expectedIndex applies the last-frame-at-or-before rule exactly', async () => {
    const ft = await frameTimes(clip);
    expect(expectedIndex(ft, 0)).toBe(0);
    expect(expectedIndex(ft, -1)).toBe(0);
    expect(expectedIndex(ft, 0.039)).toBe(0);
    expect(expectedIndex(ft, 0.04)).toBe(1);
    expect(expectedIndex(ft, 0.079999)).toBe(1);
    expect(expectedIndex(ft, 5.5)).toBe(137);
    expect(expectedIndex(ft, 7.96)).toBe(199);
    expect(expectedIndex(ft, 1000)).toBe(199);
  });

  it('ffmpeg -ss T returns the first frame at or after T (one later than the rule mid-frame)', async () => {
    const ft = await frameTimes(clip);
    for (const t of [0, 1.0, 2.02, 5.5, 6.1]) {
      const [frame] = await decodeFrames(clip, { width: 150, height: 85, ss: t, frames: 1 });
      const got = decodeIndex(asCell(frame as Buffer), { x: 0, y: 0, w: 150, h: 85 }).index;
      const onFrame = ft.times.some((ft0) => Math.abs(ft0 - t) < 1e-9);
      expect(got).toBe(expectedIndex(ft, t) + (onFrame ? 0 : 1));
    }
  });
});

describe('indexClip variants', () => {
  it(
    'mkv at 30000/1001 fps: ms time base, frame n still at position n',
    async () => {
      const clip = await indexClip({ seconds: 3, fps: '30000/1001', container: 'mkv', gop: 30 });
      const ft = await frameTimes(clip);
      expect(ft.timeBase).toEqual({ num: 1n, den: 1000n });
      expect(ft.times.length).toBe(90);
      expect(ft.times.slice(0, 4)).toEqual([0, 0.033, 0.067, 0.1]);
      for (let k = 0; k < ft.times.length; k++) expect(expectedIndex(ft, ft.times[k] as number)).toBe(k);
      expectSequential(await readAllIndices(clip), 90);
      expect((await frameTypes(clip)).some((f) => f.type === 'B')).toBe(true);
    },
    BUILD_TIMEOUT,
  );

  it(
    'mpegts with a 19207 s stream offset and audio: start_time ~19207, times relative to it',
    async () => {
      const clip = await indexClip({
        seconds: 4,
        container: 'ts',
        startOffsetSeconds: 19207,
        audio: true,
        gop: 25,
      });
      const p = await probeOf(clip);
      const start = Number(p.format.start_time);
      expect(start).toBeGreaterThanOrEqual(19207);
      expect(start).toBeLessThan(19209);
      expect(p.streams.map((s) => s.codec_type).sort()).toEqual(['audio', 'video']);
      const ft = await frameTimes(clip);
      expect(ft.startUs).toBe(secondsToUs(p.format.start_time as string));
      expect(ft.times.length).toBe(100);
      expect(ft.times[0]).toBeGreaterThanOrEqual(0);
      expect(ft.times[0]).toBeLessThan(0.2);
      expect((ft.times[99] as number) - (ft.times[0] as number)).toBeCloseTo(3.96, 6);
      expectSequential(await readAllIndices(clip), 100);
      expect((await frameTypes(clip)).some((f) => f.type === 'B')).toBe(true);
    },
    BUILD_TIMEOUT,
  );

  for (const rotate of [90, 270] as const) {
    it(
      `rotate ${rotate}: a display matrix, and the displayed frame is the upright pattern`,
      async () => {
        const clip = await indexClip({ seconds: 2, rotate, gop: 25 });
        const video = (await probeOf(clip)).streams.find((s) => s.codec_type === 'video') as Stream;
        expect([video.width, video.height]).toEqual([320, 240]);
        const matrix = video.side_data_list?.find((d) => d.side_data_type === 'Display Matrix');
        expect(matrix?.rotation).toBe(rotate === 90 ? 90 : -90);
        // ffmpeg autorotates: the displayed frame is 240x320, scaled here to a portrait cell.
        expectSequential(await readAllIndices(clip, 64, 86), 50);
      },
      BUILD_TIMEOUT,
    );
  }

  it(
    'sar 2:1 is stored as the sample aspect ratio',
    async () => {
      const clip = await indexClip({ seconds: 1, sar: '2:1' });
      const video = (await probeOf(clip)).streams.find((s) => s.codec_type === 'video') as Stream;
      expect(video.sample_aspect_ratio).toBe('2:1');
      expectSequential(await readAllIndices(clip, 200, 40), 25);
    },
    BUILD_TIMEOUT,
  );

  it(
    '10-bit 4:2:0 decodes to the same indices',
    async () => {
      const clip = await indexClip({ seconds: 1, pixFmt: 'yuv420p10le' });
      const video = (await probeOf(clip)).streams.find((s) => s.codec_type === 'video') as Stream;
      expect(video.pix_fmt).toBe('yuv420p10le');
      expectSequential(await readAllIndices(clip), 25);
    },
    BUILD_TIMEOUT,
  );

  it(
    'hevc in mp4 with B-frames',
    async () => {
      const clip = await indexClip({ seconds: 2, codec: 'hevc', gop: 25 });
      expect((await frameTypes(clip)).some((f) => f.type === 'B')).toBe(true);
      expectSequential(await readAllIndices(clip), 50);
    },
    BUILD_TIMEOUT,
  );
});

describe('audio clips', () => {
  it(
    'audioClip (mkv, PCM) decodes back to the exact samples',
    async () => {
      const clip = await audioClip();
      const pcm = await decodeAudioS16(clip);
      const want = audioClipSamples();
      expect(pcm.length).toBe(AUDIO_EVENTS.duration * AUDIO_RATE);
      expect(Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength).equals(Buffer.from(want.buffer))).toBe(
        true,
      );
      // And the events are where the brief says, by sample position.
      const ms = (i: number) => (i / AUDIO_RATE) * 1000;
      const nonZero = [...pcm.keys()].filter((i) => pcm[i] !== 0);
      const first = nonZero[0] as number;
      expect(ms(first)).toBeGreaterThanOrEqual(5000);
      expect(ms(first)).toBeLessThan(5001);
      const inTone = nonZero.filter((i) => ms(i) < 5050);
      expect(Math.max(...inTone.map((i) => pcm[i] as number))).toBe(toS16(0.9));
      const click = nonZero.filter((i) => ms(i) >= 11_000 && ms(i) < 13_000);
      expect(click).toEqual(Array.from({ length: 48 }, (_, k) => 12 * AUDIO_RATE + k));
      expect(click.every((i) => pcm[i] === toS16(0.99))).toBe(true);
      const hum = nonZero.filter((i) => ms(i) >= 14_000);
      expect(ms(hum[0] as number)).toBeGreaterThanOrEqual(14_500);
      expect(ms(hum.at(-1) as number)).toBeLessThan(15_500);
      expect(Math.max(...hum.map((i) => Math.abs(pcm[i] as number)))).toBe(toS16(0.05));
      expect(nonZero.every((i) => ms(i) < 5050 || click.includes(i) || ms(i) >= 14_500)).toBe(true);
    },
    BUILD_TIMEOUT,
  );

  it(
    "audioClip({ container: 'mp4' }) (AAC) keeps the events at their times within 2 ms",
    async () => {
      const clip = await audioClip({ container: 'mp4' });
      const pcm = await decodeAudioS16(clip);
      expect(Math.abs(pcm.length - 20 * AUDIO_RATE)).toBeLessThan(2048);
      const peakIn = (fromS: number, toS: number) => {
        let best = 0;
        let at = -1;
        for (let i = Math.round(fromS * AUDIO_RATE); i < Math.round(toS * AUDIO_RATE); i++) {
          if (Math.abs(pcm[i] as number) > best) {
            best = Math.abs(pcm[i] as number);
            at = i;
          }
        }
        return { level: best / 32767, time: at / AUDIO_RATE };
      };
      const tone = peakIn(4.9, 5.2);
      expect(tone.level).toBeGreaterThan(0.7);
      expect(tone.time).toBeGreaterThan(4.998);
      expect(tone.time).toBeLessThan(5.052);
      const click = peakIn(11.9, 12.1);
      expect(click.level).toBeGreaterThan(0.5);
      expect(Math.abs(click.time - 12.0005)).toBeLessThan(0.002);
      expect(peakIn(14.6, 15.4).level).toBeGreaterThan(0.03);
      expect(peakIn(7, 11).level).toBeLessThan(0.001);
    },
    BUILD_TIMEOUT,
  );

  it(
    'silentAudioClip has an audio track of zeros; noAudioClip has no audio stream',
    async () => {
      const [silent, none] = await Promise.all([silentAudioClip(), noAudioClip()]);
      const s = await probeOf(silent);
      expect(s.streams.map((x) => x.codec_type).sort()).toEqual(['audio', 'video']);
      const pcm = await decodeAudioS16(silent);
      expect(pcm.length).toBeGreaterThan(9.9 * AUDIO_RATE);
      expect(pcm.every((v) => v === 0)).toBe(true);
      const n = await probeOf(none);
      expect(n.streams.map((x) => x.codec_type)).toEqual(['video']);
      expect(Number(n.format.duration)).toBeCloseTo(10, 1);
    },
    BUILD_TIMEOUT,
  );
});

describe('plainClip', () => {
  it(
    'is as long as asked and cheap',
    async () => {
      const clip = await plainClip(200);
      const p = await probeOf(clip);
      expect(Number(p.format.duration)).toBeCloseTo(200, 1);
      expect(p.streams.map((s) => s.codec_type)).toEqual(['video']);
      const withAudio = await plainClip(30, { audio: true, container: 'mkv' });
      expect((await probeOf(withAudio)).streams.map((s) => s.codec_type)).toEqual(['video', 'audio']);
    },
    BUILD_TIMEOUT,
  );
});

describe('damagedFiles', () => {
  it(
    'gives each broken input as described',
    async () => {
      const files = await damagedFiles();
      expect(files.map((f) => f.name)).toEqual([
        'truncated-10.mp4',
        'truncated-50.mp4',
        'truncated-90.mp4',
        'truncated-faststart-10.mp4',
        'truncated-faststart-50.mp4',
        'truncated-faststart-90.mp4',
        'zeroed-middle.mp4',
        'truncated-50.mkv',
        'zeroed-middle.ts',
        'random.mp4',
        'empty.mp4',
        'audio-only.mp4',
        'text.mkv',
      ]);
      for (const f of files) {
        expect(f.path.endsWith(f.name.slice(f.name.lastIndexOf('.')))).toBe(true);
        const probed = await probeOf(f.path).catch(() => null);
        const video = probed?.streams.find((s) => s.codec_type === 'video');
        if (f.expect === 'unreadable') {
          expect(video, f.name).toBeUndefined();
        } else {
          expect(video, f.name).toBeDefined();
          const decoded = await decodeFrames(f.path, { width: 32, height: 18 }).catch(() => []);
          expect(decoded.length, f.name).toBeGreaterThan(0);
          expect(decoded.length, f.name).toBeLessThan(100);
        }
      }
      expect((await stat(files.find((f) => f.name === 'empty.mp4')?.path as string)).size).toBe(0);
    },
    BUILD_TIMEOUT,
  );
});

describe('frames helpers', () => {
  it('meanColor and isBlack on a synthetic image', () => {
    const img: Image = { width: 20, height: 10, data: new Uint8Array(20 * 10 * 4) };
    for (let i = 0; i < 200; i++) {
      const x = i % 20;
      img.data.set(x < 10 ? [0, 0, 0, 255] : [200, 100, 50, 255], i * 4);
    }
    expect(meanColor(img, { x: 10, y: 0, w: 10, h: 10 })).toEqual([200, 100, 50]);
    expect(isBlack(img, { x: 0, y: 0, w: 10, h: 10 })).toBe(true);
    expect(isBlack(img, { x: 0, y: 0, w: 20, h: 10 })).toBe(false);
  });

  it('secondsToUs parses ffprobe decimals exactly', () => {
    expect(secondsToUs('19208.400000')).toBe(19_208_400_000n);
    expect(secondsToUs('-0.023220')).toBe(-23_220n);
    expect(secondsToUs('1.4')).toBe(1_400_000n);
    expect(secondsToUs('0.0000005')).toBe(1n);
  });
});
