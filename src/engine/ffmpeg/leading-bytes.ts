/**
 * A packet's leading bytes, read in place from the file at the position ffprobe lists for it: an
 * H.264 packet's first slice NAL unit (h264.ts reads its header), an MPEG-2 packet's picture
 * headers (mpeg2.ts). MP4/MOV store a sample contiguously; an MPEG-TS
 * packet's position is the first 188-byte transport packet of its PES packet, whose payload
 * continues in later transport packets of the same PID (others interleave). Anything else, or
 * bytes that do not look like what is expected, gives null: the caller then decides as without.
 */
import { closeSync, openSync, readSync } from 'node:fs';
import { firstSlice } from './h264.js';

/**
 * How many bytes are read at a packet's position (MP4: of the sample; TS: of the file): first a
 * few, which hold the first slice header of nearly every packet (after an access unit delimiter);
 * then more, for a packet whose parameter sets and SEI come first. A long interlaced broadcast is
 * listed field by field, so the first read is kept small.
 */
const READS = { sample: [512, 4096], block: [512, 4096], transport: [188 * 4, 188 * 48] } as const;

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
 * transport packet of an MPEG-TS PES packet.
 */
export type Layout = 'sample' | 'block' | 'transport';

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
    const out: T[] = [];
    for (const [i, packet] of at.entries()) {
      if (i % READS_PER_TURN === READS_PER_TURN - 1) await new Promise(setImmediate);
      out.push(judge(packet ? (want) => leadingBytes(fd, layout, packet, want) : null));
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

/** See {@link ReadLeading}. */
function leadingBytes(fd: number, layout: Layout, at: PacketBytes, want: number): Buffer | null {
  const header = layout === 'block' ? BLOCK_HEADER_MAX : 0;
  const length = layout === 'transport' ? want : Math.min(at.size, want) + header;
  const buf = Buffer.allocUnsafe(length);
  const data = buf.subarray(0, readSync(fd, buf, 0, length, at.pos));
  if (layout === 'sample') return data;
  if (layout === 'transport') return pesPayload(data);
  const skip = blockHeader(data);
  return skip === null ? null : data.subarray(skip, skip + Math.min(at.size, want));
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
