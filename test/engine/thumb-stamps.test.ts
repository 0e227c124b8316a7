/**
 * The fallback's thumbnails and their times (src/engine/ffmpeg/thumbs.ts): no filter logs the
 * branch's pictures, so their times are the decoder's, up to where the graph's trims end the
 * branch, and a run whose written tiles do not match that count gives none. The engine tier
 * checks the same on encoded clips against a sequential decode (test/engine/pictures.test.ts).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { THUMB, THUMB_BYTES } from '../../src/core/pictures.js';
import type { VideoDetails } from '../../src/engine/ffmpeg/media.js';
import { branchStamps, Thumbnails, TILE, thumbStats } from '../../src/engine/ffmpeg/thumbs.js';

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
  /** The k-th thumbnail of a run: every byte says which picture, row and column it is. */
  const thumb = (k: number) =>
    Buffer.from(
      Array.from({ length: THUMB_BYTES }, (_, i) => (k * 7 + Math.floor(i / THUMB.w) * 3 + i) & 255),
    );
  /**
   * A run directory as FFmpeg's tile filter writes it for a run whose graph was configured for
   * `graphs[g]` pictures in turn (the k-th of the run is thumb(k)): each graph's tiles in reading
   * order, a graph configured anew losing the tile it was filling, the last one's last tile padded
   * with the filter's blank; `tiles`, when given, cuts the file short or pads it with blank tiles.
   */
  const run = (graphs: number[], tiles?: number) => {
    const [across, down] = [TILE.across, TILE.down];
    const [width, perTile] = [across * THUMB.w, across * down];
    const written: Buffer[] = [];
    let k = 0;
    for (const [g, count] of graphs.entries()) {
      const made = g === graphs.length - 1 ? Math.ceil(count / perTile) : Math.floor(count / perTile);
      for (let t = 0; t < made; t++) {
        const tile = Buffer.alloc(perTile * THUMB_BYTES, 16);
        for (let slot = 0; slot < perTile && t * perTile + slot < count; slot++) {
          const corner = Math.floor(slot / across) * THUMB.h * width + (slot % across) * THUMB.w;
          for (let y = 0; y < THUMB.h; y++)
            thumb(k + t * perTile + slot).copy(tile, corner + y * width, y * THUMB.w, (y + 1) * THUMB.w);
        }
        written.push(tile);
      }
      k += count;
    }
    const dir = mkdtempSync(join(tmpdir(), 'vidsheet-thumbs-'));
    dirs.push(dir);
    while (tiles !== undefined && written.length < tiles)
      written.push(Buffer.alloc(perTile * THUMB_BYTES, 16));
    writeFileSync(join(dir, 'thumbs.gray'), Buffer.concat(written.slice(0, tiles)));
    return dir;
  };
  const stamps = (n: number) => Array.from({ length: n }, (_, k) => BigInt(40 * (k + 1)));
  const taken = async (dir: string, n: number, finished: boolean, configured = [0]) => {
    const thumbs = new Thumbnails(0);
    const before = thumbStats.dropped;
    await thumbs.take(d, dir, stamps(n), { finished, configured });
    const { pictures, thumbs: bytes } = thumbs.log();
    return { pictures: [...pictures], bytes: Buffer.from(bytes), dropped: thumbStats.dropped - before };
  };
  /** What taking the run's pictures `ks` gives. */
  const expected = (ks: number[]) => ({
    pictures: ks.map((k) => expect.closeTo(0.04 * (k + 1), 9)),
    bytes: Buffer.concat(ks.map(thumb)),
    dropped: 0,
  });
  const upTo = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i);
  const none = { pictures: [], bytes: Buffer.alloc(0), dropped: 1 };

  it('gives each written picture its stamp, in order, across rows and tiles', async () => {
    expect(await taken(run([3]), 3, true)).toEqual(expected(upTo(0, 3)));
    expect(await taken(run([150]), 150, true)).toEqual(expected(upTo(0, 150)));
  });

  it('gives none when a run that ended normally wrote another count of tiles than it stamped', async () => {
    expect(await taken(run([65], 1), 65, true)).toEqual(none);
    expect(await taken(run([3], 2), 3, true)).toEqual(none);
  });

  it('skips the pictures lost with a graph configured anew, and places the next graph’s', async () => {
    // 70 pictures, then the size changes: the 6 in the second tile are lost, 80 follow in 2 tiles.
    expect(await taken(run([70, 80]), 150, true, [0, 70])).toEqual(
      expected([...upTo(0, 64), ...upTo(70, 150)]),
    );
  });

  it('takes the whole tiles a run cut short wrote, never more tiles than stamps', async () => {
    expect(await taken(run([150], 2), 150, false)).toEqual(expected(upTo(0, 128)));
    expect(await taken(run([60], 2), 60, false)).toEqual(none);
  });
});
