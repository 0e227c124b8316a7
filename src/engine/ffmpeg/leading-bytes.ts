/**
 * A packet's leading bytes, read in place from the file at the position ffprobe lists for it: an
 * H.264 packet's first slice NAL unit (h264.ts reads its header), an MPEG-2 packet's picture
 * headers (mpeg2.ts). MP4/MOV store a sample contiguously; a Matroska block holds its frame
 * after a short header, less the leading bytes its track's header stripping stores once; an
 * MPEG-TS packet's position is the first 188-byte transport packet of its PES packet, whose
 * payload continues in later transport packets of the same PID (others interleave); an MPEG
 * program stream packet's position is the PES packet its access unit starts in, anywhere in the
 * payload. Anything else, or bytes that do not look like what is expected, gives null: the caller
 * then decides as without.
 */
import { closeSync, openSync, readSync } from 'node:fs';
import { accessUnitStart, firstSlice } from './h264.js';

/**
 * How many bytes are read at a packet's position (MP4: of the sample; TS: of the file): first a
 * few, which hold the first slice header of nearly every packet (after an access unit delimiter);
 * then more, for a packet whose parameter sets and SEI come first. A long interlaced broadcast is
 * listed field by field, so the first read is kept small.
 */
const READS = {
  sample: [512, 4096],
  block: [512, 4096],
  transport: [188 * 4, 188 * 48],
  // A PES packet whole (the access unit starting in it must be the only one), and the next: 2 KiB
  // packs (DVD) in the first read, the longest PES packet (64 KiB) in the second.
  program: [4096, 2 * 65_542],
} as const;

/**
 * Reads between two turns of the event loop. The reads are synchronous: they are a few hundred
 * bytes each, from a file ffprobe has just read through (in the page cache), where a promise read
 * costs about 25 µs of CPU against 1.5 µs (bench/fields.mjs). An hour of interlaced broadcast is
 * 90 000 packets: seconds of CPU the other way. Yielding every 256 reads keeps a server's other
 * requests waiting well under a millisecond at a time.
 */
const READS_PER_TURN = 256;

/**
 * How a packet's bytes sit at its listed position: an MP4/MOV sample; a Matroska block (a short
 * header, then the frame: ffprobe lists the block's position and the frame's size); the first
 * transport packet of an MPEG-TS PES packet; the PES packet of an MPEG program stream that an
 * H.264 access unit starts in.
 */
export type Layout = 'sample' | 'block' | 'transport' | 'program';

/** Where a packet's bytes are, as ffprobe lists them. */
export interface PacketBytes {
  pos: number;
  size: number;
}

/**
 * Reads a packet's leading bytes, `want` of them at most: of the sample (MP4/MOV: length-prefixed
 * NAL units or the codec's own bytes) or of the file, gathered into the PES payload (MPEG-TS:
 * Annex B); null when they do not look like what is expected.
 */
export type ReadLeading = (want: number) => Buffer | null;

/**
 * `judge` applied to each packet of `at`, read in place from the file at `path`, in order; it is
 * given no reader for a packet whose position is unknown. What a reader returns is only valid
 * during its call.
 */
export async function mapPackets<T>(
  path: string,
  layout: Layout,
  at: ReadonlyArray<PacketBytes | undefined>,
  judge: (read: ReadLeading | null) => T,
): Promise<T[]> {
  const fd = openSync(path, 'r');
  try {
    const stripped = layout === 'block' ? strippedHeaders(fd) : undefined;
    const out: T[] = [];
    for (const [i, packet] of at.entries()) {
      if (i % READS_PER_TURN === READS_PER_TURN - 1) await new Promise(setImmediate);
      out.push(judge(packet ? (want) => leadingBytes(fd, layout, packet, want, stripped) : null));
    }
    return out;
  } finally {
    closeSync(fd);
  }
}

/**
 * `judge` applied to the first coded slice NAL unit of each H.264 packet of `at` (h264.ts
 * `firstSlice`: its header byte first, possibly cut short after the slice header; null when none
 * is found or the packet's position is unknown): see {@link mapPackets}.
 */
export function mapFirstSlices<T>(
  path: string,
  layout: Layout,
  lengthSize: number | null,
  at: ReadonlyArray<PacketBytes | undefined>,
  judge: (nal: Buffer | null) => T,
): Promise<T[]> {
  return mapPackets(path, layout, at, (read) => judge(read && firstSliceIn(read, layout, lengthSize)));
}

