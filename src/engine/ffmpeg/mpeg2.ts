/**
 * What the fallback reads of an MPEG-2 video packet itself (FFmpeg's tools do not list it per
 * packet): the one field picture it holds, as some MP4 muxers store field-coded MPEG-2 (each field
 * its own sample). The rule: fixtures/vectors/mpeg2-picture.json; native:
 * crates/vidsheet-core/src/video/fields.rs `mpeg2_lone_field`.
 */
import type { SliceInfo } from './h264.js';
import type { ReadLeading } from './leading-bytes.js';

/** Bytes read first: a packet's headers (sequence, GOP, picture, its extension) fit in them. */
const HEADERS = 4096;
const PICTURE = Buffer.from([0, 0, 1, 0x00]);
const EXTENSION = Buffer.from([0, 0, 1, 0xb5]);

/**
 * The field an MPEG-2 packet holding exactly one picture that is a field holds, with its
 * temporal_reference as `frameNum`; null for a frame picture, a packet of two pictures or anything
 * unreadable (fixtures/vectors/mpeg2-picture.json).
 */
export function mpeg2LoneField(data: Buffer): SliceInfo | null {
  const picture = data.indexOf(PICTURE);
  if (picture < 0 || data.indexOf(PICTURE, picture + 4) >= 0) return null;
  const ext = codingExtension(data, picture);
  if (ext < 0 || ext + 7 > data.length) return null;
  const structure = (data[ext + 6] as number) & 3;
  if (structure !== 1 && structure !== 2) return null;
  const frameNum = ((data[picture + 4] as number) << 2) | ((data[picture + 5] as number) >> 6);
  return { idr: false, frameNum, field: structure === 1 ? 'top' : 'bottom' };
}

/** Where the first picture coding extension (identifier 8) after the picture header starts; -1: none. */
function codingExtension(data: Buffer, picture: number): number {
  let ext = data.indexOf(EXTENSION, picture + 4);
  while (ext >= 0 && ext + 4 < data.length && (data[ext + 4] as number) >> 4 !== 8)
    ext = data.indexOf(EXTENSION, ext + 4);
  return ext;
}

/**
 * mpeg2LoneField over a packet read in place: a packet whose first picture reads as a frame in
 * its leading bytes is settled by them; any other is read whole.
 */
export function readLoneField(read: ReadLeading): SliceInfo | null {
  const head = read(HEADERS);
  if (!head) return null;
  const picture = head.indexOf(PICTURE);
  const ext = picture < 0 ? -1 : codingExtension(head, picture);
  if (ext >= 0 && ext + 7 <= head.length && ![1, 2].includes((head[ext + 6] as number) & 3)) return null;
  if (head.length < HEADERS) return mpeg2LoneField(head);
  const whole = read(Number.MAX_SAFE_INTEGER);
  return whole && mpeg2LoneField(whole);
}
