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
 * Paints the audio band per the BandPlan rule, from the column levels the plan carries (a band with
 * a message is its background only: the message is a label, drawn later with the other labels).
 * The rule and its vectors: fixtures/vectors/band-painting.json (the native engine's is
 * crates/vidsheet-core/src/canvas.rs `Canvas::band`).
 */
export function paintBand(canvas: Canvas, band: BandPlan, theme: Theme): void {
  const { rect } = band;
  fillRect(canvas, rect, theme.bandBackground);
  if (band.message) return;
  const barRoom = Math.max(0, rect.h - 4);
  for (let c = 0; c < rect.w; c++) {
    const raw = band.levels?.[c] ?? 0;
    // NaN or out-of-range levels from a bad plan draw nothing rather than a wild bar.
    const level = Number.isFinite(raw) ? Math.min(1, Math.max(0, raw)) : 0;
    const peak = level >= theme.peakThreshold;
    const bar = Math.min(rect.h, Math.round(level * barRoom));
    fillRect(canvas, column(rect.x + c, rect.y + rect.h - bar, bar), peak ? theme.bandPeak : theme.bandLevel);
    if (peak) fillRect(canvas, column(rect.x + c, rect.y, Math.min(3, rect.h)), theme.bandPeak);
  }
  // No tick marks a band without a time span.
  const span = band.endMs - band.startMs;
  const ticks = span > 0 ? band.ticksMs : [];
  const tickHeight = Math.ceil(rect.h / 4);
  for (const tick of ticks) {
    const off = Math.floor(((tick - band.startMs) * rect.w) / span);
    if (off >= 0 && off < rect.w) {
      fillRect(canvas, column(rect.x + off, rect.y + rect.h - tickHeight, tickHeight), theme.bandTick);
    }
  }
}

/** A one-pixel-wide column `h` pixels high from (x, y) down. */
const column = (x: number, y: number, h: number): Rect => ({ x, y, w: 1, h });