function firstSliceIn(read: ReadLeading, layout: Layout, lengthSize: number | null): Buffer | null {
  const [few, more] = READS[layout];
  const bytes = read(few);
  const nal = bytes && firstSlice(bytes, lengthSize);
  // h264.ts reads at most a slice's first 32 bytes: a unit cut shorter is read again with more.
  if (nal && nal.length >= 32) return nal;
  const again = read(more);
  return (again && firstSlice(again, lengthSize)) ?? nal;
}

/**
 * See {@link ReadLeading}. `stripped`: a Matroska file's header stripping, by track number
 * ({@link strippedHeaders}).
 */
function leadingBytes(
  fd: number,
  layout: Layout,
  at: PacketBytes,
  want: number,
  stripped?: Map<number, Buffer | null>,
): Buffer | null {
  const header = layout === 'block' ? BLOCK_HEADER_MAX : 0;
  const length = layout === 'transport' || layout === 'program' ? want : Math.min(at.size, want) + header;
  const buf = Buffer.allocUnsafe(length);
  const data = buf.subarray(0, readSync(fd, buf, 0, length, at.pos));
  if (layout === 'sample') return data;
  if (layout === 'transport') return pesPayload(data);
  if (layout === 'program') return programAccessUnit(data);
  const skip = blockHeader(data);
  if (skip === null) return null;
  // The listed size is the frame's as demuxed, the stripped bytes put back in front.
  // The block's track number: an EBML variable-size integer, its length marker taken off.
  const width = skip - 3;
  const track = width <= 4 ? stripped?.get(data.readUIntBE(0, width) - 2 ** (7 * width)) : undefined;
  if (track === null) return null;
  const frame = data.subarray(skip, skip + Math.min(at.size, want) - (track?.length ?? 0));
  return track?.length ? Buffer.concat([track, frame]) : frame;
}

/** A Matroska block header's longest: an 8-byte track number, the timecode, the flags. */
const BLOCK_HEADER_MAX = 8 + 3;

/**
 * The length of the Matroska block header `data` starts with (the track number as an EBML
 * variable-size integer, a 16-bit timecode, a flags byte); null for a laced block (several frames,
 * each with its own size) or anything unreadable.
 */
export function blockHeader(data: Buffer): number | null {
  const first = data[0];
  if (first === undefined || first === 0) return null;
  const length = Math.clz32(first) - 23; // leading zeros of the byte, plus one
  const flags = data[length + 2];
  return flags === undefined || (flags & 0x06) !== 0 ? null : length + 3;
}

/**
 * The elementary stream bytes of the PES packet starting at the first transport packet of `data`
 * (payload_unit_start set), up to the next PES packet of its PID or the end of `data`.
 */
export function pesPayload(bytes: Buffer): Buffer | null {
  // M2TS: each 188-byte packet follows a 4-byte timecode (the position names the timecode).
  const m2ts = bytes[0] !== 0x47 && bytes[4] === 0x47 && bytes[196] === 0x47;
  const data = m2ts ? bytes.subarray(4) : bytes;
  const stride = m2ts ? 192 : 188;
  if (data[0] !== 0x47 || !((data[1] as number) & 0x40)) return null;
  const pid = (((data[1] as number) & 0x1f) << 8) | (data[2] as number);
  const parts: Buffer[] = [];
  for (let off = 0; off + 188 <= data.length; off += stride) {
    if (data[off] !== 0x47) break;
    const b1 = data[off + 1] as number;
    if ((((b1 & 0x1f) << 8) | (data[off + 2] as number)) !== pid) continue;
    if (off > 0 && b1 & 0x40) break; // the next PES packet
    const control = ((data[off + 3] as number) >> 4) & 3;
    const start = off + 4 + (control & 2 ? 1 + (data[off + 4] as number) : 0);
    if (control & 1 && start < off + 188) parts.push(data.subarray(start, off + 188));
  }
  const pes = Buffer.concat(parts);
  // PES header: start code prefix, stream id, length, two flag bytes, header data length.
  if (pes.length < 9 || pes[0] !== 0 || pes[1] !== 0 || pes[2] !== 1) return null;
  return pes.subarray(9 + (pes[8] as number));
}

