/**
 * The fallback's sample-table reading (src/engine/ffmpeg/sample-table.ts) on MP4 bytes built
 * here, in-process: what it reads from a well-formed table, and that a hostile or broken one is
 * declined (the caller then lists with ffprobe, which judges the file as FFmpeg does) without a
 * throw, a hang or an allocation its bytes do not pay for. What it reads from real files is
 * judged against ffprobe in test/engine/sample-table.test.ts and test/corpus/.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { VideoDetails } from '../../src/engine/ffmpeg/media.js';
import { sampleTablePackets } from '../../src/engine/ffmpeg/sample-table.js';

const work = mkdtempSync(join(tmpdir(), 'vs-sample-bytes-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const u32 = (...values: number[]) => {
  const b = Buffer.alloc(values.length * 4);
  for (const [i, v] of values.entries()) b.writeUInt32BE(v >>> 0, i * 4);
  return b;
};
const box = (type: string, ...parts: Buffer[]) => {
  const body = Buffer.concat(parts);
  return Buffer.concat([u32(body.length + 8), Buffer.from(type, 'latin1'), body]);
};
/** A full box: version 0, no flags. */
const full = (type: string, ...parts: Buffer[]) => box(type, u32(0), ...parts);

/** The stream: track 1, 25 units a second, starting at 0. */
const D = { index: 0, trackId: 1, timeBase: [1n, 25n], startUs: 0n } as VideoDetails;

interface Parts {
  sizes: number[];
  /** stsc entries: first chunk, samples per chunk, description. */
  stsc?: number[][];
  chunkOffsets?: (mdat: number) => number[];
  sync?: number[];
  moovExtra?: Buffer[];
  stblExtra?: Buffer[];
  edits?: Array<[number, number]>;
}

/** An MP4 file: ftyp, moov (one video track, 1000-unit movie, 25-unit media), mdat. */
function mp4({
  sizes,
  stsc,
  chunkOffsets,
  sync = [1],
  moovExtra = [],
  stblExtra = [],
  edits,
}: Parts): Buffer {
  const ftyp = box('ftyp', Buffer.from('isom'), u32(0));
  const build = (mdatAt: number) => {
    const stbl = box(
      'stbl',
      full('stsd', u32(1), box('avc1', Buffer.alloc(78))),
      full('stts', u32(1, sizes.length, 1)),
      full('stss', u32(sync.length, ...sync)),
      full('stsz', u32(0, sizes.length, ...sizes)),
      full('stsc', u32((stsc ?? [[1, sizes.length, 1]]).length, ...(stsc ?? [[1, sizes.length, 1]]).flat())),
      full('stco', u32(...((o) => [o.length, ...o])(chunkOffsets?.(mdatAt) ?? [mdatAt]))),
      ...stblExtra,
    );
    const hdlr = full('hdlr', u32(0), Buffer.from('vide'), Buffer.alloc(13));
    const mdhd = full('mdhd', u32(0, 0, 25, sizes.length), Buffer.alloc(4));
    const edts = edits
      ? [box('edts', full('elst', u32(edits.length, ...edits.flatMap(([d, t]) => [d, t, 0x10000]))))]
      : [];
    const tkhd = full('tkhd', u32(0, 0, 1, 0, 0), Buffer.alloc(60));
    const trak = box('trak', tkhd, ...edts, box('mdia', mdhd, hdlr, box('minf', stbl)));
    const mvhd = full('mvhd', u32(0, 0, 1000, 0), Buffer.alloc(80));
    return box('moov', mvhd, trak, ...moovExtra);
  };
  const moovBytes = build(0).length;
  const mdatAt = ftyp.length + moovBytes + 8;
  const data = Buffer.alloc(
    sizes.reduce((a, b) => a + b, 0),
    7,
  );
  return Buffer.concat([ftyp, build(mdatAt), box('mdat', data)]);
}

let n = 0;
async function read(bytes: Buffer, d = D) {
  const path = join(work, `f${n++}.mp4`);
  writeFileSync(path, bytes);
  return sampleTablePackets(path, d);
}

const SIZES = [10, 20, 30, 40];

