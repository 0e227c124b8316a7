/**
 * core/movie-header.ts: the top-level box walk that finds a compressed movie header before FFmpeg
 * inflates it (DESIGN §5a), over synthesised boxes: both declared sizes, 64-bit sizes, `moov` after
 * a (virtual) 5 GB `mdat`, `cmov` where FFmpeg also reads it, and sizes that are garbage.
 */
import { describe, expect, it } from 'vitest';
import {
  type ByteSource,
  MAX_SEARCHED_BYTES,
  MAX_TOP_LEVEL_BOXES,
  scanMovieHeader,
} from '../../src/core/movie-header.js';

const text = (s: string) => Buffer.from(s, 'latin1');
function u32(v: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(v);
  return b;
}

/** A box with a 32-bit size (or `largesize` when `large`). */
function box(type: string, payload: Buffer, large = false): Buffer {
  if (!large) return Buffer.concat([u32(8 + payload.length), text(type), payload]);
  const size = Buffer.alloc(8);
  size.writeBigUInt64BE(BigInt(16 + payload.length));
  return Buffer.concat([u32(1), text(type), size, payload]);
}

/** `cmov` > `dcom` 'zlib' + `cmvd` declaring `declared` bytes, with a few bytes of "zlib". */
function cmov(declared: number): Buffer {
  const cmvd = Buffer.concat([
    u32(12 + 6),
    text('cmvd'),
    u32(declared),
    Buffer.from([0x78, 0xda, 1, 2, 3, 4]),
  ]);
  return box('cmov', Buffer.concat([box('dcom', text('zlib')), cmvd]));
}

const ftyp = box('ftyp', Buffer.concat([text('qt  '), u32(0), text('qt  ')]));
const mvhd = box('mvhd', Buffer.alloc(100));
const plainMoov = box('moov', Buffer.concat([mvhd, box('trak', box('tkhd', Buffer.alloc(84)))]));

function source(bytes: Buffer): ByteSource & { reads: number; bytesRead: number } {
  const s = {
    size: bytes.length,
    reads: 0,
    bytesRead: 0,
    async read(position: number, length: number) {
      s.reads++;
      const out = bytes.subarray(position, position + length);
      s.bytesRead += out.length;
      return out;
    },
  };
  return s;
}

/** `prefix`, then `gap` virtual zero bytes (never materialised), then `suffix`. */
function sparse(prefix: Buffer, gap: number, suffix: Buffer) {
  const s = {
    size: prefix.length + gap + suffix.length,
    bytesRead: 0,
    async read(position: number, length: number) {
      const end = Math.min(position + length, s.size);
      const out = Buffer.alloc(Math.max(0, end - position));
      for (let i = position; i < end; i++) {
        const k = i - prefix.length - gap;
        out[i - position] = i < prefix.length ? (prefix[i] as number) : k >= 0 ? (suffix[k] as number) : 0;
      }
      s.bytesRead += out.length;
      return out;
    },
  };
  return s;
}

