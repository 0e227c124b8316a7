/**
 * What the fallback reads of an MPEG-2 video packet itself (FFmpeg's tools do not list it per
 * packet): whether it holds one field picture, and which, as some MP4 muxers store field-coded
 * MPEG-2 (each field its own sample). The native engine's reader is
 * crates/vidsheet-core/src/video/fields.rs `mpeg2_lone_field`; the pairing rule is h264.ts
 * `secondFields`. Returns null on data it cannot read: the packet is then taken for a frame.
 */
import type { SliceInfo } from './h264.js';
import type { ReadLeading } from './leading-bytes.js';

/** Bytes read first: a packet's headers (sequence, GOP, picture, its extension) fit in them. */
const HEADERS = 4096;
const PICTURE = Buffer.from([0, 0, 1, 0x00]);
const EXTENSION = Buffer.from([0, 0, 1, 0xb5]);

/**
 * A packet's picture as the field pairing reads it: a lone field picture ('top' or 'bottom') with
 * its temporal_reference, which both fields of a frame share (ISO/IEC 13818-2 6.3.9), as
 * `frameNum`; a frame picture, or a packet holding both fields, as `field: null`.
 */
export function mpeg2Picture(read: ReadLeading): SliceInfo | null {
  const head = read(HEADERS);
  const picture = head?.indexOf(PICTURE) ?? -1;
  if (!head || picture < 0 || picture + 6 > head.length) return null;
  const frameNum = ((head[picture + 4] as number) << 2) | ((head[picture + 5] as number) >> 6);
  // The first extension after the picture header is its picture coding extension (identifier 8);
  // picture_structure is the low two bits of its third byte: 1 top field, 2 bottom, 3 frame.
  const ext = head.indexOf(EXTENSION, picture + 4);
  if (ext < 0 || ext + 7 > head.length || (head[ext + 4] as number) >> 4 !== 8) return null;
  const structure = (head[ext + 6] as number) & 3;
  if (structure !== 1 && structure !== 2) return { idr: false, frameNum, field: null };
  // A field: the packet may hold its frame's other field too (start codes are never emulated in
  // MPEG-2 data, so a second picture start code is a second picture).
  const whole = read(Number.MAX_SAFE_INTEGER);
  if (!whole || whole.indexOf(PICTURE, picture + 4) >= 0) return { idr: false, frameNum, field: null };
  return { idr: false, frameNum, field: structure === 1 ? 'top' : 'bottom' };
}