/** Bytes read for a Matroska file's track headers: they come before its first cluster. */
const TRACKS_READ = 256 * 1024;

/**
 * A Matroska file's content encodings, by track number: the leading bytes header stripping
 * (ContentCompAlgo 3) leaves out of each of the track's frames and stores once in its header
 * (empty when none); null for a track whose frames are stored otherwise (compressed, encrypted),
 * whose bytes cannot be read in place. Tracks not found (no Tracks element before the first
 * cluster in the first {@link TRACKS_READ} bytes) are absent: their blocks are read as stored.
 */
export function strippedHeaders(fd: number): Map<number, Buffer | null> {
  const buf = Buffer.allocUnsafe(TRACKS_READ);
  const data = buf.subarray(0, readSync(fd, buf, 0, TRACKS_READ, 0));
  const tracks = new Map<number, Buffer | null>();
  const segment = ebmlChildren(data, 0, data.length).find((e) => e.id === SEGMENT);
  for (const e of segment ? ebmlChildren(data, segment.start, segment.end) : []) {
    if (e.id === CLUSTER) break;
    if (e.id !== TRACKS) continue;
    for (const entry of ebmlChildren(data, e.start, e.end)) {
      if (entry.id !== TRACK_ENTRY) continue;
      const fields = ebmlChildren(data, entry.start, entry.end);
      const number = fields.find((f) => f.id === TRACK_NUMBER);
      if (!number || number.end <= number.start || number.end - number.start > 4) continue;
      tracks.set(data.readUIntBE(number.start, number.end - number.start), trackStripping(data, fields));
    }
  }
  return tracks;
}

/** See {@link strippedHeaders}: what a TrackEntry's ContentEncodings do to its frames. */
function trackStripping(data: Buffer, fields: Ebml[]): Buffer | null {
  const encodings = fields.find((f) => f.id === CONTENT_ENCODINGS);
  let prefix = Buffer.alloc(0);
  for (const encoding of encodings ? ebmlChildren(data, encodings.start, encodings.end) : []) {
    if (encoding.id !== CONTENT_ENCODING) continue;
    const parts = ebmlChildren(data, encoding.start, encoding.end);
    const uint = (id: number, otherwise: number) => {
      const f = parts.find((p) => p.id === id);
      if (!f) return otherwise;
      // An empty unsigned integer is 0; one wider than any valid value is read as invalid.
      const width = f.end - f.start;
      return width === 0 ? 0 : width <= 4 ? data.readUIntBE(f.start, width) : -1;
    };
    // Scope bit 1: the frames (others: the codec's private data, which no block holds).
    if (!(uint(CONTENT_ENCODING_SCOPE, 1) & 1)) continue;
    // Type 0 is compression; 1 is encryption.
    const compression = parts.find((p) => p.id === CONTENT_COMPRESSION);
    if (uint(CONTENT_ENCODING_TYPE, 0) !== 0 || !compression) return null;
    const settings = ebmlChildren(data, compression.start, compression.end);
    const algo = settings.find((p) => p.id === CONTENT_COMP_ALGO);
    // ContentCompAlgo defaults to 0 (zlib); 3 is header stripping.
    if (!algo || algo.end - algo.start !== 1 || data[algo.start] !== 3) return null;
    // Several encodings are applied in order; two strippings of frames are not read here.
    if (prefix.length) return null;
    const stripped = settings.find((p) => p.id === CONTENT_COMP_SETTINGS);
    prefix = stripped ? Buffer.from(data.subarray(stripped.start, stripped.end)) : prefix;
  }
  return prefix;
}

const SEGMENT = 0x18538067;
const CLUSTER = 0x1f43b675;
const TRACKS = 0x1654ae6b;
const TRACK_ENTRY = 0xae;
const TRACK_NUMBER = 0xd7;
const CONTENT_ENCODINGS = 0x6d80;
const CONTENT_ENCODING = 0x6240;
const CONTENT_ENCODING_SCOPE = 0x5032;
const CONTENT_ENCODING_TYPE = 0x5033;
const CONTENT_COMPRESSION = 0x5034;
const CONTENT_COMP_ALGO = 0x4254;
const CONTENT_COMP_SETTINGS = 0x4255;

/** An EBML element: its ID (length marker kept) and where its data is. */
interface Ebml {
  id: number;
  start: number;
  end: number;
}

