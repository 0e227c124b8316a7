/**
 * A minimal H.264 writer (Annex B byte stream) that codes every frame as two field pictures
 * (PAFF: SPS `frame_mbs_only_flag` 0 and `mb_adaptive_frame_field_flag` 0, every slice
 * `field_pic_flag` 1), the way broadcast 1080i and AVCHD camcorders write interlaced H.264, for
 * fixtures: no encoder on this machine writes field pictures (Debian's x264 writes frame pictures
 * or MBAFF only, whatever `--tff`/`--fake-interlaced`/`--pulldown` say; openh264 has no interlace).
 *
 * Main profile, CAVLC, one slice per field, every macroblock I_PCM: raw samples, no transform or
 * entropy coding of residuals, so the writer stays small and a decode that reaches a picture shows
 * it exactly (deblocking off). Frames are typed I, P and B in closed GOPs of 15 coded in decode
 * order ({@link GOP_DECODE_ORDER}), so presentation order differs from decode order as in a real
 * long-GOP stream; the P and B slices carry intra (PCM) macroblocks only. Top field first. A GOP's
 * I frame is an IDR top field and a P bottom field: an IDR picture is one field, and the second
 * field of an IDR frame is a non-IDR reference field (nal_unit_type 1) predicting from the first,
 * as broadcast encoders write it. I and P frames are references (sliding window, two frames), B
 * frames are not; `frame_num` counts reference frames since the IDR, POC (type 0) is 2 x the
 * display index in the GOP, + 1 for the bottom field.
 */

/** A field's samples: plane 0 luma (width x height/2), 1 Cb and 2 Cr (width/2 x height/4), 8 bit. */
export type FieldSample = (plane: 0 | 1 | 2, x: number, y: number) => number;

export interface PaffStream {
  /** Multiples of 16 and 32. */
  width: number;
  height: number;
  frames: number;
  /** The samples of field `field` (0 top, 1 bottom) of frame `frame` (display order). */
  field: (frame: number, field: 0 | 1) => FieldSample;
}

/**
 * Frames of a GOP in decode order (display indices in the GOP): I 0, then each P (3, 6, 9, 12,
 * 14) before the B frames it closes. A frame is a B frame when a frame shown after it was decoded
 * before it; in a GOP cut short by the end of the stream, its missing frames are left out and the
 * frames that no longer wait for a later one become P frames.
 */
export const GOP_DECODE_ORDER = [0, 3, 1, 2, 6, 4, 5, 9, 7, 8, 12, 10, 11, 14, 13] as const;

/** One coded frame in decode order: its display index, whether it is a B frame, its frame_num. */
export interface CodedFrame {
  display: number;
  /** Display index in its GOP (for POC). */
  inGop: number;
  type: 'I' | 'P' | 'B';
  frameNum: number;
}

/** The stream's frames in decode order. */
export function decodeOrder(frames: number): CodedFrame[] {
  const out: CodedFrame[] = [];
  for (let g = 0; g < frames; g += GOP_DECODE_ORDER.length) {
    let latest = -1;
    let refs = 0;
    for (const k of GOP_DECODE_ORDER) {
      if (g + k >= frames) continue;
      const type = k === 0 ? 'I' : k < latest ? 'B' : 'P';
      out.push({ display: g + k, inGop: k, type, frameNum: refs % MAX_FRAME_NUM });
      if (type !== 'B') refs++;
      latest = Math.max(latest, k);
    }
  }
  return out;
}

const LOG2_MAX_FRAME_NUM = 4;
const MAX_FRAME_NUM = 1 << LOG2_MAX_FRAME_NUM;
const LOG2_MAX_POC_LSB = 8;

/** Bits, most significant first, into bytes; ue/se are the spec's Exp-Golomb codes. */
class BitWriter {
  private bytes = Buffer.alloc(1 << 16);
  private length = 0;
  private acc = 0;
  private n = 0;

  private push(byte: number): void {
    if (this.length === this.bytes.length) {
      const grown = Buffer.alloc(this.bytes.length * 2);
      this.bytes.copy(grown);
      this.bytes = grown;
    }
    this.bytes[this.length++] = byte;
  }

  u(value: number, count: number): void {
    for (let i = count - 1; i >= 0; i--) {
      this.acc = (this.acc << 1) | (Math.floor(value / 2 ** i) & 1);
      if (++this.n === 8) {
        this.push(this.acc);
        this.acc = 0;
        this.n = 0;
      }
    }
  }

