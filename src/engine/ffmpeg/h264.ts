/**
 * What the fallback reads of H.264 itself, from bytes (FFmpeg's tools do not list it per packet):
 * the stream's sequence parameter set (from the extradata ffprobe prints, avcC or Annex B) and the
 * first fields of a packet's first slice header: whether it is an IDR picture, and whether it is a
 * field (PAFF) and which. The native engine's reader is crates/vidsheet-core/src/video/h264.rs.
 * Everything returns null on data it cannot read: these are facts for decisions that fall back
 * safely (a packet taken for a frame, a seek judged as before), never a picture's identity.
 */

/** The sequence parameter set fields the readers use (H.264 7.3.2.1.1). */
export interface Sps {
  /** `max_num_ref_frames`: reference frames a picture may predict from (src/engine/reach.ts). */
  maxNumRefFrames: number;
  /** Bits of a slice header's `frame_num`. */
  log2MaxFrameNum: number;
  /** A slice header then carries `colour_plane_id` (4:4:4 coded as three planes). */
  separateColourPlane: boolean;
  /** Pictures may be fields (PAFF) or frames of field macroblock pairs (MBAFF) when false. */
  frameMbsOnly: boolean;
}

/** What a packet's first slice header says. */
export interface SliceInfo {
  idr: boolean;
  frameNum: number;
  /** A field picture: 'top' or 'bottom'; null for a frame. */
  field: 'top' | 'bottom' | null;
}

/** The bytes of ffprobe's hexdump (`00000000: 0164 001e ...  .d..`), as `-show_data` prints them. */
export function fromHexdump(dump: string): Buffer {
  const hex = dump
    .split('\n')
    .map((line) => /^[0-9a-f]{8}: ((?:[0-9a-f]{2,4} ?)+)/.exec(line)?.[1] ?? '')
    .join('')
    .replaceAll(' ', '');
  return Buffer.from(hex, 'hex');
}

/** The first SPS of avcC or Annex B extradata; null when there is none or it cannot be read. */
export function extradataSps(extradata: Buffer): Sps | null {
  let nal: Buffer | undefined;
  if (extradata[0] === 1) {
    // avcC: version, profile, compat, level, length size, then SPS count and (u16 length, SPS)*.
    if (extradata.length < 8 || ((extradata[5] as number) & 0x1f) === 0) return null;
    nal = extradata.subarray(8, 8 + extradata.readUInt16BE(6));
  } else nal = annexBUnits(extradata).find((u) => ((u[0] ?? 0) & 0x1f) === 7);
  return nal ? parseSps(rbsp(nal)) : null;
}

/**
 * The first coded slice NAL unit (type 1 or 5, header byte first) of a packet's leading bytes:
 * length-prefixed (`lengthSize` bytes, MP4) or Annex B (null); the unit may be cut short.
 */
export function firstSlice(data: Buffer, lengthSize: number | null): Buffer | null {
  const isSlice = (u: Buffer) => u.length > 0 && [1, 5].includes((u[0] as number) & 0x1f);
  if (lengthSize === null) return annexBUnits(data).find(isSlice) ?? null;
  for (let at = 0; at + lengthSize < data.length; ) {
    const length = data.readUIntBE(at, lengthSize);
    const unit = data.subarray(at + lengthSize, at + lengthSize + length);
    if (isSlice(unit)) return unit;
    at += lengthSize + length;
  }
  return null;
}

/**
 * Where the one access unit that starts in the first `within` bytes of Annex B data `es` begins
 * (the offset of its first NAL unit's start code); null when none or several start there. An
 * access unit starts at an access unit delimiter, SPS, PPS, SEI or NAL unit type 14 to 18, or at
 * a slice of a new picture (first_mb_in_slice 0), whichever comes first after the last slice of
 * the previous picture (H.264 7.4.1.2.3). `es` may start anywhere: what comes before its first
 * slice is taken for an access unit's start, so a unit that began earlier is counted again and
 * the answer is null, never another unit's.
 */
export function accessUnitStart(es: Buffer, within: number): number | null {
  let found: number | null = null;
  // A slice was the last unit: what may start an access unit starts one.
  let afterSlice = true;
  for (let i = es.indexOf(START); i >= 0 && i < within; i = es.indexOf(START, i + 3)) {
    const header = es[i + 3];
    if (header === undefined) break;
    const type = header & 0x1f;
    const slice = type === 1 || type === 5;
    const opens =
      [6, 7, 8, 9, 14, 15, 16, 17, 18].includes(type) || (slice && ((es[i + 4] ?? 0) & 0x80) !== 0);
    if (opens && afterSlice) {
      if (found !== null) return null;
      found = i;
    }
    if (slice || opens) afterSlice = slice;
  }
  return found;
}

/** What a slice NAL unit (header byte first) says; null where its header cannot be read. */
export function sliceInfo(nal: Buffer, sps: Sps): SliceInfo | null {
  const b = new Bits(rbsp(nal.subarray(0, 32)), 8);
  if (b.ue() === null || b.ue() === null || b.ue() === null) return null; // first_mb, type, pps
  if (sps.separateColourPlane && b.bits(2) === null) return null; // colour_plane_id
  const frameNum = b.bits(sps.log2MaxFrameNum);
  if (frameNum === null) return null;
  let field: SliceInfo['field'] = null;
  if (!sps.frameMbsOnly) {
    const fieldPic = b.bit();
    if (fieldPic === null) return null;
    if (fieldPic === 1) {
      const bottom = b.bit();
      if (bottom === null) return null;
      field = bottom ? 'bottom' : 'top';
    }
  }
  return { idr: ((nal[0] as number) & 0x1f) === 5, frameNum, field };
}