/**
 * The elements of `data` between `from` and `to`, as far as they can be read: an element of
 * unknown size (a live-written Segment or Cluster) reaches `to`; one that runs past `data` is
 * cut at its end.
 */
function ebmlChildren(data: Buffer, from: number, to: number): Ebml[] {
  const out: Ebml[] = [];
  const width = (at: number) => (data[at] ? Math.clz32(data[at] as number) - 23 : 9);
  for (let at = from; at < to; ) {
    const idWidth = width(at);
    const sizeAt = at + idWidth;
    const sizeWidth = width(sizeAt);
    if (idWidth > 4 || sizeWidth > 8 || sizeAt + sizeWidth > data.length) break;
    const id = data.readUIntBE(at, idWidth);
    let size = (data[sizeAt] as number) & (0xff >> sizeWidth);
    let unknown = size === 0xff >> sizeWidth;
    for (let i = 1; i < sizeWidth; i++) {
      size = size * 256 + (data[sizeAt + i] as number);
      unknown &&= data[sizeAt + i] === 0xff;
    }
    const start = sizeAt + sizeWidth;
    const end = unknown ? to : Math.min(start + size, to);
    out.push({ id, start, end });
    at = end;
  }
  return out;
}

/** A program stream's H.264 video stream IDs (PES stream_id 0xe0 to 0xef). */
const isVideoStream = (id: number | undefined) => id !== undefined && id >= 0xe0 && id <= 0xef;

/**
 * The elementary stream bytes of the H.264 access unit that starts in the PES packet `bytes`
 * start with (an MPEG program stream: packs, their headers, and other streams' PES packets
 * between this stream's), from its first NAL unit on; null when that PES packet is not whole in
 * `bytes`, or not exactly one access unit starts in it (h264.ts `accessUnitStart`).
 */
export function programAccessUnit(bytes: Buffer): Buffer | null {
  const stream = bytes[3];
  if (bytes[0] !== 0 || bytes[1] !== 0 || bytes[2] !== 1 || !isVideoStream(stream)) return null;
  const parts: Buffer[] = [];
  let firstPayload: number | null = null;
  for (let off = 0; off + 6 <= bytes.length; ) {
    if (bytes[off] !== 0 || bytes[off + 1] !== 0 || bytes[off + 2] !== 1) break;
    const code = bytes[off + 3] as number;
    if (code === 0xba) {
      // A pack header: MPEG-2 (14 bytes and stuffing) or MPEG-1 (12 bytes).
      const kind = (bytes[off + 4] as number) >> 6;
      if (kind === 1 && off + 14 <= bytes.length) off += 14 + ((bytes[off + 13] as number) & 7);
      else if ((bytes[off + 4] as number) >> 4 === 2) off += 12;
      else break;
      continue;
    }
    // Anything but a system header or a PES packet (0xbb on) ends the read; 0xb9 ends the stream.
    if (code < 0xbb) break;
    const end = off + 6 + bytes.readUInt16BE(off + 4);
    if (code === stream) {
      const at = pesDataStart(bytes, off);
      if (at === null) break;
      parts.push(bytes.subarray(at, Math.min(end, bytes.length)));
      if (firstPayload === null) {
        if (end > bytes.length) return null;
        firstPayload = end - at;
      }
    }
    off = end;
  }
  if (firstPayload === null) return null;
  const es = Buffer.concat(parts);
  const start = accessUnitStart(es, firstPayload);
  return start === null ? null : es.subarray(start);
}

/**
 * Where the data of the PES packet at `off` starts, after its header: MPEG-2's (two flag bytes
 * and the header data length) or MPEG-1's (stuffing, buffer size, timestamps); null when beyond
 * `bytes` or unreadable.
 */
function pesDataStart(bytes: Buffer, off: number): number | null {
  let at = off + 6;
  if (((bytes[at] ?? 0) & 0xc0) === 0x80) {
    const header = bytes[at + 2];
    return header === undefined ? null : at + 3 + header;
  }
  while (bytes[at] === 0xff && at < off + 6 + 16) at++;
  if (((bytes[at] ?? 0) & 0xc0) === 0x40) at += 2;
  const flags = (bytes[at] ?? 0) >> 4;
  if (flags === 2) at += 5;
  else if (flags === 3) at += 10;
  else if (bytes[at] === 0x0f) at += 1;
  else return null;
  return at <= bytes.length ? at : null;
}
