/**
 * Reading sheets back: decode a JPEG, read the frame index a cell shows, sample colours.
 *
 * The index encoding is shared with the clip maker in `fixtures.ts` (`indexClip`): the upper
 * {@link INDEX_LAYOUT.blockFraction} of a frame is a grid of 4 x 3 flat blocks, block k (row-major
 * from the top-left) white when bit k of the frame index is set, black otherwise; the rest of the
 * frame is mid grey, where a sheet's label box may sit. The blocks are big and flat so the index
 * survives scaling down to about 150 x 85 px and JPEG quality 70.
 */
import { readFileSync } from 'node:fs';
import jpeg from 'jpeg-js';

/** The index pattern's geometry, in fractions of the displayed frame. */
export const INDEX_LAYOUT = {
  cols: 4,
  rows: 3,
  /** Top part of the frame holding the blocks; the rest is grey. */
  blockFraction: 0.7,
  /** Grey level of the lower band (sRGB, all channels). */
  grey: 128,
  /** Number of bits, so indices must stay below 2 ** bits. */
  bits: 12,
} as const;

export interface Rect {
  x: number;
  y: number;
  w: number;
  h: number;
}

/** A decoded image, RGBA, 4 bytes per pixel, row-major. */
export interface Image {
  width: number;
  height: number;
  data: Uint8Array;
}

export interface IndexRead {
  /** The frame index the cell shows. */
  index: number;
  /**
   * Smallest distance of any block's mean luma from the threshold (128), 0..128. Around 100 or
   * more for a clean read; below ~40 the cell is likely not an index frame (wrong frame rect,
   * rotation not applied, a blend of two frames, a black cell).
   */
  confidence: number;
  /** Mean luma of each block, bit order. */
  lumas: number[];
  /** Mean luma of the grey band's right half (away from the label box); about 128 when upright. */
  bandLuma: number;
}

/** Decodes JPEG bytes to RGBA. */
export function decodeJpeg(bytes: Uint8Array): Image {
  const img = jpeg.decode(bytes, { useTArray: true, formatAsRGBA: true, maxMemoryUsageInMB: 1024 });
  return { width: img.width, height: img.height, data: img.data };
}

/** Reads a JPEG file (a sheet) to RGBA. */
export function readJpeg(path: string): Image {
  return decodeJpeg(readFileSync(path));
}

/** Wraps raw rgb24 pixels (e.g. `ffmpeg -f rawvideo -pix_fmt rgb24`) as an RGBA {@link Image}. */
export function fromRgb24(rgb: Uint8Array, width: number, height: number): Image {
  if (rgb.length < width * height * 3) throw new Error(`rgb24 buffer too short for ${width}x${height}`);
  const data = new Uint8Array(width * height * 4);
  for (let i = 0, j = 0; i < width * height; i++, j += 3) {
    data[i * 4] = rgb[j] as number;
    data[i * 4 + 1] = rgb[j + 1] as number;
    data[i * 4 + 2] = rgb[j + 2] as number;
    data[i * 4 + 3] = 255;
  }
  return { width, height, data };
}

/** Encodes an {@link Image} as JPEG (jpeg-js, same quality scale as the sheets: 70 by default). */
export function encodeJpeg(img: Image, quality = 70): Buffer {
  return jpeg.encode({ width: img.width, height: img.height, data: img.data }, quality).data;
}

/**
 * Lays images of one size out in a grid (left to right, top to bottom, `gap` px of black between
 * cells), like a sheet, so many frames can go through one JPEG encode (jpeg-js spends ~10-40 ms
 * setting up each encode). Returns the grid and each image's rect on it.
 */
export function composeGrid(images: Image[], cols: number, gap = 2): { image: Image; rects: Rect[] } {
  const first = images[0];
  if (!first) throw new Error('composeGrid: no images');
  const { width: w, height: h } = first;
  const rows = Math.ceil(images.length / cols);
  const width = cols * w + (cols - 1) * gap;
  const height = rows * h + (rows - 1) * gap;
  const data = new Uint8Array(width * height * 4);
  for (let i = 3; i < data.length; i += 4) data[i] = 255;
  const rects: Rect[] = images.map((img, i) => {
    if (img.width !== w || img.height !== h) throw new Error('composeGrid: images differ in size');
    const x = (i % cols) * (w + gap);
    const y = Math.floor(i / cols) * (h + gap);
    for (let row = 0; row < h; row++) {
      data.set(img.data.subarray(row * w * 4, (row + 1) * w * 4), ((y + row) * width + x) * 4);
    }
    return { x, y, w, h };
  });
  return { image: { width, height, data }, rects };
}

