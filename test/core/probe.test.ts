import { describe, expect, it } from 'vitest';
import {
  chooseAudioStream,
  chooseVideoStream,
  clipExtent,
  extentToleranceMs,
  MOVING_PICTURE_FRAMES,
  type VideoStreamFacts,
  videoCandidates,
} from '../../src/core/probe.js';

const stream = (over: Partial<VideoStreamFacts> & { index: number }): VideoStreamFacts => ({
  width: 1280,
  height: 720,
  isDefault: true,
  attachedPic: false,
  frames: 300,
  decodes: true,
  readableEnd: 10,
  programs: [],
  ...over,
});

const warning = (x: string, y: string) =>
  `the container declares ${x} s but the file's audio and video end at ${y} s; sheets cover the readable part`;

describe("the stream rule's candidates (a bounded probe tries them in this order)", () => {
  it('ranks without the decode test, leaving out cover art and streams of unknown size', () => {
    const cover = stream({ index: 0, attachedPic: true });
    const small = stream({ index: 1, width: 640, height: 360, decodes: false });
    const large = stream({ index: 2, decodes: false });
    const unsized = stream({ index: 3, width: 0, height: 0 });
    const other = stream({ index: 4, isDefault: false, width: 3840, height: 2160 });
    expect(videoCandidates([cover, small, large, unsized, other]).map((s) => s.index)).toEqual([2, 1, 4]);
  });

  it('chooses the first candidate that decodes', () => {
    const streams = [stream({ index: 0, decodes: false }), stream({ index: 1, width: 640, height: 360 })];
    expect(chooseVideoStream(streams)?.index).toBe(
      videoCandidates(streams.filter((s) => s.decodes))[0]?.index,
    );
    expect(chooseVideoStream(streams)?.index).toBe(1);
  });
});

describe('the stream rule', () => {
  it('never picks cover art, even the largest and the only default stream', () => {
    const cover = stream({ index: 0, width: 3000, height: 3000, attachedPic: true, frames: 1 });
    const video = stream({ index: 1, width: 640, height: 360, isDefault: false });
    expect(chooseVideoStream([cover, video])?.index).toBe(1);
  });

  it('never picks a stream that does not decode; none that decodes means an unreadable video', () => {
    const broken = stream({ index: 0, decodes: false, frames: 9000 });
    const fine = stream({ index: 1, isDefault: false, frames: 10 });
    expect(chooseVideoStream([broken, fine])?.index).toBe(1);
    expect(chooseVideoStream([broken])).toBeNull();
    expect(chooseVideoStream([stream({ index: 0, attachedPic: true })])).toBeNull();
    expect(chooseVideoStream([])).toBeNull();
  });

  it('prefers the default disposition over more frames and a larger picture', () => {
    const other = stream({ index: 0, isDefault: false, frames: 5000, width: 3840, height: 2160 });
    const main = stream({ index: 1, frames: 100 });
    expect(chooseVideoStream([other, main])?.index).toBe(1);
  });

  it("then a moving picture: a phone's larger 2-frame top-shot stream loses to the real video", () => {
    const video = stream({ index: 0, width: 1920, height: 1080, frames: 900 });
    const topShot = stream({ index: 1, width: 4032, height: 3024, frames: 2 });
    expect(chooseVideoStream([topShot, video])?.index).toBe(0);
    expect(chooseVideoStream([video, topShot])?.index).toBe(0);
  });

  it('a stream of fewer than MOVING_PICTURE_FRAMES frames is a still; from there on the count is not compared', () => {
    expect(MOVING_PICTURE_FRAMES).toBe(5);
    const still = stream({ index: 0, width: 1920, height: 1080, frames: 4 });
    const moving = stream({ index: 1, width: 640, height: 360, frames: 5 });
    expect(chooseVideoStream([still, moving])?.index).toBe(1);
    // Five frames or 9000: the larger picture decides.
    const few = stream({ index: 2, width: 1920, height: 1080, frames: 5 });
    expect(chooseVideoStream([moving, few, stream({ index: 3, frames: 9000 })])?.index).toBe(2);
  });

  it("two like programs of a broadcast: the first, whichever one's estimated count is a frame longer", () => {
    const one = stream({ index: 0, isDefault: false, width: 720, height: 576, frames: 300 });
    const two = stream({ index: 2, isDefault: false, width: 720, height: 576, frames: 301 });
    expect(chooseVideoStream([one, two])?.index).toBe(0);
    expect(chooseVideoStream([two, one])?.index).toBe(0);
    // Nor does a higher frame rate win: a 50 fps angle beside the 25 fps main track.
    const angle = stream({ index: 1, frames: 500 });
    expect(chooseVideoStream([stream({ index: 0, frames: 250 }), angle])?.index).toBe(0);
  });

  it('then the largest picture, then the first stream; an unknown frame count counts as none', () => {
    const small = stream({ index: 0, frames: null, width: 640, height: 360 });
    const large = stream({ index: 1, frames: null, width: 1920, height: 1080 });
    expect(chooseVideoStream([small, large])?.index).toBe(1);
    const twin = stream({ index: 2, frames: null, width: 1920, height: 1080 });
    expect(chooseVideoStream([twin, large])?.index).toBe(1);
    expect(chooseVideoStream([stream({ index: 3, frames: 1 }), small])?.index).toBe(3);
  });
});