  ue(value: number): void {
    const bits = 32 - Math.clz32(value + 1);
    this.u(0, bits - 1);
    this.u(value + 1, bits);
  }

  se(value: number): void {
    this.ue(value > 0 ? 2 * value - 1 : -2 * value);
  }

  /** Writes zero bits up to the next byte boundary (pcm_alignment_zero_bit). */
  align(): void {
    while (this.n) this.u(0, 1);
  }

  /** A byte-aligned sample. */
  byte(value: number): void {
    this.push(value);
  }

  /** rbsp_trailing_bits, then the RBSP. */
  done(): Buffer {
    this.u(1, 1);
    this.align();
    return this.bytes.subarray(0, this.length);
  }
}

/** A NAL unit with its 4-byte start code, emulation prevention bytes inserted into the RBSP. */
function nal(refIdc: number, type: number, rbsp: Buffer): Buffer {
  const out = Buffer.alloc(5 + rbsp.length + Math.ceil(rbsp.length / 2));
  out.writeUInt32BE(1, 0);
  out[4] = (refIdc << 5) | type;
  let at = 5;
  let zeros = 0;
  for (const b of rbsp) {
    if (zeros === 2 && b <= 3) {
      out[at++] = 3;
      zeros = 0;
    }
    out[at++] = b;
    zeros = b === 0 ? zeros + 1 : 0;
  }
  return out.subarray(0, at);
}

/** Main profile, level 3, 4:2:0, field pictures only, 25 fps (VUI), one frame of reordering. */
function sps(width: number, height: number): Buffer {
  const w = new BitWriter();
  w.u(77, 8); // profile_idc: Main
  w.u(0, 8); // constraint flags
  w.u(30, 8); // level_idc 3.0 (frame_mbs_only_flag 0 is allowed from 2.1 to 4.1)
  w.ue(0); // seq_parameter_set_id
  w.ue(LOG2_MAX_FRAME_NUM - 4);
  w.ue(0); // pic_order_cnt_type
  w.ue(LOG2_MAX_POC_LSB - 4);
  w.ue(2); // max_num_ref_frames
  w.u(0, 1); // gaps_in_frame_num_value_allowed_flag
  w.ue(width / 16 - 1);
  w.ue(height / 32 - 1); // pic_height_in_map_units_minus1: a map unit is a field macroblock row
  w.u(0, 1); // frame_mbs_only_flag
  w.u(0, 1); // mb_adaptive_frame_field_flag
  w.u(1, 1); // direct_8x8_inference_flag (must be 1 without frame_mbs_only)
  w.u(0, 1); // frame_cropping_flag
  w.u(1, 1); // vui_parameters_present_flag
  w.u(1, 1); // aspect_ratio_info_present_flag
  w.u(1, 8); // aspect_ratio_idc 1: square samples
  w.u(0, 3); // overscan, video signal type, chroma location: absent
  w.u(1, 1); // timing_info_present_flag
  w.u(1, 32); // num_units_in_tick
  w.u(50, 32); // time_scale: 50 fields (ticks) a second, 25 frames
  w.u(1, 1); // fixed_frame_rate_flag
  w.u(0, 2); // no NAL or VCL HRD
  w.u(0, 1); // pic_struct_present_flag
  w.u(1, 1); // bitstream_restriction_flag
  w.u(1, 1); // motion_vectors_over_pic_boundaries_flag
  w.ue(0); // max_bytes_per_pic_denom
  w.ue(0); // max_bits_per_mb_denom
  w.ue(16); // log2_max_mv_length_horizontal
  w.ue(16); // log2_max_mv_length_vertical
  w.ue(1); // max_num_reorder_frames
  w.ue(2); // max_dec_frame_buffering
  return nal(3, 7, w.done());
}

/** CAVLC, one reference per list by default, deblocking controlled by the slice. */
function pps(): Buffer {
  const w = new BitWriter();
  w.ue(0); // pic_parameter_set_id
  w.ue(0); // seq_parameter_set_id
  w.u(0, 1); // entropy_coding_mode_flag: CAVLC
  w.u(0, 1); // bottom_field_pic_order_in_frame_present_flag
  w.ue(0); // num_slice_groups_minus1
  w.ue(0); // num_ref_idx_l0_default_active_minus1
  w.ue(0); // num_ref_idx_l1_default_active_minus1
  w.u(0, 1); // weighted_pred_flag
  w.u(0, 2); // weighted_bipred_idc
  w.se(0); // pic_init_qp_minus26
  w.se(0); // pic_init_qs_minus26
  w.se(0); // chroma_qp_index_offset
  w.u(1, 1); // deblocking_filter_control_present_flag
  w.u(0, 1); // constrained_intra_pred_flag
  w.u(0, 1); // redundant_pic_cnt_present_flag
  return nal(3, 8, w.done());
}

