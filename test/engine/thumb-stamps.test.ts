/**
 * The fallback's thumbnails and their times (src/engine/ffmpeg/thumbs.ts): no filter logs the
 * branch's pictures, so their times are the decoder's, up to where the graph's trims end the
 * branch, and a run whose written pictures do not match that count gives none. The engine tier
 * checks the same on encoded clips against a sequential decode (test/engine/pictures.test.ts).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { THUMB_BYTES } from '../../src/core/pictures.js';
import type { VideoDetails } from '../../src/engine/ffmpeg/media.js';
import { branchStamps, Thumbnails, thumbStats } from '../../src/engine/ffmpeg/thumbs.js';

describe('branchStamps', () => {
  it('takes the decoded frames up to the first at or past the trim’s end', () => {
    expect(branchStamps([0n, 512n, 1024n, 1536n, 2048n], 1536n, 100)).toEqual([0n, 512n, 1024n]);
  });

  it('ends at a frame with no pts, as the trim does, even when later ones have one', () => {
    expect(branchStamps([0n, 512n, null, 1024n], 9000n, 100)).toEqual([0n, 512n]);
  });

  it('keeps the decoder’s order: a frame handed out late, timed before the one shown, stays in', () => {
    expect(branchStamps([0n, 1024n, 512n, 1536n], 9000n, 100)).toEqual([0n, 1024n, 512n, 1536n]);
  });

  it('takes no more than the branch’s room', () => {
    expect(branchStamps([0n, 512n, 1024n, 1536n], 9000n, 2)).toEqual([0n, 512n]);
    expect(branchStamps([0n, 512n], 9000n, 0)).toEqual([]);
  });
});

describe('Thumbnails.take', () => {
  const dirs: string[] = [];
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });
  /** A 1/1000 s clock from 0. */
  const d = { timeBase: [1n, 1000n], startUs: 0n } as unknown as VideoDetails;
  /** A run directory holding `n` thumbnails, the k-th all of value k. */
  const run = (n: number) => {
    const dir = mkdtempSync(join(tmpdir(), 'vidsheet-thumbs-'));
    dirs.push(dir);
    const bytes = Buffer.alloc(n * THUMB_BYTES);
    for (let k = 0; k < n; k++) bytes.fill(k, k * THUMB_BYTES, (k + 1) * THUMB_BYTES);
    writeFileSync(join(dir, 'thumbs.gray'), bytes);
    return dir;
  };
  const taken = async (written: number, stamps: bigint[], finished: boolean) => {
    const thumbs = new Thumbnails(0);
    const before = thumbStats.dropped;
    await thumbs.take(d, run(written), stamps, finished);
    const { pictures, thumbs: bytes } = thumbs.log();
    return {
      times: [...pictures],
      firsts: Array.from({ length: pictures.length }, (_, k) => bytes[k * THUMB_BYTES]),
      dropped: thumbStats.dropped - before,
    };
  };

  it('gives each written picture its stamp, in order', async () => {
    expect(await taken(3, [40n, 80n, 120n], true)).toEqual({
      times: [0.04, 0.08, 0.12],
      firsts: [0, 1, 2],
      dropped: 0,
    });
  });

  it('gives none when a run that ended normally wrote another count than it stamped', async () => {
    expect(await taken(2, [40n, 80n, 120n], true)).toEqual({ times: [], firsts: [], dropped: 1 });
    expect(await taken(4, [40n, 80n, 120n], true)).toEqual({ times: [], firsts: [], dropped: 1 });
  });

  it('takes what a run cut short wrote, never more pictures than stamps', async () => {
    expect(await taken(2, [40n, 80n, 120n], false)).toEqual({
      times: [0.04, 0.08],
      firsts: [0, 1],
      dropped: 0,
    });
    expect(await taken(4, [40n, 80n, 120n], false)).toEqual({ times: [], firsts: [], dropped: 1 });
  });
});
