/**
 * A tiny RGB canvas for the ffmpeg engine: background, cell blits and the audio band. (The native
 * engine paints the same plan in Rust; both follow the rules written in core/render-plan.ts.)
 */
import type { BandPlan, Rect, Rgb, Theme } from './types.js';

export interface Canvas {
  width: number;
  height: number;
  /** Packed RGB, 3 bytes per pixel. */
  data: Buffer;
}

export function createCanvas(width: number, height: number, color: Rgb): Canvas {
  const data = Buffer.alloc(width * height * 3);
  const canvas = { width, height, data };
  fillRect(canvas, { x: 0, y: 0, w: width, h: height }, color);
  return canvas;
}

export function fillRect(canvas: Canvas, rect: Rect, color: Rgb): void {
  const x0 = Math.max(0, rect.x);
  const x1 = Math.min(canvas.width, rect.x + rect.w);
  const y0 = Math.max(0, rect.y);
  const y1 = Math.min(canvas.height, rect.y + rect.h);
  for (let y = y0; y < y1; y++) {
    for (let x = x0; x < x1; x++) {
      const o = (y * canvas.width + x) * 3;
      canvas.data[o] = color[0];
      canvas.data[o + 1] = color[1];
      canvas.data[o + 2] = color[2];
    }
  }
}

/** Copies a packed-RGB image of exactly rect.w x rect.h into the canvas at rect. */
export function blit(canvas: Canvas, rect: Rect, rgb: Buffer): void {
  const rowBytes = rect.w * 3;
  for (let row = 0; row < rect.h; row++) {
    const y = rect.y + row;
    if (y < 0 || y >= canvas.height) continue;
    rgb.copy(canvas.data, (y * canvas.width + rect.x) * 3, row * rowBytes, (row + 1) * rowBytes);
  }
}

/** The header ffmpeg's ppm encoder writes for an 8-bit RGB image of `size`. */
export const ppmHeader = (size: { w: number; h: number }) => `P6\n${size.w} ${size.h}\n255\n`;

/** Parses a binary PPM (P6, maxval 255) as written by ffmpeg's ppm encoder. */
export function parsePpm(file: Buffer): { width: number; height: number; rgb: Buffer } | null {
  const header = /^P6\s+(\d+)\s+(\d+)\s+255\s/.exec(file.subarray(0, 64).toString('latin1'));
  if (!header) return null;
  const width = Number(header[1]);
  const height = Number(header[2]);
  const offset = header[0].length;
  if (file.length < offset + width * height * 3) return null;
  return { width, height, rgb: file.subarray(offset, offset + width * height * 3) };
}

/**
 * Paints the audio band per the BandPlan rule, from the column levels the plan carries (labels are
 * drawn later with the other labels).
 */
export function paintBand(canvas: Canvas, band: BandPlan, theme: Theme): void {
  const { rect } = band;
  fillRect(canvas, rect, theme.bandBackground);
  if (band.message) return;
  const span = band.endMs - band.startMs;
  for (let c = 0; c < rect.w; c++) {
    const level = band.levels?.[c] ?? 0;
    const peak = level >= theme.peakThreshold;
    const color = peak ? theme.bandPeak : theme.bandLevel;
    const bar = Math.round(level * (rect.h - 4));
    fillRect(canvas, { x: rect.x + c, y: rect.y + rect.h - bar, w: 1, h: bar }, color);
    if (peak) fillRect(canvas, { x: rect.x + c, y: rect.y, w: 1, h: 3 }, theme.bandPeak);
  }
  const tickHeight = Math.ceil(rect.h / 4);
  for (const tick of band.ticksMs) {
    const x = rect.x + Math.floor(((tick - band.startMs) * rect.w) / span);
    fillRect(canvas, { x, y: rect.y + rect.h - tickHeight, w: 1, h: tickHeight }, theme.bandTick);
  }
}