describe('scanMovieHeader', () => {
  it.each([
    ['the bomb size', 0x7ff00000],
    ['a small header', 4096],
  ])('finds cmov inside moov and reads cmvd’s declared size (%s)', async (_, declared) => {
    const moov = box('moov', cmov(declared));
    const file = Buffer.concat([ftyp, moov, box('mdat', Buffer.alloc(1000))]);
    expect(await scanMovieHeader(source(file))).toEqual({
      kind: 'compressed',
      offset: ftyp.length + 8,
      declaredBytes: declared,
    });
  });

  it('an ordinary movie is plain, and its media data is never read', async () => {
    const mdat = box('mdat', Buffer.alloc(4 * 1024 * 1024, 7));
    const s = source(Buffer.concat([ftyp, mdat, plainMoov]));
    expect(await scanMovieHeader(s)).toEqual({ kind: 'plain' });
    expect(s.bytesRead).toBeLessThan(200 * 1024);
  });

  it('walks 64-bit sizes: moov after a 5 GB mdat, and a moov with a largesize', async () => {
    const mdatHeader = Buffer.alloc(16);
    mdatHeader.writeUInt32BE(1);
    mdatHeader.write('mdat', 4, 'latin1');
    mdatHeader.writeBigUInt64BE(5n * 2n ** 30n + 16n, 8);
    const tail = box('moov', Buffer.concat([mvhd, cmov(0x7ff00000)]), true);
    const s = sparse(Buffer.concat([ftyp, mdatHeader]), 5 * 2 ** 30, tail);
    const scan = await scanMovieHeader(s);
    expect(scan).toMatchObject({ kind: 'compressed', declaredBytes: 0x7ff00000 });
    expect((scan as { offset: number }).offset).toBe(ftyp.length + 16 + 5 * 2 ** 30 + 16 + mvhd.length);
    expect(s.bytesRead).toBeLessThan(200 * 1024);
  });

  it.each([
    ['deep in a trak', () => box('moov', Buffer.concat([mvhd, box('trak', box('mdia', cmov(1 << 30)))]))],
    ['at the top level', () => cmov(1 << 30)],
    [
      'after the mdat, past the moov',
      () => Buffer.concat([plainMoov, box('mdat', Buffer.alloc(64)), cmov(1 << 30)]),
    ],
    ['in a fragment', () => Buffer.concat([plainMoov, box('moof', box('traf', cmov(1 << 30)))])],
    ['in a free box FFmpeg retries as moov', () => box('free', cmov(1 << 30))],
    [
      'in a moov whose last box runs to the end (size 0)',
      () => Buffer.concat([u32(0), text('moov'), cmov(1 << 30)]),
    ],
  ])('finds cmov where FFmpeg also reads it: %s', async (_, make) => {
    const scan = await scanMovieHeader(source(Buffer.concat([ftyp, make()])));
    expect(scan).toMatchObject({ kind: 'compressed', declaredBytes: 1 << 30 });
  });

  it('ignores cmov bytes in boxes FFmpeg skips, and a cmov without FFmpeg’s layout', async () => {
    const notLaidOut = box('cmov', Buffer.concat([box('xxxx', text('zlib')), box('cmvd', u32(1 << 30))]));
    const file = Buffer.concat([
      ftyp,
      box('mdat', cmov(1 << 30)),
      box('uuid', cmov(1 << 30)),
      box('moov', notLaidOut),
    ]);
    expect(await scanMovieHeader(source(file))).toEqual({ kind: 'plain' });
  });

  it('truncated and garbage sizes stop the walk without throwing', async () => {
    const truncatedLarge = Buffer.concat([u32(1), text('moov'), Buffer.from([0, 0, 0])]);
    const cases: Buffer[] = [
      Buffer.alloc(0),
      Buffer.from([0, 0, 0]),
      Buffer.concat([ftyp, u32(3), text('moov'), cmov(1 << 30)]), // smaller than its header
      Buffer.concat([ftyp, truncatedLarge]),
      Buffer.concat([ftyp, u32(1), text('moov'), Buffer.alloc(8)]), // largesize 0
      Buffer.concat([ftyp, u32(0xffffffff), text('mdat'), Buffer.alloc(10)]), // past the end
      Buffer.concat([ftyp, u32(1), text('mdat'), Buffer.alloc(8, 0xff)]), // largesize 2^64-1
      Buffer.concat([ftyp, box('moov', mvhd).subarray(0, 50)]), // truncated moov
    ];
    for (const file of cases) await expect(scanMovieHeader(source(file))).resolves.toEqual({ kind: 'plain' });
    // A moov claiming more than the file holds is searched as far as the file goes.
    const clamped = Buffer.concat([ftyp, u32(0x7fffffff), text('moov'), cmov(1 << 20)]);
    await expect(scanMovieHeader(source(clamped))).resolves.toMatchObject({ kind: 'compressed' });
  });

  it('random bytes never throw and never loop', async () => {
    let seed = 1;
    const random = () => {
      seed = (seed * 1103515245 + 12345) >>> 0;
      return seed >>> 16;
    };
    for (let n = 0; n < 300; n++) {
      const bytes = Buffer.alloc(random() % 600);
      for (let i = 0; i < bytes.length; i++) bytes[i] = random() & 0xff;
      // Small sizes, so walks are long: the first bytes of every 8 are a size of 8..40.
      if (n % 2) for (let i = 0; i + 8 <= bytes.length; i += 8) bytes.writeUInt32BE(8 + (random() % 32), i);
      const scan = await scanMovieHeader(source(bytes));
      expect(['plain', 'compressed']).toContain(scan.kind);
    }
  });

  it('a file over the bounds is refused, not opened unchecked', async () => {
    const tiny = Buffer.concat(
      Array.from({ length: MAX_TOP_LEVEL_BOXES + 1 }, () => box('free', Buffer.alloc(0))),
    );
    const s = source(tiny);
    await expect(scanMovieHeader(s)).resolves.toMatchObject({ kind: 'over_bounds' });
    // Headers are read through a window, not one read per box.
    expect(s.reads).toBeLessThan(100);

    const hugeMoov = Buffer.alloc(8);
    hugeMoov.writeUInt32BE(MAX_SEARCHED_BYTES + 1024);
    hugeMoov.write('moov', 4, 'latin1');
    const big = sparse(Buffer.concat([ftyp, hugeMoov]), MAX_SEARCHED_BYTES + 1016, Buffer.alloc(0));
    await expect(scanMovieHeader(big)).resolves.toMatchObject({ kind: 'over_bounds' });
    expect(big.bytesRead).toBeLessThan(1024 * 1024);
  });
});