describe('the sample-table reading, on tables built here', () => {
  it('reads each sample: its decode time, size and sync flag, in decode order', async () => {
    const log = await read(mp4({ sizes: SIZES, sync: [1, 3] }));
    expect(log && [...log.times]).toEqual([0, 0.04, 0.08, 0.12]);
    expect(log && [...log.sizes]).toEqual(SIZES);
    expect(log && [...log.keys]).toEqual([1, 0, 1, 0]);
    expect(log && [...log.spans]).toEqual([Number.NEGATIVE_INFINITY, Number.POSITIVE_INFINITY]);
  });

  it('keeps the span it is given and leaves out a sample past the end of the file', async () => {
    // Two chunks, the second placed past the file's end.
    const stsc = [[1, 2, 1]];
    const log = await read(mp4({ sizes: SIZES, stsc, chunkOffsets: (m) => [m, m + 1_000_000] }));
    expect(log && [...log.sizes]).toEqual([10, 20]);
    const part = await sampleTablePackets(join(work, `f${n - 1}.mp4`), D, { fromMs: 30, toMs: 1000 });
    expect(part && [...part.times]).toEqual([0.04]);
    expect(part && [...part.spans]).toEqual([0.03, 1]);
  });

  it('moves every decode time by the empty edits before the one edit', async () => {
    // 400 ms empty (movie units), then the media from 0: 10 media units later.
    const log = await read(
      mp4({
        sizes: SIZES,
        edits: [
          [400, -1],
          [160, 0],
        ],
      }),
    );
    expect(log && [...log.times]).toEqual([0.4, 0.44, 0.48, 0.52]);
  });

  const DECLINED: Array<[string, () => Buffer]> = [
    [
      'two edits that both present media',
      () =>
        mp4({
          sizes: SIZES,
          edits: [
            [80, 0],
            [80, 2],
          ],
        }),
    ],
    ['an edit starting past a later keyframe', () => mp4({ sizes: SIZES, sync: [1, 3], edits: [[40, 2]] })],
    ['chunks holding more samples than sizes', () => mp4({ sizes: SIZES, stsc: [[1, 5, 1]] })],
    ['chunks holding fewer samples than sizes', () => mp4({ sizes: SIZES, stsc: [[1, 3, 1]] })],
    [
      'a sample-to-chunk table out of order',
      () =>
        mp4({
          sizes: SIZES,
          stsc: [
            [1, 2, 1],
            [1, 2, 1],
          ],
        }),
    ],
    ['fragments (mvex)', () => mp4({ sizes: SIZES, moovExtra: [box('mvex')] })],
    ['a compressed moov (cmov)', () => mp4({ sizes: SIZES, moovExtra: [box('cmov')] })],
    ['partial sync samples (stps)', () => mp4({ sizes: SIZES, stblExtra: [full('stps', u32(0))] })],
    ['a sample group (sbgp)', () => mp4({ sizes: SIZES, stblExtra: [full('sbgp', u32(0))] })],
    ['no moov at all', () => box('mdat', Buffer.alloc(100))],
    [
      'a size table claiming 2^32 - 1 samples in 12 bytes',
      () => {
        const b = mp4({ sizes: SIZES });
        b.writeUInt32BE(0xffff_ffff, b.indexOf('stsz', 0, 'latin1') + 12);
        return b;
      },
    ],
    [
      'a moov claiming more bytes than the file has',
      () => {
        const b = mp4({ sizes: SIZES });
        b.writeUInt32BE(1 << 30, b.indexOf('moov', 0, 'latin1') - 4);
        return b;
      },
    ],
    [
      'a box overrunning its parent',
      () => {
        const b = mp4({ sizes: SIZES });
        b.writeUInt32BE(1 << 20, b.indexOf('stbl', 0, 'latin1') - 4);
        return b;
      },
    ],
    [
      'a 64-bit box size past the file',
      () => Buffer.concat([u32(1), Buffer.from('free'), u32(0x7fff_ffff, 0), mp4({ sizes: SIZES })]),
    ],
    [
      'more top-level boxes before the moov than any file has',
      () => Buffer.concat([...Array.from({ length: 2000 }, () => box('free')), mp4({ sizes: SIZES })]),
    ],
  ];
  for (const [name, make] of DECLINED) {
    it(`declines ${name}`, async () => {
      expect(await read(make())).toBeUndefined();
    });
  }

  it('declines a track that is not the stream asked for', async () => {
    expect(await read(mp4({ sizes: SIZES }), { ...D, trackId: 2 })).toBeUndefined();
    expect(await read(mp4({ sizes: SIZES }), { ...D, trackId: null })).toBeUndefined();
    expect(await read(mp4({ sizes: SIZES }), { ...D, timeBase: [1n, 90_000n] })).toBeUndefined();
  });

  it('never throws on a cut or scrambled file', async () => {
    const good = mp4({ sizes: SIZES, sync: [1, 3], edits: [[160, 0]] });
    for (let cut = 0; cut < good.length; cut += 7) {
      const log = await read(good.subarray(0, cut));
      if (log) expect(log.times.length).toBe(log.sizes.length);
    }
    // Scrambled: one byte of the moov changed at a time, deterministically.
    const moov = good.indexOf('moov', 0, 'latin1');
    for (let at = moov; at < good.length - 40; at += 3) {
      const b = Buffer.from(good);
      b[at] = (b[at] as number) ^ 0xa5;
      const log = await read(b);
      if (log) expect(log.times.length).toBe(log.sizes.length);
    }
  });
});
