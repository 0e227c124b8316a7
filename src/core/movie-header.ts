/**
 * Compressed movie headers (DESIGN §5a "Decode cost is bounded before and during a job"): a rule
 * over bytes, no I/O of its own (the caller hands it a {@link ByteSource}).
 *
 * A QuickTime `cmov` box (`cmov` > `dcom` 'zlib' + `cmvd`: a 4-byte big-endian uncompressed size,
 * then zlib data) makes FFmpeg's mov demuxer allocate the size the file declares and inflate into
 * it, on every open: 2 MB of zeros declare and fill 2 GB. FFmpeg reads `cmov` wherever its box
 * parser meets one (its parse table does not look at the parent), checking only the fixed layout
 * `cmov` ....`dcom` `zlib` .... `cmvd` before it allocates, and a `cmov` inside the inflated header
 * is read the same way, so a small outer size says nothing about the inner one.
 *
 * The decision: a job with the hosted bounds refuses every compressed movie header, whatever size
 * it declares. Files that carry one are QuickTime 2/3-era movies saved with "compress movie
 * header"; no current muxer writes it, so refusing costs the service almost nothing, while allowing
 * "small" ones would need this scan to inflate them (and every header nested inside) to prove the
 * next level small too. The local CLI and MCP stdio do not scan: their files are the user's own.
 *
 * The scan walks the top-level boxes by their sizes (32-bit and 64-bit `largesize`, 0 = to the
 * end) as FFmpeg does on a seekable file: past the `moov`, to the end of the file, since FFmpeg
 * reads every top-level box (a `moof` or a stray `cmov` after the media data included). Of each box
 * FFmpeg descends into, the bytes are searched for the fixed layout above; the media data is never
 * read. Both walks are bounded, and a file over a bound is refused rather than opened unchecked.
 */

/** The file, as the scan reads it. */
export interface ByteSource {
  /** Total size in bytes. */
  readonly size: number;
  /** Up to `length` bytes at `position`; fewer only at the end of the file. */
  read(position: number, length: number): Promise<Uint8Array>;
}

export type MovieHeaderScan =
  /** Nothing FFmpeg would inflate (also: not a box-structured file at all). */
  | { kind: 'plain' }
  /** A `cmov` box at `offset` whose `cmvd` declares `declaredBytes` of uncompressed header. */
  | { kind: 'compressed'; offset: number; declaredBytes: number }
  /** Too many top-level boxes, or more box bytes to search than {@link MAX_SEARCHED_BYTES}. */
  | { kind: 'over_bounds'; reason: string };

/**
 * Top-level boxes walked at most. A fragmented MP4 has two to four per fragment; at the hosted
 * 1800 s cap, even 0.1 s fragments stay under this.
 */
export const MAX_TOP_LEVEL_BOXES = 100_000;

/**
 * Bytes of the boxes FFmpeg descends into (the movie header, fragments' headers) searched at most.
 * A 30-minute clip's `moov` is a few MB; this is far above any the hosted caps allow.
 */
export const MAX_SEARCHED_BYTES = 64 * 1024 * 1024;

/**
 * Box types FFmpeg's mov demuxer descends into when it meets them at the top level (its parse
 * table is flat: a `trak` or `cmov` is read there too). Any other top-level box is skipped by its
 * size, as FFmpeg skips it, so its bytes are not searched (`mdat` above all).
 */
const DESCENDED = new Set([
  'moov',
  'cmov',
  'moof',
  'mfra',
  'trak',
  'mdia',
  'minf',
  'stbl',
  'dinf',
  'edts',
  'udta',
  'mvex',
  'traf',
  'tref',
  'meta',
  'ilst',
  'wave',
  'sinf',
  'schi',
  'iprp',
  'ipco',
  'clip',
  'matt',
]);

/** From `cmov`'s type: `dcom` at +8, `zlib` at +12, `cmvd` at +20, its declared size at +24. */
const LAYOUT = { dcom: 8, zlib: 12, cmvd: 20, declared: 24, end: 28 } as const;
const CHUNK = 1024 * 1024;
const HEADER_READ = 64 * 1024;

