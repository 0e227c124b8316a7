/**
 * What a packet's NAL unit headers say, read in place from the file (MP4/MOV, length-prefixed
 * H.264/HEVC): whether it is a reference picture, and whether it is a true random-access point.
 * Only hints: where they cannot be told they are undefined, and the extraction never trusts them
 * for a frame's identity (see extract.ts).
 */
import { open } from 'node:fs/promises';
import type { VideoDetails } from './media.js';
import type { Packets } from './packets.js';

export interface PictureHint {
  /**
   * A reference picture (H.264 nal_ref_idc, HEVC sub-layer non-reference types), for
   * `-skip_frame noref`: the decoder decides what it skips, and a target it skipped is extracted
   * again without skipping, so a wrong hint costs time, never a wrong frame.
   */
  reference?: boolean;
  /**
   * Decoding can start here and every later picture is right: an H.264 IDR, an HEVC IRAP (IDR,
   * BLA, CRA: FFmpeg drops a CRA's leading RASL pictures after a seek). False for an intra
   * picture that is none of these (a sync sample in name only: later pictures may still
   * reference pictures before it).
   */
  randomAccess?: boolean;
}

/** Hints for the packets at `pts`; empty hints where the container or codec do not allow reading. */
export async function pictureHints(
  path: string,
  d: VideoDetails,
  packets: Packets,
  pts: bigint[],
): Promise<PictureHint[]> {
  const nal = d.nal;
  if (!nal) return pts.map(() => ({}));
  const file = await open(path, 'r');
  try {
    const header = Buffer.alloc(nal.lengthSize + 2);
    const hints: PictureHint[] = [];
    for (const p of pts) {
      const at = packets.bytes.get(p);
      const hint: PictureHint = {};
      let reference: boolean | undefined;
      // Walk the length-prefixed NAL units (parameter sets, SEI, ...) up to the first slice.
      for (let off = 0, units = 0; at && reference === undefined && units < 16; units++) {
        if (off + header.length > at.size) break;
        const { bytesRead } = await file.read(header, 0, header.length, at.pos + off);
        if (bytesRead < header.length) break;
        const length = header.readUIntBE(0, nal.lengthSize);
        const first = header[nal.lengthSize] as number;
        if (nal.codec === 'h264') {
          const type = first & 0x1f;
          if (type === 1 || type === 5) {
            reference = ((first >> 5) & 3) !== 0;
            hint.randomAccess = type === 5;
          }
        } else {
          const type = (first >> 1) & 0x3f;
          // VCL types 0..31; the even ones up to 14 are sub-layer non-reference pictures; 16..23
          // are IRAP pictures.
          if (type <= 31) {
            reference = !(type <= 14 && type % 2 === 0);
            hint.randomAccess = type >= 16 && type <= 23;
          }
        }
        off += nal.lengthSize + length;
      }
      // A field pair's second field may differ from the first: only a frame's own slice counts.
      if (nal.progressive) hint.reference = reference;
      hints.push(hint);
    }
    return hints;
  } finally {
    await file.close();
  }
}
