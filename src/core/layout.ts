/**
 * Pixel layout of a sheet (DESIGN §3). Engines paint exactly these rectangles; no engine decides
 * a position of its own.
 *
 *   +--------------------------------------------+
 *   | audio band (local surfaces only)           |
 *   +----------+----------+----------+-----------+
 *   | cell     | cell     | cell     |   ...      gutters between and around
 *   |[0:05]    |[0:15]    |[0:25]    |            label box at the bottom-left of each cell
 *   +----------+----------+----------+
 */

import { type Density, gridSide } from './density.js';
import type { PlannedCell } from './plan.js';
import type { BandPlan, CellPlan, LabelPlan, Rect, SheetPlan, Theme } from './render-plan.js';

/** About what vision models ingest without downscaling. */
export const SHEET_WIDTH = 1568;
export const GUTTER = 4;
export const BAND_HEIGHT = 48;
/** JPEG quality 0.70 on every surface (spec: Limits). */
export const JPEG_QUALITY = 70;

/** DejaVu Sans Mono metrics, in em: glyph advance and the height of a digit above the baseline. */
const FONT_ADVANCE_EM = 1233 / 2048;
const DIGIT_HEIGHT_EM = 1493 / 2048;

export const THEME: Theme = {
  background: [17, 17, 17],
  labelBox: [0, 0, 0, 190],
  labelText: [255, 255, 255],
  bandBackground: [28, 28, 32],
  bandLevel: [92, 170, 220],
  bandPeak: [255, 176, 32],
  bandTick: [200, 200, 200],
  peakThreshold: 0.75,
};

export interface Grid {
  width: number;
  height: number;
  side: number;
  cellWidth: number;
  cellHeight: number;
  /** Top of the first row of cells. */
  gridTop: number;
  band: Rect | null;
  fontSize: number;
}

/**
 * Sheet geometry for a source of the given display size. Cells keep the source's display aspect
 * (after rotation and sample aspect ratio); the sheet is about SHEET_WIDTH wide.
 */
export function computeGrid(
  displayWidth: number,
  displayHeight: number,
  density: Density,
  withBand: boolean,
): Grid {
  const side = gridSide(density);
  const aspect = displayWidth > 0 && displayHeight > 0 ? displayWidth / displayHeight : 16 / 9;
  const cellWidth = Math.floor((SHEET_WIDTH - (side + 1) * GUTTER) / side);
  const cellHeight = Math.max(16, Math.round(cellWidth / aspect));
  const width = side * cellWidth + (side + 1) * GUTTER;
  const band = withBand ? { x: GUTTER, y: GUTTER, w: width - 2 * GUTTER, h: BAND_HEIGHT } : null;
  const gridTop = band ? band.y + band.h + GUTTER : GUTTER;
  const height = gridTop + side * (cellHeight + GUTTER);
  // Legible at 6x6 (cells ~256 px wide) without swamping a 3x3 cell; never taller than the cell allows.
  const fontSize = Math.max(10, Math.min(28, Math.round(cellWidth * 0.085), Math.floor(cellHeight / 2.2)));
  return { width, height, side, cellWidth, cellHeight, gridTop, band, fontSize };
}

/** A label box anchored at (x, bottom): text in a dark box with padding. */
export function labelAt(text: string, x: number, bottom: number, fontSize: number): LabelPlan {
  const pad = Math.max(2, Math.round(fontSize * 0.3));
  const digitHeight = Math.round(fontSize * DIGIT_HEIGHT_EM);
  const box = {
    x,
    y: bottom - (digitHeight + 2 * pad),
    w: Math.ceil(text.length * fontSize * FONT_ADVANCE_EM) + 2 * pad,
    h: digitHeight + 2 * pad,
  };
  return { text, box, textX: box.x + pad, baselineY: box.y + pad + digitHeight, fontSize };
}

/** Rectangle of cell `index` (0-based, row-major) on a sheet. */
export function cellRect(grid: Grid, index: number): Rect {
  const col = index % grid.side;
  const row = Math.floor(index / grid.side);
  return {
    x: GUTTER + col * (grid.cellWidth + GUTTER),
    y: grid.gridTop + row * (grid.cellHeight + GUTTER),
    w: grid.cellWidth,
    h: grid.cellHeight,
  };
}

/**
 * The band of one sheet covers that sheet's own slots: from the start of its first cell's slot to
 * the end of its last, on the absolute timeline, with a tick at every cell time.
 */
function bandFor(
  grid: Grid,
  cells: PlannedCell[],
  slotStartMs: number,
  slotEndMs: number,
  hasAudio: boolean,
): BandPlan | null {
  if (!grid.band) return null;
  const rect = grid.band;
  const message = hasAudio
    ? null
    : labelAt(
        'no audio',
        rect.x + Math.round(rect.w / 2 - 4 * grid.fontSize * FONT_ADVANCE_EM),
        rect.y + Math.round(rect.h / 2 + grid.fontSize * 0.6),
        grid.fontSize,
      );
  return { rect, startMs: slotStartMs, endMs: slotEndMs, ticksMs: cells.map((c) => c.timeMs), message };
}

export interface LayoutInput {
  grid: Grid;
  /** Cells per sheet from the sampling plan. */
  sheets: PlannedCell[][];
  window: { startMs: number; endMs: number };
  paths: string[];
  hasAudio: boolean;
}

/** Turns the sampling plan into what engines paint, one SheetPlan per output file. */
export function layoutSheets({ grid, sheets, window, paths, hasAudio }: LayoutInput): SheetPlan[] {
  const total = sheets.reduce((n, s) => n + s.length, 0);
  const slotMs = (window.endMs - window.startMs) / total;
  let first = 0;
  return sheets.map((cells, s) => {
    const plans: CellPlan[] = cells.map((cell, i) => {
      const rect = cellRect(grid, i);
      return {
        timeMs: cell.timeMs,
        rect,
        label: labelAt(cell.label, rect.x, rect.y + rect.h, grid.fontSize),
      };
    });
    const slotStart = Math.round(window.startMs + first * slotMs);
    first += cells.length;
    const slotEnd = Math.round(window.startMs + first * slotMs);
    return {
      path: paths[s] as string,
      width: grid.width,
      height: grid.height,
      cells: plans,
      band: bandFor(grid, cells, slotStart, slotEnd, hasAudio),
    };
  });
}
