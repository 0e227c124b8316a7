/**
 * The sampling plan (DESIGN §2): how many sheets, which time each cell samples, and its label.
 */
import { cellsPerSheet, type Density } from './density.js';
import { formatLabel, roundToDecimals } from './time.js';
import type { Window } from './window.js';

/** One sheet per 90 s of window, whatever the density (density changes cells, not sheets). */
export const SECONDS_PER_SHEET = 90;

export interface PlannedCell {
  /** Sample time in ms relative to the container start; equals the label's value exactly. */
  timeMs: number;
  label: string;
}

export interface SamplingPlan {
  window: Window;
  density: Density;
  /** Fractional digits on every label of the job (0..3). */
  decimals: number;
  /** Cells per sheet, in time order; every sheet is full. */
  sheets: PlannedCell[][];
}

/** Thrown when a job would exceed a surface's sheet cap (hosted/remote); local has none. */
export class TooManySheetsError extends Error {
  constructor(readonly sheets: number) {
    super(`plan needs ${sheets} sheets`);
  }
}

export function sheetCount(windowMs: number): number {
  return Math.max(1, Math.ceil(windowMs / (SECONDS_PER_SHEET * 1000)));
}

/**
 * Cell i of N samples the centre of its slot, t_i = s + (i + 0.5) * L / N. Labels use the fewest
 * decimals that keep all N labels strictly increasing, and the cell time becomes the label's value,
 * so typing a label back as `start` lands on that very frame.
 */
export function makePlan(
  window: Window,
  density: Density,
  maxSheets = Number.POSITIVE_INFINITY,
): SamplingPlan {
  const length = window.endMs - window.startMs;
  const sheets = sheetCount(length);
  if (sheets > maxSheets) throw new TooManySheetsError(sheets);
  const perSheet = cellsPerSheet(density);
  const total = sheets * perSheet;
  const raw = Array.from({ length: total }, (_, i) => window.startMs + ((i + 0.5) * length) / total);

  let decimals = 3;
  for (let d = 0; d <= 3; d++) {
    const rounded = raw.map((t) => roundToDecimals(t, d));
    if (rounded.every((t, i) => i === 0 || t > (rounded[i - 1] as number))) {
      decimals = d;
      break;
    }
  }
  const cells = raw.map((t) => {
    const timeMs = roundToDecimals(t, decimals);
    return { timeMs, label: formatLabel(timeMs, decimals) };
  });
  return {
    window,
    density,
    decimals,
    sheets: Array.from({ length: sheets }, (_, s) => cells.slice(s * perSheet, (s + 1) * perSheet)),
  };
}