describe('the audio rule', () => {
  const audio = (index: number, programs: number[] = []) => ({ index, programs });

  it("the first audio stream of the video's program, though another program's comes first", () => {
    const video = stream({ index: 1, programs: [2] });
    expect(chooseAudioStream(video, [audio(2, [1]), audio(3, [2]), audio(4, [2])])).toBe(3);
  });

  it('a stream in several programs shares any of them', () => {
    expect(chooseAudioStream(stream({ index: 0, programs: [1, 5] }), [audio(1, [2]), audio(2, [5])])).toBe(2);
  });

  it('no program shared, or none at all: the first audio stream', () => {
    expect(chooseAudioStream(stream({ index: 0, programs: [1] }), [audio(3, [2]), audio(4, [3])])).toBe(3);
    expect(chooseAudioStream(stream({ index: 0 }), [audio(1), audio(2)])).toBe(1);
  });

  it('no audio: null', () => {
    expect(chooseAudioStream(stream({ index: 0, programs: [1] }), [])).toBeNull();
  });
});

describe('the clip extent rule (DESIGN §2)', () => {
  it('keeps the declared duration within max(1 s, 2 %) of the readable end, either way', () => {
    expect(clipExtent(10, { readableEnd: 10.999 }, null)).toEqual({ durationMs: 10_000 });
    expect(clipExtent(10, { readableEnd: 9.001 }, null)).toEqual({ durationMs: 10_000 });
    expect(clipExtent(3600, { readableEnd: 3529 }, 3528)).toEqual({ durationMs: 3_600_000 });
    expect(extentToleranceMs(3_600_000)).toBe(72_000);
    expect(extentToleranceMs(10_000)).toBe(1_000);
  });

  it('takes the readable end when the container over-declares (a truncated copy), with the warning', () => {
    expect(clipExtent(1331.04, { readableEnd: 0.5 }, null)).toEqual({
      durationMs: 500,
      warning: warning('1331.04', '0.5'),
    });
    // A fragmented MP4 that declares 39 hours for one second of video.
    expect(clipExtent(143165.576, { readableEnd: 1.04 }, 1.0213)).toEqual({
      durationMs: 1_040,
      warning: warning('143165.576', '1.04'),
    });
  });

  it('takes the readable end when the container under-declares, and the audio counts too', () => {
    // 0.95 s short is inside the 1 s tolerance: DESIGN keeps the declaration.
    expect(clipExtent(0.13, { readableEnd: 1.08 }, null)).toEqual({ durationMs: 130 });
    expect(clipExtent(0.13, { readableEnd: 1.1 }, 1.2)).toEqual({
      durationMs: 1_200,
      warning: warning('0.13', '1.2'),
    });
    expect(clipExtent(60, { readableEnd: 20 }, 80)).toEqual({
      durationMs: 80_000,
      warning: warning('60', '80'),
    });
  });

  it('just past the tolerance is replaced; exactly at it is kept', () => {
    expect(clipExtent(100, { readableEnd: 98 }, null)).toEqual({ durationMs: 100_000 });
    expect(clipExtent(100, { readableEnd: 97.999 }, null).durationMs).toBe(97_999);
  });

  it('a container that declares nothing takes the readable end; nothing readable keeps the declaration', () => {
    expect(clipExtent(0, { readableEnd: 12.345 }, null)).toEqual({ durationMs: 12_345 });
    expect(clipExtent(0, { readableEnd: 0.4 }, null)).toEqual({ durationMs: 400 });
    expect(clipExtent(0, { readableEnd: null }, null)).toEqual({ durationMs: 0 });
    expect(clipExtent(12, { readableEnd: null }, null)).toEqual({ durationMs: 12_000 });
    expect(clipExtent(12, { readableEnd: Number.NaN }, null)).toEqual({ durationMs: 12_000 });
  });
});