/**
 * Which pictures are second fields (pairField over each packet's first slice in decode order; null:
 * not read): the second field's packet gives no picture of its own.
 */
export function secondFields(slices: Array<SliceInfo | null>): boolean[] {
  let open: SliceInfo | null = null;
  return slices.map((s) => {
    const paired = pairField(open, s);
    open = paired.open;
    return paired.second;
  });
}

/**
 * The field pairing rule, one packet's picture at a time in decode order: whether `picture` is the
 * second field of the pair `open` opened, and the field left open for the next packet (the rule:
 * fixtures/vectors/fields.json; native: crates/vidsheet-core/src/video/fields.rs `pair_field`).
 */
export function pairField(
  open: SliceInfo | null,
  picture: SliceInfo | null,
): { second: boolean; open: SliceInfo | null } {
  const second = !!(
    picture?.field &&
    open?.field &&
    open.field !== picture.field &&
    open.frameNum === picture.frameNum
  );
  return { second, open: picture?.field && !second ? picture : null };
}

/** The NAL units of Annex B data, each from its header byte to the end of the data. */
function annexBUnits(data: Buffer): Buffer[] {
  const units: Buffer[] = [];
  for (let i = data.indexOf(START); i >= 0; i = data.indexOf(START, i + 3)) units.push(data.subarray(i + 3));
  return units;
}
const START = Buffer.from([0, 0, 1]);

/** The NAL payload without emulation prevention bytes (00 00 03 -> 00 00). */
function rbsp(nal: Buffer): Buffer {
  const out: number[] = [];
  let zeros = 0;
  for (const b of nal) {
    if (zeros >= 2 && b === 3) {
      zeros = 0;
      continue;
    }
    zeros = b === 0 ? zeros + 1 : 0;
    out.push(b);
  }
  return Buffer.from(out);
}

/** An MSB-first bit reader; each read is null past the end of the data. */
class Bits {
  constructor(
    private readonly data: Buffer,
    private pos: number,
  ) {}

  bit(): number | null {
    const byte = this.data[this.pos >> 3];
    if (byte === undefined) return null;
    const bit = (byte >> (7 - (this.pos & 7))) & 1;
    this.pos++;
    return bit;
  }

  bits(n: number): number | null {
    let v = 0;
    for (let i = 0; i < n; i++) {
      const b = this.bit();
      if (b === null) return null;
      v = v * 2 + b;
    }
    return v;
  }

  /** Exp-Golomb unsigned. */
  ue(): number | null {
    let zeros = 0;
    for (;;) {
      const b = this.bit();
      if (b === null || zeros > 31) return null;
      if (b === 1) break;
      zeros++;
    }
    const rest = this.bits(zeros);
    return rest === null ? null : 2 ** zeros - 1 + rest;
  }

  se(): number | null {
    const k = this.ue();
    return k === null ? null : k % 2 === 1 ? (k + 1) / 2 : -(k / 2);
  }

  skipScalingList(size: number): boolean {
    let last = 8;
    let next = 8;
    for (let i = 0; i < size; i++) {
      if (next !== 0) {
        const delta = this.se();
        if (delta === null) return false;
        next = (((last + delta) % 256) + 256) % 256;
      }
      if (next !== 0) last = next;
    }
    return true;
  }
}

/** The fields of an SPS NAL unit (header byte first, unescaped) up to `frame_mbs_only_flag`. */
function parseSps(nal: Buffer): Sps | null {
  const b = new Bits(nal, 8);
  const profile = b.bits(8);
  if (profile === null || b.bits(16) === null || b.ue() === null) return null;
  let separateColourPlane = false;
  if ([100, 110, 122, 244, 44, 83, 86, 118, 128, 138, 139, 134, 135].includes(profile)) {
    const chroma = b.ue();
    if (chroma === null) return null;
    if (chroma === 3) separateColourPlane = b.bit() === 1;
    if (b.ue() === null || b.ue() === null || b.bit() === null) return null; // bit depths, bypass
    if (b.bit() === 1) {
      for (let i = 0; i < (chroma === 3 ? 12 : 8); i++)
        if (b.bit() === 1 && !b.skipScalingList(i < 6 ? 16 : 64)) return null;
    }
  }
  const log2 = b.ue();
  if (log2 === null || log2 > 12) return null;
  const pocType = b.ue();
  if (pocType === 0) {
    const log2PocLsb = b.ue();
    if (log2PocLsb === null || log2PocLsb > 12) return null;
  } else if (pocType === 1) {
    if (b.bit() === null || b.se() === null || b.se() === null) return null;
    const cycle = b.ue();
    if (cycle === null) return null;
    for (let i = 0; i < Math.min(cycle, 255); i++) if (b.se() === null) return null;
  } else if (pocType === null) return null;
  const maxNumRefFrames = b.ue();
  if (maxNumRefFrames === null) return null;
  b.bit(); // gaps_in_frame_num_value_allowed_flag
  b.ue(); // pic_width_in_mbs_minus1
  b.ue(); // pic_height_in_map_units_minus1
  const frameMbsOnly = b.bit();
  if (frameMbsOnly === null) return null;
  return {
    maxNumRefFrames,
    log2MaxFrameNum: log2 + 4,
    separateColourPlane,
    frameMbsOnly: frameMbsOnly === 1,
  };
}