/** Whether `source` holds a compressed movie header FFmpeg would inflate (see the module doc). */
export async function scanMovieHeader(source: ByteSource): Promise<MovieHeaderScan> {
  const headers = new ReadAhead(source);
  let searched = 0;
  let pos = 0;
  for (let boxes = 0; pos + 8 <= source.size; boxes++) {
    if (boxes >= MAX_TOP_LEVEL_BOXES) {
      return { kind: 'over_bounds', reason: `more than ${MAX_TOP_LEVEL_BOXES} top-level boxes` };
    }
    const head = await headers.bytes(pos, 16);
    if (head.length < 8) break;
    const view = new DataView(head.buffer, head.byteOffset, head.length);
    const size32 = view.getUint32(0);
    const type = fourcc(head, 4);
    let size: number;
    let headerLength = 8;
    if (size32 === 1) {
      if (head.length < 16) break;
      // Beyond 2^53 it is past any file's end anyway: clamped below, as FFmpeg clamps.
      size = Number(view.getBigUint64(8));
      headerLength = 16;
    } else if (size32 === 0) {
      size = source.size - pos;
    } else {
      size = size32;
    }
    // FFmpeg stops its walk at a box smaller than its own header.
    if (size < headerLength) break;
    const end = Math.min(pos + size, source.size);
    // FFmpeg's retry of a file without `moov` reads a `free` box as one when its payload opens
    // with `mvhd` or `cmov` (the type at +12 from the box start, whatever the size's form).
    const freeMoov = type === 'free' && head.length >= 16 && ['mvhd', 'cmov'].includes(fourcc(head, 12));
    if (DESCENDED.has(type) || freeMoov) {
      searched += end - pos;
      if (searched > MAX_SEARCHED_BYTES) {
        return { kind: 'over_bounds', reason: `more than ${MAX_SEARCHED_BYTES} bytes of box headers` };
      }
      const found = await findCompressed(source, pos, end);
      if (found) return found;
    }
    pos = end;
  }
  return { kind: 'plain' };
}

/** The first `cmov` laid out as FFmpeg reads it within [start, end), searched in chunks. */
async function findCompressed(
  source: ByteSource,
  start: number,
  end: number,
): Promise<MovieHeaderScan | undefined> {
  for (let at = start; at < end; at += CHUNK) {
    // Each chunk overlaps the next by a layout's length, so none straddles unseen.
    const bytes = await source.read(at, Math.min(CHUNK + LAYOUT.end - 1, end - at));
    for (let i = indexOf(bytes, 'cmov', 0); i >= 0; i = indexOf(bytes, 'cmov', i + 1)) {
      if (i >= CHUNK) break;
      if (i + LAYOUT.end > bytes.length) break;
      if (
        fourcc(bytes, i + LAYOUT.dcom) === 'dcom' &&
        fourcc(bytes, i + LAYOUT.zlib) === 'zlib' &&
        fourcc(bytes, i + LAYOUT.cmvd) === 'cmvd'
      ) {
        const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
        return { kind: 'compressed', offset: at + i - 4, declaredBytes: view.getUint32(i + LAYOUT.declared) };
      }
    }
  }
  return undefined;
}

/** Box headers read through one 64 KiB window, so a file of tiny boxes costs few reads. */
class ReadAhead {
  private start = 0;
  private window: Uint8Array = new Uint8Array(0);
  constructor(private readonly source: ByteSource) {}

  async bytes(pos: number, length: number): Promise<Uint8Array> {
    const offset = pos - this.start;
    if (offset < 0 || offset + length > this.window.length) {
      this.start = pos;
      this.window = await this.source.read(pos, Math.max(length, HEADER_READ));
      return this.window.subarray(0, length);
    }
    return this.window.subarray(offset, offset + length);
  }
}

const ascii = new TextDecoder('latin1');
function fourcc(bytes: Uint8Array, at: number): string {
  return ascii.decode(bytes.subarray(at, at + 4));
}

function indexOf(bytes: Uint8Array, text: string, from: number): number {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).indexOf(text, from, 'latin1');
}