/** An access unit delimiter; primary_pic_type 2: the picture's slices may be I, P or B. */
function aud(): Buffer {
  const w = new BitWriter();
  w.u(2, 3);
  return nal(0, 9, w.done());
}

const SLICE_TYPE = { P: 0, B: 1, I: 2 } as const;
/** mb_type of I_PCM: 25 among the intra types, which follow 5 P types and 23 B types. */
const I_PCM = { I: 25, P: 5 + 25, B: 23 + 25 } as const;

interface FieldPicture {
  idr: boolean;
  idrPicId: number;
  ref: boolean;
  type: 'I' | 'P' | 'B';
  frameNum: number;
  bottom: boolean;
  pocLsb: number;
}

/** One field picture: a slice of all its macroblocks, each I_PCM. */
function slice(p: FieldPicture, width: number, height: number, sample: FieldSample): Buffer {
  const w = new BitWriter();
  w.ue(0); // first_mb_in_slice
  w.ue(SLICE_TYPE[p.type]);
  w.ue(0); // pic_parameter_set_id
  w.u(p.frameNum, LOG2_MAX_FRAME_NUM);
  w.u(1, 1); // field_pic_flag
  w.u(p.bottom ? 1 : 0, 1); // bottom_field_flag
  if (p.idr) w.ue(p.idrPicId);
  w.u(p.pocLsb, LOG2_MAX_POC_LSB);
  if (p.type === 'B') w.u(1, 1); // direct_spatial_mv_pred_flag
  if (p.type !== 'I') {
    // One reference field per list: a field slice's default would be two, and the IDR frame's
    // P field has only its first field to refer to.
    w.u(1, 1); // num_ref_idx_active_override_flag
    w.ue(0);
    if (p.type === 'B') w.ue(0);
    w.u(0, 1); // ref_pic_list_modification_flag_l0
    if (p.type === 'B') w.u(0, 1); // ref_pic_list_modification_flag_l1
  }
  if (p.ref) {
    // IDR: no_output_of_prior_pics_flag, long_term_reference_flag; else
    // adaptive_ref_pic_marking_mode_flag 0, the sliding window.
    w.u(0, p.idr ? 2 : 1);
  }
  w.se(0); // slice_qp_delta
  w.ue(1); // disable_deblocking_filter_idc: off, so the samples are shown as written
  for (let my = 0; my < height / 32; my++) {
    for (let mx = 0; mx < width / 16; mx++) {
      if (p.type !== 'I') w.ue(0); // mb_skip_run
      w.ue(I_PCM[p.type]);
      w.align();
      for (let y = 0; y < 16; y++) for (let x = 0; x < 16; x++) w.byte(sample(0, 16 * mx + x, 16 * my + y));
      for (const plane of [1, 2] as const)
        for (let y = 0; y < 8; y++) for (let x = 0; x < 8; x++) w.byte(sample(plane, 8 * mx + x, 8 * my + y));
    }
  }
  return nal(p.ref ? 2 : 0, p.idr ? 5 : 1, w.done());
}

/** The elementary stream (.264), in decode order, each field an access unit (AUD first). */
export function encodePaffStream(s: PaffStream): Buffer {
  const { width, height } = s;
  if (width % 16 || height % 32) throw new Error('encodePaffStream: width % 16 and height % 32 must be 0');
  const units: Buffer[] = [];
  let idrs = 0;
  for (const f of decodeOrder(s.frames)) {
    for (const bottom of [false, true]) {
      const idr = f.type === 'I' && !bottom;
      units.push(aud());
      if (idr) units.push(sps(width, height), pps());
      const picture: FieldPicture = {
        idr,
        idrPicId: idrs % 2,
        ref: f.type !== 'B',
        type: f.type === 'I' && bottom ? 'P' : f.type,
        frameNum: f.frameNum,
        bottom,
        pocLsb: (2 * f.inGop + (bottom ? 1 : 0)) % (1 << LOG2_MAX_POC_LSB),
      };
      units.push(slice(picture, width, height, s.field(f.display, bottom ? 1 : 0)));
    }
    if (f.type === 'I') idrs++;
  }
  return Buffer.concat(units);
}
