/**
 * What the scale benchmark (bench/scale.mjs: 3000 targets in one ffmpeg run, a 2016-cell plan)
 * guards, checked without decoding: a run's selection, however many targets, goes to ffmpeg
 * through a filter script file, never argv (an argument over 128 KiB is refused by the kernel,
 * and the 6000 targets here give a selection over twice that).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { extractOnce } from '../../src/engine/ffmpeg/decode.js';
import type { VideoDetails } from '../../src/engine/ffmpeg/media.js';

const runs: string[][] = [];
vi.mock('../../src/engine/process.js', async (original) => ({
  ...(await original<typeof import('../../src/engine/process.js')>()),
  run: async (_tool: string, args: string[]) => {
    runs.push(args);
    return { code: 0, stdout: Buffer.alloc(0), stderr: '' };
  },
}));

const work = mkdtempSync(join(tmpdir(), 'vs-selection-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** A 25 fps stream in a 1/12800 time base, one keyframe, as a probe of an MP4 would give it. */
const d: VideoDetails = {
  trackId: null,
  index: 0,
  codec: 'h264',
  timeBase: [1n, 12_800n],
  rates: { avg: [25, 1], real: [25, 1] },
  startTime: 0,
  startUs: 0n,
  declared: 320,
  readableEnd: 320,
  mayBeInterlaced: false,
  ptsFromDts: false,
  timestamps: true,
  reorderDelay: 2,
  referenceReach: 0.64,
  demuxer: 'mov,mp4,m4a,3gp,3g2,mj2',
  fixed: undefined,
  indexed: true,
  sampleTable: true,
  nal: null,
  h264: null,
  bounds: undefined,
};

describe('a long target list', () => {
  it('reaches ffmpeg as a filter script file, every target in it, no argument long', async () => {
    const pts = Array.from({ length: 8000 }, (_, i) => BigInt(i * 512));
    const packets = { pts, keyframes: [0n], bytes: new Map(), log: { packets: [] }, decodeTime: new Map() };
    const group = pts.map((_, i) => i).filter((i) => i % 4 !== 3);
    await extractOnce(
      {
        path: join(work, 'clip.mp4'),
        d,
        packets: packets as unknown as Parameters<typeof extractOnce>[0]['packets'],
        group,
        size: { w: 64, h: 48 },
        dir: work,
        threads: 0,
        keyframes: [0n],
        signal: new AbortController().signal,
      },
      'stream',
      false,
      null,
      0,
    );
    const [args] = runs;
    expect(runs).toHaveLength(1);
    expect(Math.max(...(args ?? []).map((a) => a.length))).toBeLessThan(1024);
    const script = args?.[(args?.indexOf('-filter_script:v') ?? -2) + 1] as string;
    const filters = readFileSync(script, 'utf8');
    expect(filters.length).toBeGreaterThan(128 * 1024);
    expect(filters.match(/lt\(abs\(t-/g)).toHaveLength(6000);
  });
});