/** The whole image as a rect. */
export function fullRect(img: Image): Rect {
  return { x: 0, y: 0, w: img.width, h: img.height };
}

function clipRect(img: Image, r: Rect): { x0: number; y0: number; x1: number; y1: number } {
  const x0 = Math.max(0, Math.round(r.x));
  const y0 = Math.max(0, Math.round(r.y));
  const x1 = Math.min(img.width, Math.round(r.x + r.w));
  const y1 = Math.min(img.height, Math.round(r.y + r.h));
  if (x1 <= x0 || y1 <= y0) {
    throw new Error(`empty rect ${JSON.stringify(r)} on a ${img.width}x${img.height} image`);
  }
  return { x0, y0, x1, y1 };
}

/** Mean colour `[r, g, b]` over a rect (coordinates rounded, clipped to the image). */
export function meanColor(img: Image, rect: Rect): [number, number, number] {
  const { x0, y0, x1, y1 } = clipRect(img, rect);
  let r = 0;
  let g = 0;
  let b = 0;
  for (let y = y0; y < y1; y++) {
    let p = (y * img.width + x0) * 4;
    for (let x = x0; x < x1; x++, p += 4) {
      r += img.data[p] as number;
      g += img.data[p + 1] as number;
      b += img.data[p + 2] as number;
    }
  }
  const n = (x1 - x0) * (y1 - y0);
  return [r / n, g / n, b / n];
}

/** BT.601 luma of an sRGB triple. */
export function luma([r, g, b]: readonly [number, number, number]): number {
  return 0.299 * r + 0.587 * g + 0.114 * b;
}

/** Mean luma over a rect. */
export function meanLuma(img: Image, rect: Rect): number {
  return luma(meanColor(img, rect));
}

/**
 * True when a rect is black: mean luma <= `maxMean` (default 16) and at most `maxBrightFraction`
 * (default 1%) of its pixels have a luma above 48. Pass a rect that avoids the label box.
 */
export function isBlack(
  img: Image,
  rect: Rect,
  opts: { maxMean?: number; maxBrightFraction?: number } = {},
): boolean {
  const { maxMean = 16, maxBrightFraction = 0.01 } = opts;
  const { x0, y0, x1, y1 } = clipRect(img, rect);
  let sum = 0;
  let bright = 0;
  for (let y = y0; y < y1; y++) {
    let p = (y * img.width + x0) * 4;
    for (let x = x0; x < x1; x++, p += 4) {
      const l = luma([img.data[p] as number, img.data[p + 1] as number, img.data[p + 2] as number]);
      sum += l;
      if (l > 48) bright++;
    }
  }
  const n = (x1 - x0) * (y1 - y0);
  return sum / n <= maxMean && bright / n <= maxBrightFraction;
}

/** The rect of block `k` inside a cell (the whole block, before taking its centre). */
export function blockRect(cell: Rect, k: number): Rect {
  const { cols, rows, blockFraction } = INDEX_LAYOUT;
  const col = k % cols;
  const row = Math.floor(k / cols);
  const bw = cell.w / cols;
  const bh = (cell.h * blockFraction) / rows;
  return { x: cell.x + col * bw, y: cell.y + row * bh, w: bw, h: bh };
}

/** The central half (in each direction) of a rect. */
function centre(r: Rect): Rect {
  return { x: r.x + r.w / 4, y: r.y + r.h / 4, w: r.w / 2, h: r.h / 2 };
}

/**
 * Reads the frame index shown in a cell at `rect` (the frame's area on the sheet, label box
 * included): the mean luma of the central 50% of each block, thresholded at 128.
 */
export function decodeIndex(img: Image, rect: Rect): IndexRead {
  const { cols, rows, blockFraction } = INDEX_LAYOUT;
  let index = 0;
  let confidence = 128;
  const lumas: number[] = [];
  for (let k = 0; k < cols * rows; k++) {
    const l = meanLuma(img, centre(blockRect(rect, k)));
    lumas.push(l);
    if (l >= 128) index |= 1 << k;
    confidence = Math.min(confidence, Math.abs(l - 128));
  }
  const bandTop = rect.y + rect.h * blockFraction;
  const band = { x: rect.x + rect.w / 2, y: bandTop, w: rect.w / 2, h: rect.y + rect.h - bandTop };
  const bandLuma = meanLuma(img, centre(band));
  return { index, confidence, lumas, bandLuma };
}
