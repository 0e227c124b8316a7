/** Grid densities: cells per side, cells per sheet and the credits one sheet costs (spec: Density). */
export const DENSITIES = ['3x3', '4x4', '5x5', '6x6'] as const;
export type Density = (typeof DENSITIES)[number];
export const DEFAULT_DENSITY: Density = '3x3';

const GRID: Record<Density, { side: number; creditsPerSheet: number }> = {
  '3x3': { side: 3, creditsPerSheet: 1 },
  '4x4': { side: 4, creditsPerSheet: 2 },
  '5x5': { side: 5, creditsPerSheet: 3 },
  '6x6': { side: 6, creditsPerSheet: 5 },
};

export function isDensity(value: unknown): value is Density {
  return typeof value === 'string' && (DENSITIES as readonly string[]).includes(value);
}

/** Cells per row and per column. */
export const gridSide = (density: Density): number => GRID[density].side;
/** Cells (frames) per sheet. */
export const cellsPerSheet = (density: Density): number => GRID[density].side ** 2;
export const creditsPerSheet = (density: Density): number => GRID[density].creditsPerSheet;
