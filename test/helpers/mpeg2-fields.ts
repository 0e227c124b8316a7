/**
 * A minimal MPEG-2 video encoder that writes every frame as two field pictures (ISO/IEC 13818-2
 * picture_structure top, then bottom), for fixtures: FFmpeg's mpeg2video encoder writes only frame
 * pictures (even with +ilme+ildct), and mjpegtools' mpeg2enc, the one field-picture encoder Debian
 * packages, crashes in field mode (`-I 2`, 2.1.0: a null reference picture in FieldME on the
 * first frame's second field).
 *
 * Every macroblock is intra coded with its DC coefficient only, so a picture is a mosaic of 8x8
 * blocks (8x16 in the frame: a field's block spans every other line). Pictures are typed I, P and
 * B in closed GOPs of 12 (I B B P B B P B B P B P) and coded in decode order, so the stream is
 * reordered like a real long-GOP one (a P or B picture may hold intra macroblocks only); an I
 * frame's second field is a P field, as broadcast encoders write it. No picture predicts from
 * another, so any decode that reaches a picture shows it exactly.
 */

/** A field's content on its block grid: luma per 8x8 block, chroma per macroblock. */
export interface FieldPicture {
  /** Luma (16..235) of block (column, row); columns `width / 8`, rows `height / 16`. */
  y: (col: number, row: number) => number;
  /** Cb and Cr (16..240) of macroblock (column, row); columns `width / 16`, rows `height / 32`. */
  cb: (col: number, row: number) => number;
  cr: (col: number, row: number) => number;
}

export interface FieldStream {
  width: number;
  height: number;
  frames: number;
  /** The content of field `field` (0 top, 1 bottom) of frame `frame` (display order). */
  picture: (frame: number, field: 0 | 1) => FieldPicture;
}

/** Frames of a GOP in decode order (display indices): refs at 0, 3, 6, 9, 11, each B after its refs. */
export const GOP_DECODE_ORDER = [0, 3, 1, 2, 6, 4, 5, 9, 7, 8, 11, 10] as const;
const GOP = GOP_DECODE_ORDER.length;
const REFS = new Set([3, 6, 9, 11]);

class BitWriter {
  private readonly bytes: number[] = [];
  private acc = 0;
  private n = 0;

  put(value: number, count: number): void {
    for (let i = count - 1; i >= 0; i--) {
      this.acc = (this.acc << 1) | ((value >>> i) & 1);
      if (++this.n === 8) {
        this.bytes.push(this.acc);
        this.acc = 0;
        this.n = 0;
      }
    }
  }

  code(bits: string): void {
    for (const c of bits) this.put(c === '1' ? 1 : 0, 1);
  }

  startCode(code: number): void {
    while (this.n) this.put(0, 1);
    this.put(0x000001, 24);
    this.put(code, 8);
  }

  done(): Buffer {
    while (this.n) this.put(0, 1);
    return Buffer.from(this.bytes);
  }
}

// dct_dc_size_luminance / _chrominance (tables B.12, B.13), for sizes 0..8 (8-bit samples).
const LUMA_DC = ['100', '00', '01', '101', '110', '1110', '11110', '111110', '1111110'];
const CHROMA_DC = ['00', '01', '10', '110', '1110', '11110', '111110', '1111110', '11111110'];

/** One intra block holding only its DC coefficient: its differential from the predictor, then EOB. */
function dcBlock(w: BitWriter, table: string[], diff: number): void {
  const size = diff === 0 ? 0 : 32 - Math.clz32(Math.abs(diff));
  w.code(table[size] as string);
  if (size) w.put(diff > 0 ? diff : diff + (1 << size) - 1, size);
  w.code('10'); // end of block (table B.14)
}

/** The elementary stream (.m2v), in decode order; width a multiple of 16, height of 32. */
export function encodeFieldStream(s: FieldStream): Buffer {
  const { width, height } = s;
  if (width % 16 || height % 32) throw new Error('encodeFieldStream: width % 16 and height % 32 must be 0');
  const w = new BitWriter();
  const mbCols = width / 16;
  const mbRows = height / 32; // macroblock rows of one field
  for (let g = 0; g < s.frames; g += GOP) {
    // Sequence header (25 fps, square pixels), sequence extension (Main@Main, interlaced 4:2:0),
    // a closed GOP.
    w.startCode(0xb3);
    for (const [v, n] of [
      [width, 12],
      [height, 12],
      [1, 4],
      [3, 4],
      [2500, 18],
      [1, 1],
      [112, 10],
      [0, 3],
    ])
      w.put(v as number, n as number);
    w.startCode(0xb5);
    for (const [v, n] of [
      [1, 4],
      [0x48, 8],
      [0, 1],
      [1, 2],
      [0, 16],
      [1, 1],
      [0, 8],
      [0, 1],
      [0, 7],
    ])
      w.put(v as number, n as number);
    w.startCode(0xb8);
    const second = g / 25;
    for (const [v, n] of [
      [0, 12],
      [1, 1],
      [Math.floor(second) % 60, 6],
      [g % 25, 6],
      [1, 1],
      [0, 1],
    ])
      w.put(v as number, n as number);
    for (const k of GOP_DECODE_ORDER) {
      const frame = g + k;
      if (frame >= s.frames) continue;
      const frameType = k === 0 ? 1 : REFS.has(k) ? 2 : 3;
      for (const field of [0, 1] as const) {
        const type = frameType === 1 && field === 1 ? 2 : frameType; // I frame: I field, then P field
        // Picture header: temporal reference, coding type, vbv_delay, then for P and B the
        // MPEG-1 vector fields (unused in MPEG-2: full_pel 0, f_code 7).
        w.startCode(0x00);
        w.put(k, 10);
        w.put(type, 3);
        w.put(0xffff, 16);
        if (type >= 2) w.put(7, 4);
        if (type === 3) w.put(7, 4);
        w.put(0, 1);
        // Picture coding extension: f_codes (15: unused), 8-bit DC, the field's structure, the
        // rest off (top_field_first and frame_pred_frame_dct are 0 in a field picture).
        w.startCode(0xb5);
        w.put(8, 4);
        for (const used of [type >= 2, type >= 2, type === 3, type === 3]) w.put(used ? 1 : 15, 4);
        w.put(0, 2);
        w.put(field + 1, 2);
        w.put(0, 10);
        const pic = s.picture(frame, field);
        for (let r = 0; r < mbRows; r++) {
          w.startCode(r + 1); // slice per macroblock row
          w.put(8, 5); // quantiser_scale_code (DC is not scaled by it)
          w.put(0, 1);
          const pred = [128, 128, 128]; // DC predictors reset at each slice
          for (let c = 0; c < mbCols; c++) {
            w.code('1'); // macroblock_address_increment 1
            w.code(type === 1 ? '1' : '00011'); // macroblock_type: intra (tables B.2, B.3, B.4)
            for (const [dx, dy] of [
              [0, 0],
              [1, 0],
              [0, 1],
              [1, 1],
            ] as const) {
              const v = pic.y(2 * c + dx, 2 * r + dy);
              dcBlock(w, LUMA_DC, v - (pred[0] as number));
              pred[0] = v;
            }
            const u = pic.cb(c, r);
            dcBlock(w, CHROMA_DC, u - (pred[1] as number));
            pred[1] = u;
            const v = pic.cr(c, r);
            dcBlock(w, CHROMA_DC, v - (pred[2] as number));
            pred[2] = v;
          }
        }
      }
    }
  }
  w.startCode(0xb7); // sequence end
  return w.done();
}
